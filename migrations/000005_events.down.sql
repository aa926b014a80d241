DROP VIEW IF EXISTS event_messages;
DROP TABLE IF EXISTS events;
DROP FUNCTION IF EXISTS events_notify();
DELETE FROM sequence_numbers WHERE key_name = 'event';
