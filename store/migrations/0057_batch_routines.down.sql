-- gaffer:generated
-- Back to the routines 0056_batch_index left, written by migrategen with
-- 0057_batch_routines.up.sql.
SET LOCAL check_function_bodies = off;

DROP TRIGGER batch_job_added ON gaffer.jobs;
DROP TRIGGER batch_job_deleted ON gaffer.jobs;
DROP TRIGGER batch_job_finished ON gaffer.jobs;
DROP FUNCTION gaffer.batch_cancel(text, bigint);
DROP FUNCTION gaffer.batch_close(text, bigint);
DROP FUNCTION gaffer.batch_job_added();
DROP FUNCTION gaffer.batch_job_deleted();
DROP FUNCTION gaffer.batch_job_finished();
DROP FUNCTION gaffer.batch_settle(gaffer.batches);
