-- gaffer:expand
-- Progress: the last percent and message the attempt progress_attempt
-- reported, and when. Written only under that attempt's lease, touching
-- no indexed column (a HOT update). Adding nullable columns rewrites
-- nothing; the check is NOT VALID so that adding it scans nothing (every
-- existing row has none of these values).
ALTER TABLE gaffer.jobs
    ADD COLUMN progress real,
    ADD COLUMN progress_message text,
    ADD COLUMN progress_attempt integer,
    ADD COLUMN progress_at timestamptz;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_progress_check
    CHECK (progress BETWEEN 0 AND 100 AND octet_length(progress_message) <= 1024) NOT VALID;
