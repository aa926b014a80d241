-- Comments restated; nothing is rewritten or scanned.
--
-- claim_conflicts.reason has a new value, regranted_to_holder: the claim
-- names the user's own packet under an order number the ledger does not hold
-- (Redis lost the grant, came back from an older copy, and granted the packet
-- to its holder again). It was recorded as order_no_in_use, which the
-- flusher takes as harmless, so the envelope was not suspended and Redis
-- went on answering a number the ledger, the events and the webhooks do not
-- have; now the flusher suspends it, as for the other reasons.
--
-- event_messages' columns come from events or, for packet.claimed events
-- since 000017, from claim_events (claim_event_runs); their comments named
-- events alone.
--
-- user_history's comment said ORDER BY envelope_id DESC reads a user's grabs
-- in index order: through the view's join of claims and packet_pool, the
-- planner sorts them; reading claims itself does not.
--
-- COMMENT takes SHARE UPDATE EXCLUSIVE on claim_conflicts and the view:
-- every read and write goes on.

COMMENT ON COLUMN claim_conflicts.reason IS
    'unknown_packet, wrong_envelope, packet_refunded, user_holds_another_packet, claimed_by_another_user, regranted_to_holder (the user''s own packet under an order number the ledger does not hold: Redis granted it again) or order_no_in_use (applied, without its order number).';

COMMENT ON COLUMN event_messages.type IS 'The event type (events.type, or packet.claimed from claim_events).';
COMMENT ON COLUMN event_messages.envelope_id IS 'The envelope (events.envelope_id or claim_events.envelope_id).';
COMMENT ON COLUMN event_messages.created_at IS 'When the event was written (events.created_at or claim_events.created_at).';
COMMENT ON COLUMN event_messages.delivered_at IS 'When the webhook receiver accepted it (events or claim_events delivered_at).';
COMMENT ON COLUMN event_messages.attempts IS 'Failed webhook deliveries (events or claim_events attempts).';
COMMENT ON COLUMN event_messages.next_attempt_at IS 'When the next webhook delivery is due (events or claim_events next_attempt_at).';
COMMENT ON COLUMN event_messages.last_error IS 'The last webhook delivery error (events or claim_events last_error).';

COMMENT ON VIEW user_history IS
    'Per user, every grab with its envelope (sender, share code, status); filter by user_id (indexed: claims_user_envelope_key). Any order sorts the user''s grabs; for a page of a user with many, read claims itself (WHERE user_id = ... ORDER BY envelope_id DESC LIMIT n reads the index backward).';
