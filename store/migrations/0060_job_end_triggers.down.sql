-- gaffer:generated
-- Back to the routines 0059_job_checks left, written by migrategen with
-- 0060_job_end_triggers.up.sql.
SET LOCAL check_function_bodies = off;

DROP TRIGGER batch_job_finished ON gaffer.jobs;
DROP TRIGGER sequence_turn_ended ON gaffer.jobs;

-- gaffer.jobs.batch_job_finished as 0057_batch_routines left it
CREATE TRIGGER batch_job_finished AFTER UPDATE OF state ON gaffer.jobs FOR EACH ROW WHEN (((new.batch_id IS NOT NULL) AND (old.state = ANY (ARRAY['pending'::text, 'held'::text, 'running'::text, 'retrying'::text])) AND (new.state = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION gaffer.batch_job_finished();

-- gaffer.jobs.sequence_turn_ended as 0052_sequences_turns left it
CREATE TRIGGER sequence_turn_ended AFTER UPDATE OF state ON gaffer.jobs FOR EACH ROW WHEN (((old.sequence_key IS NOT NULL) AND (new.state = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text])) AND (old.state <> ALL (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION gaffer.sequence_left();
