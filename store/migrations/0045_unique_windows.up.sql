-- gaffer:expand
-- Uniqueness windows (issue 26, item 4): the unique key of a job enqueued
-- with unique_states or unique_for. A column of its own, not unique_key:
-- jobs_unique_idx holds every unique_key while its job is unfinished, so a
-- window that lets a new job in beside an unfinished holder (states
-- without retrying, a period that passed) could not share it. NULL for
-- every other job, so no other job enters jobs_unique_window_idx (0046).
-- Binaries of the release before never write it and never read it: their
-- enqueues keep today's rule, over unique_key alone.
ALTER TABLE gaffer.jobs ADD COLUMN unique_window_key text;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_unique_window_key_check
    CHECK (octet_length(unique_window_key) <= 255) NOT VALID;
