-- packets.envelope_id stops being a declared foreign key. PostgreSQL checks a
-- foreign key row by row, which made writing a 100,000-packet envelope take
-- over a second (about four times the insert itself). Packets are only ever
-- written together with their envelope, in one transaction, and nothing
-- deletes envelopes; `flusher audit` checks every envelope's packets.
ALTER TABLE packets DROP CONSTRAINT IF EXISTS packets_envelope_id_fkey;
