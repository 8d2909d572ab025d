-- gaffer:generated
-- gaffer:expand
-- The routines of store/schema that differ from those 0056_batch_index left,
-- written by `go run ./store/internal/migrategen`. Edit store/schema, not
-- this file, and write it again (-replace) while no release carries it.
--
--   new       function gaffer.batch_cancel(text, bigint)
--   new       function gaffer.batch_close(text, bigint)
--   new       function gaffer.batch_job_added()
--   new       function gaffer.batch_job_deleted()
--   new       function gaffer.batch_job_finished()
--   new       function gaffer.batch_settle(gaffer.batches)
--   new       trigger gaffer.jobs.batch_job_added
--   new       trigger gaffer.jobs.batch_job_deleted
--   new       trigger gaffer.jobs.batch_job_finished
SET LOCAL check_function_bodies = off;

-- new: gaffer.batch_cancel(text, bigint), as store/schema/batches.sql has it
CREATE OR REPLACE FUNCTION gaffer.batch_cancel(t text, bid bigint)
 RETURNS gaffer.batches
 LANGUAGE plpgsql
AS $function$
DECLARE
    b gaffer.batches;
    told bigint;
BEGIN
    UPDATE gaffer.batches
    SET state = 'cancelled', closed_at = coalesce(closed_at, clock_timestamp()), cancelled_at = clock_timestamp()
    WHERE id = bid AND tenant = t AND state IN ('open', 'closed')
    RETURNING * INTO b;
    IF FOUND THEN
        WITH upd AS (
            UPDATE gaffer.jobs
            SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
                finalized_at = CASE WHEN state = 'running' THEN finalized_at ELSE now() END,
                cancel_requested = true
            WHERE batch_id = bid AND state IN ('pending', 'held', 'retrying', 'running')
              AND (state <> 'running' OR NOT cancel_requested)
            RETURNING id, state, node
        )
        SELECT count(pg_notify('gaffer_control', json_build_object('op', 'cancel', 'id', id, 'node', node)::text))
        INTO told
        FROM upd WHERE state = 'running';
        SELECT * INTO b FROM gaffer.batches WHERE id = bid;
        PERFORM gaffer.batch_settle(b);
    END IF;
    SELECT * INTO b FROM gaffer.batches WHERE id = bid AND tenant = t;
    RETURN b;
END
$function$;

-- new: gaffer.batch_close(text, bigint), as store/schema/batches.sql has it
CREATE OR REPLACE FUNCTION gaffer.batch_close(t text, bid bigint)
 RETURNS gaffer.batches
 LANGUAGE plpgsql
AS $function$
DECLARE
    b gaffer.batches;
BEGIN
    UPDATE gaffer.batches SET state = 'closed', closed_at = clock_timestamp()
    WHERE id = bid AND tenant = t AND state = 'open'
    RETURNING * INTO b;
    IF FOUND THEN
        PERFORM gaffer.batch_settle(b);
    END IF;
    SELECT * INTO b FROM gaffer.batches WHERE id = bid AND tenant = t;
    RETURN b;
END
$function$;

-- new: gaffer.batch_job_added(), as store/schema/batches.sql has it
CREATE OR REPLACE FUNCTION gaffer.batch_job_added()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    NEW.batch_id := current_setting('gaffer.batch_id')::bigint;
    RETURN NEW;
END
$function$;

-- new: gaffer.batch_job_deleted(), as store/schema/batches.sql has it
CREATE OR REPLACE FUNCTION gaffer.batch_job_deleted()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    b gaffer.batches;
BEGIN
    UPDATE gaffer.batches SET cancelled = cancelled + 1
    WHERE id = OLD.batch_id
    RETURNING * INTO b;
    IF FOUND THEN
        PERFORM gaffer.batch_settle(b);
    END IF;
    RETURN NULL;
END
$function$;

-- new: gaffer.batch_job_finished(), as store/schema/batches.sql has it
CREATE OR REPLACE FUNCTION gaffer.batch_job_finished()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    b gaffer.batches;
BEGIN
    UPDATE gaffer.batches
    SET completed = completed + (NEW.state = 'completed')::integer,
        failed = failed + (NEW.state = 'failed')::integer,
        cancelled = cancelled + (NEW.state = 'cancelled')::integer
    WHERE id = NEW.batch_id
    RETURNING * INTO b;
    IF FOUND THEN
        PERFORM gaffer.batch_settle(b);
    END IF;
    RETURN NULL;
END
$function$;

-- new: gaffer.batch_settle(gaffer.batches), as store/schema/batches.sql has it
CREATE OR REPLACE FUNCTION gaffer.batch_settle(b gaffer.batches)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    cb bigint;
    failed_ids bigint[];
BEGIN
    IF b.state NOT IN ('closed', 'cancelled') OR b.callback_job_id IS NOT NULL
       OR b.completed + b.failed + b.cancelled < b.total THEN
        RETURN NULL;
    END IF;
    cb := nextval(pg_get_serial_sequence('gaffer.jobs', 'id'));
    UPDATE gaffer.batches SET state = 'finished', callback_job_id = cb, finished_at = clock_timestamp()
    WHERE id = b.id AND callback_job_id IS NULL AND state IN ('closed', 'cancelled');
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF b.failed > 0 THEN
        SELECT array_agg(id ORDER BY id) INTO failed_ids FROM (
            SELECT id FROM gaffer.jobs WHERE batch_id = b.id AND state = 'failed' ORDER BY id LIMIT 1000) f;
    END IF;
    -- Enqueued now, not at the transaction's start (now()): the last job
    -- of the batch to commit before this one may have started later.
    INSERT INTO gaffer.jobs (id, tenant, kind, queue, priority, max_attempts, timeout_ms, run_at, created_at, args)
    VALUES (cb, b.tenant, b.callback_kind, b.callback_queue, b.callback_priority, b.callback_max_attempts,
            b.callback_timeout_ms, clock_timestamp(), clock_timestamp(),
            json_build_object('batch', b.id, 'args', b.callback_args, 'total', b.total,
                'completed', b.completed, 'failed', b.failed, 'cancelled', b.cancelled,
                'failed_ids', coalesce(failed_ids, '{}'::bigint[]),
                'failed_ids_truncated', coalesce(cardinality(failed_ids), 0) < b.failed,
                'batch_cancelled', b.state = 'cancelled'));
    PERFORM pg_notify('gaffer_jobs', b.callback_queue),
            pg_notify('gaffer_units', concat_ws(E'\t', b.callback_queue, b.tenant, ''));
    RETURN cb;
END
$function$;

-- new: gaffer.jobs.batch_job_added, as store/schema/batches.sql has it
CREATE TRIGGER batch_job_added BEFORE INSERT ON gaffer.jobs FOR EACH ROW WHEN (((new.batch_id IS NULL) AND (current_setting('gaffer.batch_id'::text, true) <> ''::text))) EXECUTE FUNCTION gaffer.batch_job_added();

-- new: gaffer.jobs.batch_job_deleted, as store/schema/batches.sql has it
CREATE TRIGGER batch_job_deleted AFTER DELETE ON gaffer.jobs FOR EACH ROW WHEN (((old.batch_id IS NOT NULL) AND (old.state = ANY (ARRAY['pending'::text, 'held'::text, 'running'::text, 'retrying'::text])))) EXECUTE FUNCTION gaffer.batch_job_deleted();

-- new: gaffer.jobs.batch_job_finished, as store/schema/batches.sql has it
CREATE TRIGGER batch_job_finished AFTER UPDATE OF state ON gaffer.jobs FOR EACH ROW WHEN (((new.batch_id IS NOT NULL) AND (old.state = ANY (ARRAY['pending'::text, 'held'::text, 'running'::text, 'retrying'::text])) AND (new.state = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION gaffer.batch_job_finished();
