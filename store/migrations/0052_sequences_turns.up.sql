-- gaffer:generated
-- gaffer:expand
-- The routines of store/schema that differ from those 0051_sequence_indexes left,
-- written by `go run ./store/internal/migrategen`. Edit store/schema, not
-- this file, and write it again (-replace) while no release carries it.
--
--   new       function gaffer.sequence_enter()
--   new       function gaffer.sequence_left()
--   new       function gaffer.sequence_next(text, text)
--   new       function gaffer.sequence_resume(text, text)
--   new       trigger gaffer.jobs.sequence_enter
--   new       trigger gaffer.jobs.sequence_job_deleted
--   new       trigger gaffer.jobs.sequence_turn_ended
SET LOCAL check_function_bodies = off;

-- new: gaffer.sequence_enter(), as store/schema/sequences.sql has it
CREATE OR REPLACE FUNCTION gaffer.sequence_enter()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    replayed bigint;
    seq_key  text;
    seq_halt boolean;
    turn     bigint;
BEGIN
    IF NEW.replay_of IS NOT NULL AND NEW.sequence_key IS NULL THEN
        -- (SELECT INTO sets its targets to NULL when no row is found, so
        -- NEW's columns are set only when one is.)
        SELECT j.id, j.sequence_key, j.sequence_halt INTO replayed, seq_key, seq_halt
        FROM gaffer.dlq d JOIN gaffer.jobs j ON j.id = d.job_id
        WHERE d.id = NEW.replay_of AND j.sequence_key IS NOT NULL;
        IF NOT FOUND THEN
            RETURN NEW;
        END IF;
        NEW.sequence_key := seq_key;
        NEW.sequence_halt := seq_halt;
    END IF;
    INSERT INTO gaffer.sequences AS s (tenant, key, head) VALUES (NEW.tenant, NEW.sequence_key, NEW.id)
    ON CONFLICT (tenant, key) DO UPDATE SET
        head = CASE WHEN (s.head IS NULL AND s.halted_by IS NULL) OR s.halted_by = replayed THEN NEW.id ELSE s.head END,
        halted_by = CASE WHEN s.halted_by = replayed THEN NULL ELSE s.halted_by END,
        halted_at = CASE WHEN s.halted_by = replayed THEN NULL ELSE s.halted_at END
    RETURNING s.head INTO turn;
    IF turn IS DISTINCT FROM NEW.id THEN
        NEW.state := 'held';
    END IF;
    RETURN NEW;
END
$function$;

-- new: gaffer.sequence_left(), as store/schema/sequences.sql has it
CREATE OR REPLACE FUNCTION gaffer.sequence_left()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    s gaffer.sequences;
BEGIN
    IF OLD.state = 'held' THEN
        RETURN NULL;
    END IF;
    IF OLD.state IN ('completed', 'failed', 'cancelled') THEN
        PERFORM FROM gaffer.sequences WHERE tenant = OLD.tenant AND key = OLD.sequence_key AND halted_by = OLD.id;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    END IF;
    SELECT * INTO s FROM gaffer.sequences WHERE tenant = OLD.tenant AND key = OLD.sequence_key FOR UPDATE;
    IF s.halted_by = OLD.id OR s.head = OLD.id AND NOT (TG_OP = 'UPDATE' AND NEW.state = 'failed' AND NEW.sequence_halt) THEN
        PERFORM gaffer.sequence_next(OLD.tenant, OLD.sequence_key);
    ELSIF s.head = OLD.id THEN
        UPDATE gaffer.sequences SET head = NULL, halted_by = OLD.id, halted_at = now()
        WHERE tenant = OLD.tenant AND key = OLD.sequence_key;
    END IF;
    RETURN NULL;
END
$function$;

-- new: gaffer.sequence_next(text, text), as store/schema/sequences.sql has it
CREATE OR REPLACE FUNCTION gaffer.sequence_next(p_tenant text, p_key text)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    j record;
BEGIN
    WITH turn AS (
        SELECT id FROM gaffer.jobs
        WHERE tenant = p_tenant AND sequence_key = p_key AND state = 'held'
        ORDER BY id
        LIMIT 1
        FOR UPDATE
    )
    UPDATE gaffer.jobs SET state = 'pending', run_at = greatest(run_at, now()), due = run_at <= now()
    FROM turn WHERE gaffer.jobs.id = turn.id
    RETURNING gaffer.jobs.id, queue, tenant, fairness_key, due INTO j;
    IF j.id IS NULL THEN
        DELETE FROM gaffer.sequences WHERE tenant = p_tenant AND key = p_key;
        RETURN NULL;
    END IF;
    UPDATE gaffer.sequences SET head = j.id, halted_by = NULL, halted_at = NULL
    WHERE tenant = p_tenant AND key = p_key;
    IF j.due THEN
        PERFORM pg_notify('gaffer_jobs', j.queue), pg_notify('gaffer_units', concat_ws(E'\t', j.queue, j.tenant, j.fairness_key));
    END IF;
    RETURN j.id;
END
$function$;

-- new: gaffer.sequence_resume(text, text), as store/schema/sequences.sql has it
CREATE OR REPLACE FUNCTION gaffer.sequence_resume(p_tenant text, p_key text, OUT resumed boolean, OUT head bigint)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    s gaffer.sequences;
BEGIN
    SELECT * INTO s FROM gaffer.sequences WHERE tenant = p_tenant AND key = p_key FOR UPDATE;
    IF NOT FOUND OR s.halted_by IS NULL THEN
        resumed := false;
        head := s.head;
        RETURN;
    END IF;
    resumed := true;
    head := gaffer.sequence_next(p_tenant, p_key);
END
$function$;

-- new: gaffer.jobs.sequence_enter, as store/schema/sequences.sql has it
CREATE TRIGGER sequence_enter BEFORE INSERT ON gaffer.jobs FOR EACH ROW WHEN (((new.state = 'pending'::text) AND ((new.sequence_key IS NOT NULL) OR (new.replay_of IS NOT NULL)))) EXECUTE FUNCTION gaffer.sequence_enter();

-- new: gaffer.jobs.sequence_job_deleted, as store/schema/sequences.sql has it
CREATE TRIGGER sequence_job_deleted AFTER DELETE ON gaffer.jobs FOR EACH ROW WHEN ((old.sequence_key IS NOT NULL)) EXECUTE FUNCTION gaffer.sequence_left();

-- new: gaffer.jobs.sequence_turn_ended, as store/schema/sequences.sql has it
CREATE TRIGGER sequence_turn_ended AFTER UPDATE OF state ON gaffer.jobs FOR EACH ROW WHEN (((old.sequence_key IS NOT NULL) AND (new.state = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text])) AND (old.state <> ALL (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION gaffer.sequence_left();
