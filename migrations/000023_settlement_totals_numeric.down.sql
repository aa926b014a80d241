-- Back to bigint: fails (and changes nothing) if a sum has passed bigint's
-- range, which the version before cannot hold.
ALTER TABLE settlement_totals
    ALTER COLUMN claimed_cents TYPE bigint,
    ALTER COLUMN refunded_cents TYPE bigint;

COMMENT ON COLUMN settlement_totals.claimed_cents IS 'Their claimed cents, summed.';
COMMENT ON COLUMN settlement_totals.refunded_cents IS 'Their refunded cents, summed.';
