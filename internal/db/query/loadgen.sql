-- The load generator's checks (loadgen's PostgreSQL watcher): what the
-- ledger holds of the packets and envelopes a run was answered.

-- name: LoadgenClaimedPackets :many
-- The packets of ids that PostgreSQL holds claimed, to time each answered
-- grab's arrival in the ledger.
SELECT id, claimed_by::text AS claimed_by, amount_cents, coalesce(order_no, '')::text AS order_no
FROM packets
WHERE id = ANY(@ids::bigint[]) AND claimed_by IS NOT NULL;

-- name: LoadgenEnvelopeClaims :many
-- Every claim PostgreSQL holds in the run's envelopes, to check each
-- against the answers.
SELECT id, envelope_id, claimed_by::text AS claimed_by
FROM packets
WHERE envelope_id = ANY(@envelope_ids::bigint[]) AND claimed_by IS NOT NULL;
