-- Runs written with lz4 stay readable; new ones are compressed as before.
ALTER TABLE claim_event_runs ALTER COLUMN packet_ids SET COMPRESSION DEFAULT,
    ALTER COLUMN packet_ids SET STORAGE EXTENDED;
