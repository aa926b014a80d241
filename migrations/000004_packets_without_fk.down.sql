ALTER TABLE packets ADD CONSTRAINT packets_envelope_id_fkey
    FOREIGN KEY (envelope_id) REFERENCES envelopes (id);
