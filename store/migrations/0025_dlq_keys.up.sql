-- gaffer:expand
-- A DLQ entry keeps its job's fairness and limit keys, so that a replay
-- runs in the same fairness unit and under the same limit keys as the job
-- it replays (G10): before, a replayed job lost both, and with them its
-- place under a per-key limit. Entries made before this have none
-- ('' and NULL, what a replay gave them until now).
ALTER TABLE gaffer.dlq ADD COLUMN fairness_key text NOT NULL DEFAULT '',
                       ADD COLUMN limit_key text;
