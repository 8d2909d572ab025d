-- gaffer:expand
-- A job's attempts that did not count against max_attempts: snoozes and
-- releases (a drain, a remote worker's release), which give the attempt
-- back and raise max_attempts by one. People are shown attempt and
-- max_attempts less these (2/26 after a snooze read as 1/25). A constant
-- default: no rewrite of the table. Binaries of the release before leave
-- it 0.
ALTER TABLE gaffer.jobs ADD COLUMN uncounted_attempts integer NOT NULL DEFAULT 0;
