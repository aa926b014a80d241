-- Short user ids: a user's one short numeric id, unique both ways. Redis
-- holds a bitmap of the ids in use; this table is the truth it is rebuilt from.
CREATE TABLE user_short_ids (
    user_id    text        PRIMARY KEY,
    short_id   bigint      NOT NULL UNIQUE CHECK (short_id >= 0),
    created_at timestamptz NOT NULL DEFAULT now()
);
