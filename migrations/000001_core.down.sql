DROP VIEW IF EXISTS user_grabs;
DROP VIEW IF EXISTS envelope_totals;
DROP TABLE IF EXISTS claim_conflicts;
DROP TABLE IF EXISTS packets;
DROP TABLE IF EXISTS envelopes;
DROP TABLE IF EXISTS service_settings;
DROP TABLE IF EXISTS sequence_numbers;
