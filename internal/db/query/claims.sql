-- name: ClaimPlan :exec
-- ClaimPlan keeps the planner, for the rest of the transaction, on the one
-- plan the claim statements should have: each claim finds its packet by
-- primary key, a nested loop of index probes. Statistics taken while packets
-- was small (a new deployment) made the planner expect almost no unclaimed
-- packets and scan them all once per claim instead: a batch took tens of
-- seconds, not milliseconds. With sequential scans off it chose a merge join
-- that walks the primary key from the table's first packet up to the batch's
-- last (92,000 index entries for a batch of 2,000 at the top of a
-- 100,000-packet table, a fifth of the statement), a walk that grows with
-- the table; a hash join would read the whole table. set_config(..., true)
-- is SET LOCAL, three settings in one statement.
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('enable_hashjoin', 'off', true);

-- name: CopyClaims :copyfrom
-- CopyClaims appends a batch of claims with COPY, trusting it: AddClaims,
-- in the same transaction, checks it against the packets and adds it to
-- the envelopes. A batch only a Redis that lost state produces (a packet
-- already claimed, an order number in use, a user already holding a packet
-- of the envelope), or a replay after a crash, is refused as a whole by the
-- unique indexes, and the caller sends it again with ApplyClaimsGuarded.
INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at, order_no, sender_id)
VALUES (@envelope_id, @packet_id, @user_id, @amount_cents, @claimed_at, @order_no, @sender_id);

-- name: AddClaims :many
-- AddClaims adds the claims CopyClaims appended to their envelopes, in one
-- statement, and writes their events. The caller gives the batch one run per
-- envelope, in ascending envelope id: the envelope, how many claims (n) and
-- how many of them go without an order number (no_order); and, sliced from
-- the flat arrays packet_ids and amounts, that envelope's packets in grab
-- order with their amounts. Ordered by the caller, the batch needs no sort
-- here: one primary-key probe per claim, and one aggregate row per run.
--
-- The probe checks each claim against its packet (nothing written there):
-- the packet exists, belongs to the run's envelope, has the claim's amount
-- and was not refunded. Unless every claim of every run matches and the
-- runs hold exactly the flat arrays, no envelope changes and the statement
-- returns no rows: the caller refuses the batch (rolls it back and sends it
-- guarded). A refund that commits while the batch waits for an envelope's
-- row makes the envelope's cents exceed its total, which its check refuses.
--
-- An envelope whose claimed cents reach its total is sold out: every
-- packet is at least 1 cent, so that happens exactly when all are claimed.
-- The envelope's luckiest grab (best_packet_id) moves to the batch's best
-- claim when that is larger, or as large and handed out earlier (a higher
-- id).
--
-- The claims' packet.claimed events are not rows of their own: one
-- claim_event_runs row per envelope gives the positions of that envelope's
-- claim events and its packets in their order, run after run. Then one
-- envelope.sold_out events row per envelope it made sold out. It returns
-- one row per envelope it changed: the claims applied (n), those without
-- their order number (no_order), and whether it is now sold out.
WITH arg AS (
    SELECT @packet_ids::bigint[] AS packet_ids, @amounts::bigint[] AS amounts
), given AS (
    SELECT g.ord, g.envelope_id, g.n, g.no_order,
           coalesce(sum(g.n) OVER (ORDER BY g.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::bigint
               AS start
    FROM ROWS FROM (unnest(@run_envelope_ids::bigint[]), unnest(@run_counts::bigint[]),
                    unnest(@run_no_orders::bigint[]))
        WITH ORDINALITY AS g(envelope_id, n, no_order, ord)
), checked AS (
    -- Per run, its claims that match their packets, their cents and the best
    -- of them (the largest amount, then the higher packet id). Wrapped so no
    -- index can serve it: the packet must be found by its id, one claim at a
    -- time, whatever the statistics say.
    SELECT g.ord, count(*) AS matched, sum(i.amount_cents)::bigint AS cents,
           max(ARRAY[i.amount_cents, i.packet_id]) AS best
    FROM given g CROSS JOIN arg a
    CROSS JOIN LATERAL ROWS FROM (unnest(a.packet_ids[g.start + 1 : g.start + g.n]),
                                  unnest(a.amounts[g.start + 1 : g.start + g.n])) AS i(packet_id, amount_cents)
    JOIN packet_pool p ON p.id = i.packet_id
    WHERE (p.envelope_id = g.envelope_id AND p.amount_cents = i.amount_cents AND p.refunded_at IS NULL) IS TRUE
    GROUP BY g.ord
), whole AS (
    -- Every claim of every run matched, and the runs cover the flat arrays
    -- exactly.
    SELECT (SELECT coalesce(sum(n), 0) FROM given) = cardinality(a.packet_ids)
           AND NOT EXISTS (SELECT FROM given g LEFT JOIN checked c ON c.ord = g.ord
                           WHERE c.matched IS DISTINCT FROM g.n) AS ok
    FROM arg a
), runs AS (
    SELECT g.envelope_id, g.n, g.no_order, g.start, c.cents, c.best[2] AS best_id, c.best[1] AS best_cents
    FROM given g JOIN checked c ON c.ord = g.ord
    WHERE (SELECT ok FROM whole)
), changed AS (
    UPDATE envelopes e
    SET claimed_cents = e.claimed_cents + r.cents,
        -- An expired envelope (closed, its last claims on their way) whose
        -- last packet was granted before the close did sell out: it says so.
        status = CASE WHEN e.status IN ('open', 'expired') AND e.claimed_cents + r.cents = e.total_cents
                      THEN 'sold_out' ELSE e.status END,
        best_packet_id = CASE WHEN e.best_packet_id IS NULL
                                   OR (r.best_cents, r.best_id) > (e.best_amount_cents, e.best_packet_id)
                              THEN r.best_id ELSE e.best_packet_id END,
        best_amount_cents = greatest(e.best_amount_cents, r.best_cents)
    FROM runs r
    WHERE e.id = r.envelope_id
    RETURNING e.id, e.total_cents, e.count, r.n::bigint AS n, r.no_order::bigint AS no_order,
              (e.status = 'sold_out' AND e.claimed_cents = e.total_cents)::boolean AS sold_out
), new_events AS (
    SELECT 2 AS kind, now() AS at, c.id AS ref, 'envelope.sold_out'::event_type AS type, c.id AS envelope_id,
           NULL::bigint AS packet_id,
           jsonb_build_object('envelope_id', c.id, 'count', c.count, 'total_cents', c.total_cents) AS data
    FROM changed c WHERE c.sold_out
)
, event_base AS (
    SELECT take_event_ids((SELECT coalesce(sum(n), 0) FROM changed)::bigint + count(*)) AS base FROM new_events
)
, run_rows AS (
    INSERT INTO claim_event_runs (first_position, last_position, envelope_id, packet_ids, delivered_through)
    SELECT b.base + r.start + 1, b.base + r.start + r.n, r.envelope_id, a.packet_ids[r.start + 1 : r.start + r.n],
           b.base + r.start
    FROM runs r JOIN changed c ON c.id = r.envelope_id CROSS JOIN arg a CROSS JOIN event_base b
)
, event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id, data)
    SELECT b.base + (SELECT sum(n) FROM changed)::bigint + row_number() OVER (ORDER BY n.kind, n.at, n.ref),
           n.type, n.envelope_id, n.packet_id, n.data
    FROM new_events n CROSS JOIN event_base b
    RETURNING id
)
SELECT id, n, no_order, sold_out FROM changed;

-- name: ApplyClaimsGuarded :many
-- ApplyClaimsGuarded appends the claims of a batch CopyClaims could not,
-- each guarded: a claim of a packet that does not exist, belongs to another
-- envelope, was refunded or is claimed already (by anyone: a replay of a
-- committed batch changes nothing), or by a user who already holds a
-- packet of the envelope, is left out; an order number another claim
-- already carries (possible only if Redis lost its day counter) is not
-- written, the claim still counts, its order_no stays NULL and
-- RecordConflicts reports it. Two claims of the batch by one user in one
-- envelope, or with one order number, still violate the unique indexes:
-- the caller then sends the claims one statement each. It adds what it
-- applied to the envelopes and writes their events as AddClaims does.
WITH input AS (
    SELECT envelope_id, packet_id, user_id, claimed_at, nullif(order_no, '') AS order_no
    FROM ROWS FROM (unnest(@envelope_ids::bigint[]), unnest(@packet_ids::bigint[]), unnest(@user_ids::text[]),
                    unnest(@claimed_ats::timestamptz[]), unnest(@order_nos::text[]))
        AS t(envelope_id, packet_id, user_id, claimed_at, order_no)
), inserted AS (
    INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at, order_no, sender_id)
    SELECT i.envelope_id, i.packet_id, i.user_id, p.amount_cents, i.claimed_at,
           CASE WHEN EXISTS (SELECT 1 FROM claims o WHERE o.order_no = i.order_no) THEN NULL ELSE i.order_no END,
           (SELECT e.sender_id FROM envelopes e WHERE e.id = i.envelope_id)
    FROM input i JOIN packet_pool p ON p.id = i.packet_id
    WHERE (p.envelope_id = i.envelope_id AND p.refunded_at IS NULL) IS TRUE
      AND NOT EXISTS (SELECT 1 FROM claims q WHERE q.envelope_id = i.envelope_id AND q.user_id = i.user_id)
    ON CONFLICT (envelope_id, packet_id) DO NOTHING
    RETURNING packet_id AS id, envelope_id, amount_cents, claimed_at, order_no
), applied AS (
    SELECT id, envelope_id, amount_cents, claimed_at, order_no FROM inserted
), runs AS (
    -- One row per envelope: its sums, and its best claim of the batch (the
    -- first in the window's order), from one sort and no join.
    SELECT DISTINCT ON (envelope_id) envelope_id, id AS best_id, amount_cents AS best_cents,
           (sum(amount_cents) OVER w)::bigint AS cents, count(*) OVER w AS n,
           count(*) FILTER (WHERE order_no IS NULL) OVER w AS no_order
    FROM applied
    WINDOW w AS (PARTITION BY envelope_id)
    ORDER BY envelope_id, amount_cents DESC, id DESC
), changed AS (
    UPDATE envelopes e
    SET claimed_cents = e.claimed_cents + r.cents,
        -- An expired envelope (closed, its last claims on their way) whose
        -- last packet was granted before the close did sell out: it says so.
        status = CASE WHEN e.status IN ('open', 'expired') AND e.claimed_cents + r.cents = e.total_cents
                      THEN 'sold_out' ELSE e.status END,
        best_packet_id = CASE WHEN e.best_packet_id IS NULL
                                   OR (r.best_cents, r.best_id) > (e.best_amount_cents, e.best_packet_id)
                              THEN r.best_id ELSE e.best_packet_id END,
        best_amount_cents = greatest(e.best_amount_cents, r.best_cents)
    FROM runs r
    WHERE e.id = r.envelope_id
    RETURNING e.id, e.total_cents, e.count, r.n::bigint AS n, r.no_order::bigint AS no_order,
              (e.status = 'sold_out' AND e.claimed_cents = e.total_cents)::boolean AS sold_out
), new_events AS (
    -- Grab order: by time, and grabs of one instant (a coalesced call's) in
    -- hand-out order, highest packet id first: ref is the packet id negated.
    SELECT 1 AS kind, a.claimed_at AS at, -a.id AS ref, 'packet.claimed'::event_type AS type, a.envelope_id,
           a.id AS packet_id, NULL::jsonb AS data
    FROM applied a
    UNION ALL
    SELECT 2, now(), c.id, 'envelope.sold_out'::event_type, c.id, NULL,
           jsonb_build_object('envelope_id', c.id, 'count', c.count, 'total_cents', c.total_cents)
    FROM changed c WHERE c.sold_out
)
, event_base AS (SELECT take_event_ids(count(*)) AS base FROM new_events)
, event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id, data)
    SELECT b.base + row_number() OVER (ORDER BY n.kind, n.at, n.ref), n.type, n.envelope_id, n.packet_id, n.data
    FROM new_events n CROSS JOIN event_base b
    RETURNING id
)
SELECT id, n, no_order, sold_out FROM changed;

-- name: RecordConflicts :many
-- RecordConflicts stores, once, every claim of a batch that PostgreSQL does
-- not now show as held by that user under that order number. Run after
-- ApplyClaims in the same transaction, it finds exactly the claims that were
-- not applied (or applied without their order number) and are not replays of
-- ones applied before. A conflict recorded before (the batch replayed after a
-- crash) is returned too, marked not new, so the flusher acts on it again
-- whatever it did not finish the first time; the no-op update is what makes
-- it returned.
INSERT INTO claim_conflicts (envelope_id, packet_id, user_id, claimed_at, reason)
SELECT i.envelope_id, i.packet_id, i.user_id, i.claimed_at,
       CASE WHEN p.id IS NULL THEN 'unknown_packet'
            WHEN p.envelope_id <> i.envelope_id THEN 'wrong_envelope'
            WHEN p.refunded_at IS NOT NULL THEN 'packet_refunded'
            WHEN p.claimed_by IS NULL THEN 'user_holds_another_packet'
            WHEN p.claimed_by <> i.user_id THEN 'claimed_by_another_user'
            -- The user's own packet, under an order number it never had:
            -- Redis lost the grant (restarted from an older copy) and granted
            -- it again, and now answers a number the ledger does not hold.
            WHEN p.order_no IS NOT NULL AND nullif(i.order_no, '') IS NOT NULL THEN 'regranted_to_holder'
            ELSE 'order_no_in_use' END
FROM ROWS FROM (unnest(@envelope_ids::bigint[]), unnest(@packet_ids::bigint[]), unnest(@user_ids::text[]),
                unnest(@claimed_ats::timestamptz[]), unnest(@order_nos::text[]))
    AS i(envelope_id, packet_id, user_id, claimed_at, order_no)
LEFT JOIN packets p ON p.id = i.packet_id
WHERE p.id IS NULL OR p.envelope_id <> i.envelope_id OR p.claimed_by IS DISTINCT FROM i.user_id
   OR p.order_no IS DISTINCT FROM nullif(i.order_no, '')
ON CONFLICT (envelope_id, packet_id, user_id) DO UPDATE SET reason = claim_conflicts.reason
RETURNING envelope_id, packet_id, user_id, claimed_at, reason, xmax = 0 AS new;
