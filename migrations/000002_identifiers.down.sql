DROP TABLE IF EXISTS user_short_ids;
