-- Order numbers: the ranges of each Redis shard's per-day counter that may be
-- handed out. A shard hands out counter values only up to a ceiling recorded
-- here first, so every number ever answered is at most reserved_upto; a Redis
-- that comes back from older data (a snapshot, an AOF missing its last
-- second, a replica promoted while behind) is fenced: its counter restarts
-- at reserved_upto, above every number answered before.
CREATE TABLE order_no_reservations (
    day           date    NOT NULL,
    shard         integer NOT NULL CHECK (shard >= 0),
    reserved_upto bigint  NOT NULL CHECK (reserved_upto > 0),
    PRIMARY KEY (day, shard)
);

COMMENT ON TABLE order_no_reservations IS
    'Ranges of the per-shard, per-day order-number counters reserved for Redis. One statement adds a step to reserved_upto and returns it, so reservations never overlap; a shard hands out counter values only up to a reserved ceiling.';
COMMENT ON COLUMN order_no_reservations.day IS
    'The day of the order numbers (the yyyyMMdd they start with), in ID_TIME_ZONE.';
COMMENT ON COLUMN order_no_reservations.shard IS
    'The Redis shard (envelope id modulo service_settings.redis_shards) whose counter the row reserves.';
COMMENT ON COLUMN order_no_reservations.reserved_upto IS
    'The highest counter value reserved so far: no counter value above it was ever handed out. Counter value c of shard s is the sequence number (c-1) * redis_shards + s + 1 after the date.';
