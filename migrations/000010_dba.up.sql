-- For DBAs: every table, view and column says what it holds; indexes for
-- the questions of docs/dba.md; views for the common reads; and the
-- functions behind `flusher dba grant|revoke` (a read-only role).
--
-- Times are timestamptz (an instant, shown in the session's TimeZone); "day"
-- in the views is the UTC day. Money is integer cents.

-- Indexes for docs/dba.md. packets_claimed_at_idx serves "grabs of a day"
-- (totals, the biggest packets): without it those read every packet. Each
-- claim adds one entry to it (the cost is in BENCHMARKS.md). Settlements
-- add the only entries of envelopes_settled_at_idx ("refunds of a day").
CREATE INDEX packets_claimed_at_idx ON packets (claimed_at) WHERE claimed_at IS NOT NULL;
CREATE INDEX envelopes_settled_at_idx ON envelopes (settled_at) WHERE settled_at IS NOT NULL;
COMMENT ON INDEX packets_claimed_at_idx IS 'Grabs by time: the day''s totals and biggest packets (docs/dba.md).';
COMMENT ON INDEX envelopes_settled_at_idx IS 'Settlements by time: refunds of a day (docs/dba.md).';

-- Per-day totals per sender, by the UTC day an envelope was created.
CREATE VIEW sender_daily_totals AS
SELECT (e.created_at AT TIME ZONE 'UTC')::date                            AS day,
       e.sender_id,
       count(*)                                                           AS envelopes,
       sum(e.total_cents)::bigint                                         AS total_cents,
       sum(e.claimed_cents)::bigint                                       AS claimed_cents,
       sum(e.refunded_cents)::bigint                                      AS refunded_cents,
       sum(e.total_cents - e.claimed_cents - e.refunded_cents)::bigint    AS outstanding_cents,
       count(*) FILTER (WHERE e.status IN ('settled', 'failed'))          AS finished_envelopes,
       count(*) FILTER (WHERE e.status = 'suspended')                     AS suspended_envelopes
FROM envelopes e
GROUP BY 1, 2;

-- Per-user history: every grab with its envelope.
CREATE VIEW user_history AS
SELECT p.claimed_by   AS user_id,
       p.claimed_at,
       p.amount_cents,
       p.order_no,
       p.id           AS packet_id,
       p.envelope_id,
       e.sender_id,
       e.share_code,
       e.status       AS envelope_status
FROM packets p
JOIN envelopes e ON e.id = p.envelope_id
WHERE p.claimed_by IS NOT NULL;

-- Read-only access (`flusher dba grant|revoke -role NAME`). The role name is
-- quoted by format('%I'), never pasted. The functions run with the caller's
-- rights: the caller must own the tables (the role that runs migrations),
-- and the default privileges cover the tables that caller creates later.
CREATE FUNCTION dba_check_role(role_name text) RETURNS void LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
        RAISE EXCEPTION 'role % does not exist', quote_ident(role_name)
            USING ERRCODE = 'undefined_object', HINT = 'CREATE ROLE it first (docs/dba.md).';
    END IF;
    -- Revoking from the role the service runs as, a role it belongs to or
    -- one owning tables here would take the service's own rights away;
    -- granting to them or to a superuser grants nothing. Membership is
    -- followed in pg_auth_members, as pg_has_role makes a superuser a
    -- member of every role.
    IF EXISTS (
        WITH RECURSIVE mine(oid) AS (
            SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user
            UNION
            SELECT m.roleid FROM pg_auth_members m JOIN mine ON m.member = mine.oid)
        SELECT 1 FROM pg_roles r WHERE r.rolname = role_name
          AND (r.rolsuper OR r.oid IN (SELECT oid FROM mine)
               OR EXISTS (SELECT 1 FROM pg_class c WHERE c.relowner = r.oid
                          AND c.relnamespace = current_schema()::regnamespace)))
    THEN
        RAISE EXCEPTION 'role % is the service''s own role, one it belongs to, one owning its tables, or a superuser',
            quote_ident(role_name)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name a role made for reading (docs/dba.md).';
    END IF;
END $$;

CREATE FUNCTION dba_grant_read(role_name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dba_check_role(role_name);
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), role_name);
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO %I', current_schema(), role_name);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO %I', current_schema(), role_name);
END $$;

CREATE FUNCTION dba_revoke_read(role_name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dba_check_role(role_name);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I REVOKE SELECT ON TABLES FROM %I', current_schema(), role_name);
    EXECUTE format('REVOKE SELECT ON ALL TABLES IN SCHEMA %I FROM %I', current_schema(), role_name);
    EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM %I', current_schema(), role_name);
END $$;

REVOKE EXECUTE ON FUNCTION dba_check_role(text), dba_grant_read(text), dba_revoke_read(text) FROM PUBLIC;

COMMENT ON FUNCTION dba_check_role(text) IS
    'Refuses a role that does not exist (42704), or that is the caller, one the caller belongs to, one owning tables of the schema, or a superuser (22023).';
COMMENT ON FUNCTION dba_grant_read(text) IS
    'flusher dba grant: USAGE on the schema and SELECT on every table and view to the role, and on the tables the caller creates later (default privileges).';
COMMENT ON FUNCTION dba_revoke_read(text) IS
    'flusher dba revoke: takes back what dba_grant_read gave the role, default privileges included.';
COMMENT ON FUNCTION events_notify() IS
    'Trigger of events: one pg_notify on channel redpacket_events per statement that wrote events, payload the highest id; delivered at commit.';

-- Tables.
COMMENT ON TABLE sequence_numbers IS
    'Id allocator: one row per kind of id (envelope, packet, event). Grabbers take blocks of step ids; events take theirs one statement at a time (take_event_ids).';
COMMENT ON COLUMN sequence_numbers.key_name IS 'Kind of id: envelope, packet or event.';
COMMENT ON COLUMN sequence_numbers.current_value IS 'The last id handed out (the next block starts after it).';
COMMENT ON COLUMN sequence_numbers.max_value IS 'The highest id that may ever be handed out (2^53 - 1: exact as a JSON number).';
COMMENT ON COLUMN sequence_numbers.step IS 'How many ids a grabber takes at a time.';
COMMENT ON COLUMN sequence_numbers.updated_at IS 'When ids were last handed out.';

COMMENT ON TABLE service_settings IS
    'Settings every process must agree on, read at start; one row per setting.';
COMMENT ON COLUMN service_settings.name IS 'The setting: redis_shards (how many Redis shards envelopes are spread over).';
COMMENT ON COLUMN service_settings.value IS 'Its value. redis_shards never changes once envelopes exist: an envelope''s shard is its id modulo it.';

COMMENT ON TABLE envelopes IS
    'One row per red envelope: what the sender put in, its status, and the money claimed and refunded. Written by the grabber at creation, then by the flusher.';
COMMENT ON COLUMN envelopes.id IS 'Envelope id (from sequence_numbers ''envelope''); the API''s envelope_id.';
COMMENT ON COLUMN envelopes.shard IS 'Redis shard holding its live state: id modulo service_settings.redis_shards.';
COMMENT ON COLUMN envelopes.share_code IS 'The code a user grabs with: yyMMdd + 5 digits, unique; set at creation.';
COMMENT ON COLUMN envelopes.sender_id IS 'Who sent it: the campaign backend''s user id.';
COMMENT ON COLUMN envelopes.total_cents IS 'Money put in, cents; the sum of its packets'' amount_cents. Never changes.';
COMMENT ON COLUMN envelopes.count IS 'How many packets it was split into. Never changes.';
COMMENT ON COLUMN envelopes.status IS
    'loading, open, sold_out, expired, settled, suspended or failed (domain envelope_status; transitions in docs/dba.md).';
COMMENT ON COLUMN envelopes.created_at IS 'When it was created (UTC instant).';
COMMENT ON COLUMN envelopes.expires_at IS 'When grabs stop being granted (UTC instant); set at creation.';
COMMENT ON COLUMN envelopes.settled_at IS 'When it reached settled or failed (unclaimed packets refunded); NULL before.';
COMMENT ON COLUMN envelopes.claimed_cents IS
    'Cents of its claimed packets, kept by the flusher in the transaction that claims them; lags Redis by the flush delay.';
COMMENT ON COLUMN envelopes.refunded_cents IS 'Cents refunded to the sender, set at settlement (0 before); claimed + refunded = total once settled.';
COMMENT ON COLUMN envelopes.suspended_at IS 'When it was suspended (Redis lost state it may need); NULL unless status is suspended.';
COMMENT ON COLUMN envelopes.suspend_reason IS 'Why it was suspended, in words; NULL unless status is suspended. Cleared by flusher recover.';

COMMENT ON TABLE packets IS
    'One row per packet of an envelope: its amount, and who claimed it or when it was refunded. Inserted with the envelope; claimed by the flusher; refunded at settlement.';
COMMENT ON COLUMN packets.id IS 'Packet id (from sequence_numbers ''packet'').';
COMMENT ON COLUMN packets.envelope_id IS 'Its envelope (envelopes.id; not a declared foreign key, for the speed of creation: flusher audit checks it).';
COMMENT ON COLUMN packets.amount_cents IS 'Its amount, cents, at least 1. Never changes.';
COMMENT ON COLUMN packets.claimed_by IS 'The user who grabbed it; NULL while unclaimed. A user holds at most one packet per envelope.';
COMMENT ON COLUMN packets.claimed_at IS 'When the grab was granted in Redis (UTC instant), not when the flusher wrote it; NULL while unclaimed.';
COMMENT ON COLUMN packets.order_no IS 'The grab''s order number, yyyyMMdd + 10 digits, unique; NULL while unclaimed.';
COMMENT ON COLUMN packets.refunded_at IS 'When it was refunded to the sender at settlement (UTC instant); NULL unless refunded. Never set on a claimed packet.';

COMMENT ON TABLE claim_conflicts IS
    'Claims from Redis that the flusher did not apply because PostgreSQL says otherwise (or applied without their order number). One row per (envelope, packet, user); kept for an operator.';
COMMENT ON COLUMN claim_conflicts.id IS 'Row id.';
COMMENT ON COLUMN claim_conflicts.envelope_id IS 'The envelope the claim named.';
COMMENT ON COLUMN claim_conflicts.packet_id IS 'The packet the claim named.';
COMMENT ON COLUMN claim_conflicts.user_id IS 'The user Redis granted the packet to.';
COMMENT ON COLUMN claim_conflicts.claimed_at IS 'When Redis granted the claim (UTC instant).';
COMMENT ON COLUMN claim_conflicts.reason IS
    'unknown_packet, wrong_envelope, packet_refunded, user_holds_another_packet, claimed_by_another_user or order_no_in_use.';
COMMENT ON COLUMN claim_conflicts.found_at IS 'When the flusher recorded it.';

COMMENT ON TABLE user_short_ids IS
    'Each user''s short numeric id, unique both ways; the truth Redis''s bitmap of used ids is rebuilt from.';
COMMENT ON COLUMN user_short_ids.user_id IS 'The campaign backend''s user id.';
COMMENT ON COLUMN user_short_ids.short_id IS 'The short id, within SHORT_ID_MIN..SHORT_ID_MAX when handed out.';
COMMENT ON COLUMN user_short_ids.created_at IS 'When it was handed out.';

COMMENT ON TABLE redis_epochs IS
    'The epoch token each Redis shard held when the flusher last checked it; a shard whose token differs lost its data.';
COMMENT ON COLUMN redis_epochs.shard IS 'Redis shard number.';
COMMENT ON COLUMN redis_epochs.epoch IS 'The token; Redis keeps the same one under the shard''s epoch key.';
COMMENT ON COLUMN redis_epochs.updated_at IS 'When the token was last written (a new shard, or one replaced after a loss).';

COMMENT ON TABLE events IS
    'Outbox: one row per change the campaign backend is told of (GET /v1/events, webhooks), written in the transaction of the change. Pruned after EVENTS_RETENTION.';
COMMENT ON COLUMN events.id IS 'Position in the feed: gap-free, visible in commit order (take_event_ids).';
COMMENT ON COLUMN events.type IS 'packet.claimed, envelope.sold_out, envelope.settled, envelope.suspended or envelope.recovered (domain event_type).';
COMMENT ON COLUMN events.envelope_id IS 'The envelope the event is about.';
COMMENT ON COLUMN events.packet_id IS 'For packet.claimed: the packet (its facts are read from packets, see event_messages); NULL otherwise.';
COMMENT ON COLUMN events.data IS 'For the other types: the event''s data as sent; NULL for packet.claimed.';
COMMENT ON COLUMN events.created_at IS 'When it was written (clock time under the position lock, so it grows with id).';
COMMENT ON COLUMN events.delivered_at IS 'When the webhook receiver accepted it; NULL while undelivered or without a webhook.';
COMMENT ON COLUMN events.attempts IS 'Webhook deliveries tried and failed so far.';
COMMENT ON COLUMN events.next_attempt_at IS 'When the next webhook delivery is due after a failure; NULL before any.';
COMMENT ON COLUMN events.last_error IS 'The last webhook delivery''s failure, in words; NULL before any.';

COMMENT ON TABLE settlement_totals IS
    'Totals of the envelopes that reached a final status, one row per status (settled, failed), added to by each settlement''s transaction; exported by the flushers.';
COMMENT ON COLUMN settlement_totals.status IS 'The final status: settled or failed.';
COMMENT ON COLUMN settlement_totals.envelopes IS 'How many envelopes reached it.';
COMMENT ON COLUMN settlement_totals.claimed_cents IS 'Their claimed cents, summed.';
COMMENT ON COLUMN settlement_totals.refunded_cents IS 'Their refunded cents, summed.';

COMMENT ON TABLE audit_last_run IS 'The outcome of the last flusher audit (one row, replaced by each run).';
COMMENT ON COLUMN audit_last_run.only_row IS 'Always true: keeps the table to one row.';
COMMENT ON COLUMN audit_last_run.finished_at IS 'When the audit finished.';
COMMENT ON COLUMN audit_last_run.violations IS 'Money invariants it found broken (0: clean).';
COMMENT ON COLUMN audit_last_run.suspended IS 'Suspended envelopes it found.';
COMMENT ON COLUMN audit_last_run.envelopes IS 'Envelopes it checked.';
COMMENT ON COLUMN audit_last_run.all_envelopes IS 'Whether it checked every envelope (-all) or a recent window (-since).';

-- Views.
COMMENT ON VIEW envelope_totals IS
    'One row per envelope with its grabs counted from the packets themselves (not from envelopes.claimed_cents).';
COMMENT ON COLUMN envelope_totals.envelope_id IS 'envelopes.id.';
COMMENT ON COLUMN envelope_totals.sender_id IS 'envelopes.sender_id.';
COMMENT ON COLUMN envelope_totals.status IS 'envelopes.status.';
COMMENT ON COLUMN envelope_totals.count IS 'Packets it was split into.';
COMMENT ON COLUMN envelope_totals.total_cents IS 'Money put in, cents.';
COMMENT ON COLUMN envelope_totals.grabbed_count IS 'Packets claimed, counted in packets.';
COMMENT ON COLUMN envelope_totals.grabbed_cents IS 'Cents of the claimed packets, summed from packets.';
COMMENT ON COLUMN envelope_totals.remaining_count IS 'Packets not claimed (offered, or refunded once settled).';
COMMENT ON COLUMN envelope_totals.refunded_cents IS 'envelopes.refunded_cents: set at settlement.';
COMMENT ON COLUMN envelope_totals.created_at IS 'envelopes.created_at.';
COMMENT ON COLUMN envelope_totals.expires_at IS 'envelopes.expires_at.';
COMMENT ON COLUMN envelope_totals.settled_at IS 'envelopes.settled_at.';

COMMENT ON VIEW user_grabs IS 'Every grab of every user (one row per claimed packet); filter by user_id (indexed).';
COMMENT ON COLUMN user_grabs.user_id IS 'Who grabbed (packets.claimed_by).';
COMMENT ON COLUMN user_grabs.envelope_id IS 'The envelope.';
COMMENT ON COLUMN user_grabs.packet_id IS 'The packet.';
COMMENT ON COLUMN user_grabs.amount_cents IS 'What the user got, cents.';
COMMENT ON COLUMN user_grabs.order_no IS 'The grab''s order number.';
COMMENT ON COLUMN user_grabs.claimed_at IS 'When the grab was granted (UTC instant).';

COMMENT ON VIEW event_messages IS 'Every event as the feed and the webhooks send it: a packet.claimed event''s data comes from its packet.';
COMMENT ON COLUMN event_messages.id IS 'events.id: position in the feed.';
COMMENT ON COLUMN event_messages.type IS 'events.type.';
COMMENT ON COLUMN event_messages.envelope_id IS 'events.envelope_id.';
COMMENT ON COLUMN event_messages.data IS 'The event''s JSON data as sent.';
COMMENT ON COLUMN event_messages.created_at IS 'events.created_at.';
COMMENT ON COLUMN event_messages.delivered_at IS 'events.delivered_at: accepted by the webhook receiver.';
COMMENT ON COLUMN event_messages.attempts IS 'events.attempts: failed webhook deliveries.';
COMMENT ON COLUMN event_messages.next_attempt_at IS 'events.next_attempt_at.';
COMMENT ON COLUMN event_messages.last_error IS 'events.last_error.';

COMMENT ON VIEW sender_daily_totals IS
    'Per sender and UTC day of creation: envelopes and their money. Filter by sender_id (indexed); claimed_cents lags Redis by the flush delay.';
COMMENT ON COLUMN sender_daily_totals.day IS 'The UTC day the envelopes were created.';
COMMENT ON COLUMN sender_daily_totals.sender_id IS 'The sender.';
COMMENT ON COLUMN sender_daily_totals.envelopes IS 'Envelopes created that day.';
COMMENT ON COLUMN sender_daily_totals.total_cents IS 'Money put into them, cents.';
COMMENT ON COLUMN sender_daily_totals.claimed_cents IS 'Cents claimed from them so far (as far as the flusher has written).';
COMMENT ON COLUMN sender_daily_totals.refunded_cents IS 'Cents refunded from them at settlement.';
COMMENT ON COLUMN sender_daily_totals.outstanding_cents IS 'Cents neither claimed nor refunded yet: on offer, or waiting for settlement.';
COMMENT ON COLUMN sender_daily_totals.finished_envelopes IS 'Of them, settled or failed.';
COMMENT ON COLUMN sender_daily_totals.suspended_envelopes IS 'Of them, suspended (waiting for an operator).';

COMMENT ON VIEW user_history IS
    'Per user, every grab with its envelope (sender, share code, status); filter by user_id (indexed), newest first by claimed_at.';
COMMENT ON COLUMN user_history.user_id IS 'Who grabbed.';
COMMENT ON COLUMN user_history.claimed_at IS 'When the grab was granted (UTC instant).';
COMMENT ON COLUMN user_history.amount_cents IS 'What the user got, cents.';
COMMENT ON COLUMN user_history.order_no IS 'The grab''s order number.';
COMMENT ON COLUMN user_history.packet_id IS 'The packet.';
COMMENT ON COLUMN user_history.envelope_id IS 'The envelope.';
COMMENT ON COLUMN user_history.sender_id IS 'Who sent the envelope.';
COMMENT ON COLUMN user_history.share_code IS 'The envelope''s share code.';
COMMENT ON COLUMN user_history.envelope_status IS 'The envelope''s status now.';
