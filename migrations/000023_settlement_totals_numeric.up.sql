-- settlement_totals' cent sums never reset: they add every finished
-- envelope's cents for the life of the service. As bigint they overflowed
-- once the cents settled passed 2^63-1 (about a thousand envelopes of the
-- largest MAX_TOTAL_CENTS accepted), and from then on every settling
-- transaction, which adds to them, failed: no envelope was settled or
-- refunded again. numeric has no such bound.
--
-- The table holds one row per final status: the rewrite is instant, and the
-- ACCESS EXCLUSIVE lock only makes the settlements of that moment wait.

ALTER TABLE settlement_totals
    ALTER COLUMN claimed_cents TYPE numeric,
    ALTER COLUMN refunded_cents TYPE numeric;

COMMENT ON COLUMN settlement_totals.claimed_cents IS
    'Their claimed cents, summed (numeric: a running total for the life of the service, past bigint''s range).';
COMMENT ON COLUMN settlement_totals.refunded_cents IS
    'Their refunded cents, summed (numeric: a running total for the life of the service, past bigint''s range).';
