-- gaffer:generated
-- Back to the routines 0051_sequence_indexes left, written by migrategen with
-- 0052_sequences_turns.up.sql.
SET LOCAL check_function_bodies = off;

DROP TRIGGER sequence_enter ON gaffer.jobs;
DROP TRIGGER sequence_job_deleted ON gaffer.jobs;
DROP TRIGGER sequence_turn_ended ON gaffer.jobs;
DROP FUNCTION gaffer.sequence_enter();
DROP FUNCTION gaffer.sequence_left();
DROP FUNCTION gaffer.sequence_next(text, text);
DROP FUNCTION gaffer.sequence_resume(text, text);
