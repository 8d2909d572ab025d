-- gaffer:generated
-- gaffer:expand
-- The routines of store/schema that differ from those 0059_job_checks left,
-- written by `go run ./store/internal/migrategen`. Edit store/schema, not
-- this file, and write it again (-replace) while no release carries it.
--
--   changed   trigger gaffer.jobs.batch_job_finished
--   changed   trigger gaffer.jobs.sequence_turn_ended
SET LOCAL check_function_bodies = off;

DROP TRIGGER batch_job_finished ON gaffer.jobs;
DROP TRIGGER sequence_turn_ended ON gaffer.jobs;

-- changed: gaffer.jobs.batch_job_finished, as store/schema/batches.sql has it
CREATE TRIGGER batch_job_finished AFTER UPDATE OF state ON gaffer.jobs FOR EACH ROW WHEN (((new.batch_id IS NOT NULL) AND gaffer.job_ends(old.state, new.state))) EXECUTE FUNCTION gaffer.batch_job_finished();

-- changed: gaffer.jobs.sequence_turn_ended, as store/schema/sequences.sql has it
CREATE TRIGGER sequence_turn_ended AFTER UPDATE OF state ON gaffer.jobs FOR EACH ROW WHEN (((old.sequence_key IS NOT NULL) AND gaffer.job_ends(old.state, new.state))) EXECUTE FUNCTION gaffer.sequence_left();
