-- gaffer:expand
-- Debounce (issue 26, item 3): the key of a job enqueued with debounce,
-- and the latest its run_at may be moved to (its first enqueue plus
-- max_wait; NULL: no cap). NULL for every other job, so no other job
-- enters jobs_debounce_idx (0048). Binaries of the release before never
-- read or write them: they claim, promote and finish such a job as any
-- other, which is all a debounced job needs of them.
ALTER TABLE gaffer.jobs ADD COLUMN debounce_key text;
ALTER TABLE gaffer.jobs ADD COLUMN debounce_until timestamptz;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_debounce_key_check
    CHECK (octet_length(debounce_key) <= 255) NOT VALID;
