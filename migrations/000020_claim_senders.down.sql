-- A user's history reads every sender from the envelope again.
ALTER TABLE claims DROP COLUMN sender_id;
