-- What the flushers export as metrics but several processes change: they
-- read it from here rather than count it in memory, so a settlement made by
-- an operator's `flusher recover` (a process of its own, which no one
-- scrapes) counts like any other, and the totals survive restarts.

-- Totals of the envelopes that reached a final status, kept by the
-- transaction that settles each one (pgstore's finish).
CREATE TABLE settlement_totals (
    status         text   PRIMARY KEY CHECK (status IN ('settled', 'failed')),
    envelopes      bigint NOT NULL DEFAULT 0 CHECK (envelopes >= 0),
    claimed_cents  bigint NOT NULL DEFAULT 0 CHECK (claimed_cents >= 0),
    refunded_cents bigint NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0)
);

INSERT INTO settlement_totals (status, envelopes, claimed_cents, refunded_cents)
SELECT s.status, count(e.id), coalesce(sum(e.claimed_cents), 0), coalesce(sum(e.refunded_cents), 0)
FROM (VALUES ('settled'), ('failed')) AS s(status)
LEFT JOIN envelopes e ON e.status = s.status
GROUP BY s.status;

-- The outcome of the last `flusher audit`, so alerts see what a cron job
-- found (one row, replaced by each audit).
CREATE TABLE audit_last_run (
    only_row     boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    finished_at  timestamptz NOT NULL,
    violations   integer     NOT NULL CHECK (violations >= 0),
    suspended    integer     NOT NULL CHECK (suspended >= 0),
    envelopes    integer     NOT NULL CHECK (envelopes >= 0),
    all_envelopes boolean    NOT NULL
);
