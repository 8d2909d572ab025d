-- gaffer:expand
-- Tags and search (issue 26, item 5): the short labels a job was enqueued
-- with, at most 16, each 1-64 bytes of [A-Za-z0-9_.:/=+@-]. NULL for a
-- job enqueued without tags (never an empty array), so no such job enters
-- jobs_tags_idx (0054). Binaries of the release before never read or
-- write it: their enqueues make untagged jobs, and they claim, run and
-- finish tagged ones like any other.
ALTER TABLE gaffer.jobs ADD COLUMN tags text[];
-- Each tag is checked in the tags joined by ',': the pattern bounds every
-- piece, and there are as many pieces as tags (a tag holding ',' would
-- make more). array_to_string skips NULL elements; array_position finds
-- them.
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_tags_check
    CHECK (array_ndims(tags) = 1 AND cardinality(tags) BETWEEN 1 AND 16 AND array_position(tags, NULL) IS NULL
           AND array_to_string(tags, ',') ~ '^[A-Za-z0-9_.:/=+@-]{1,64}(,[A-Za-z0-9_.:/=+@-]{1,64})*$'
           AND cardinality(string_to_array(array_to_string(tags, ','), ',')) = cardinality(tags)) NOT VALID;
