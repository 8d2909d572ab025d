-- Sequence queries (store/schema/sequences.sql holds the turns).

-- name: get_sequence
-- $1 tenant, $2 key, $3 cap on the held count. The sequence's row (absent
-- when it has no work and is not halted) and how many jobs wait in it,
-- counted up to the cap.
SELECT s.head, s.halted_by, s.halted_at, s.created_at,
       (SELECT count(*) FROM (SELECT 1 FROM gaffer.jobs j
                              WHERE j.tenant = s.tenant AND j.sequence_key = s.key AND j.state = 'held' LIMIT $3) h)
FROM gaffer.sequences s
WHERE s.tenant = $1 AND s.key = $2;

-- name: resume_sequence
-- $1 tenant, $2 key: a halted sequence goes on with its oldest held job.
SELECT resumed, head FROM gaffer.sequence_resume($1, $2);
