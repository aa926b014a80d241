-- Each claim carries its envelope's sender. A user's history shows the
-- sender of every packet, and read from envelopes that is one more index
-- probe and heap page per claim, on envelopes a user grabbed far apart: at
-- 10M packets, 400 of a 100-claim page's 500 buffer reads and most of its
-- time, where the page of a small ledger merge-joined a few pages. Copied
-- onto the claim when the flusher writes it (an envelope's sender never
-- changes), the page reads the user index and the claims' rows only.
--
-- The column takes NULL, and the history reads a NULL claim's sender from
-- its envelope: claims written before this migration keep it (nothing is
-- rewritten: an UPDATE of every claim would write the table and its indexes
-- again), as do those a flusher of the version before writes during a
-- rolling upgrade and the rare ones written through the packets view (a
-- repair, a retention archive loaded back).
ALTER TABLE claims ADD COLUMN sender_id text;
COMMENT ON COLUMN claims.sender_id IS
    'The sender of the claim''s envelope (envelopes.sender_id), copied when the flusher writes the claim so a user''s history need not read the envelope; NULL on claims written before migration 20 or through the packets view, whose envelope has it.';
