-- The comments of before (000017).
COMMENT ON COLUMN claim_conflicts.reason IS
    'unknown_packet, wrong_envelope, packet_refunded, user_holds_another_packet, claimed_by_another_user or order_no_in_use.';
COMMENT ON COLUMN event_messages.type IS 'events.type.';
COMMENT ON COLUMN event_messages.envelope_id IS 'events.envelope_id.';
COMMENT ON COLUMN event_messages.created_at IS 'events.created_at.';
COMMENT ON COLUMN event_messages.delivered_at IS 'events.delivered_at: accepted by the webhook receiver.';
COMMENT ON COLUMN event_messages.attempts IS 'events.attempts: failed webhook deliveries.';
COMMENT ON COLUMN event_messages.next_attempt_at IS 'events.next_attempt_at.';
COMMENT ON COLUMN event_messages.last_error IS 'events.last_error.';
COMMENT ON VIEW user_history IS
    'Per user, every grab with its envelope (sender, share code, status); filter by user_id (indexed, by envelope: ORDER BY envelope_id DESC reads in index order, newest envelope first; ORDER BY claimed_at DESC sorts the user''s grabs).';
