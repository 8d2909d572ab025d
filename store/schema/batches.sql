-- Batches with a callback (docs/shaping.md, "Batches"). A client opens a
-- batch, enqueues jobs into it over any number of calls, and closes it;
-- once it is closed and every one of its jobs is final, its callback job
-- is enqueued exactly once, with the batch's summary as args.
--
-- Exact by one row lock: every change to what decides the callback — a
-- job added (batch_admit in store/queries/batches.sql, total), a job
-- becoming final (batch_job_finished, the final counts), the batch closed
-- or cancelled — is an UPDATE of the batch's row, which PostgreSQL applies
-- to the row's latest version under its lock, one transaction at a time.
-- So the transaction that makes a closed batch's final counts add up to
-- its total is exactly one, whichever node it runs on and however many
-- jobs finish at once, and it enqueues the callback before it commits:
-- a node that dies after the commit has already enqueued it, one that
-- dies before it rolls back the job's final state too (its lease then
-- expires and the job is rescued, as any). batch_settle's guard
-- (callback_job_id IS NULL) is a second line: the callback's job id is
-- written into the batch in the statement that decides it fires.
--
-- Lock order: job, then batch (a job's final UPDATE holds the job's row
-- when its trigger updates the batch). batch_cancel takes the batch
-- first; a statement that finishes jobs of several batches may deadlock
-- with another finishing them in the other order, and PostgreSQL then
-- aborts one of them, whose writer retries it (the node's completer
-- does).

-- The callback of a batch whose row the caller holds locked (it just
-- updated it): enqueued if the batch is closed or cancelled, every job of
-- it is final and none was enqueued yet. Its args are the summary: the
-- batch id, its callback args, the counts, and the ids of its first 1000
-- failed jobs (failed_ids_truncated says there were more). Returns the
-- callback job's id, or NULL.
CREATE FUNCTION gaffer.batch_settle(b gaffer.batches) RETURNS bigint
LANGUAGE plpgsql AS $$
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
$$;

-- A batch job became final (from pending, held, running or retrying; final
-- states are terminal, so each job counts once): the batch counts it,
-- under its row lock, and settles.
CREATE FUNCTION gaffer.batch_job_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
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
$$;

CREATE TRIGGER batch_job_finished AFTER UPDATE OF state ON gaffer.jobs
    FOR EACH ROW
    WHEN (NEW.batch_id IS NOT NULL AND gaffer.job_ends(OLD.state, NEW.state))
    EXECUTE FUNCTION gaffer.batch_job_finished();

-- An unfinished batch job was deleted (a bulk delete of pending jobs):
-- it will never be final, so the batch counts it cancelled.
CREATE FUNCTION gaffer.batch_job_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
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
$$;

CREATE TRIGGER batch_job_deleted AFTER DELETE ON gaffer.jobs
    FOR EACH ROW
    WHEN (OLD.batch_id IS NOT NULL AND OLD.state IN ('pending', 'held', 'running', 'retrying'))
    EXECUTE FUNCTION gaffer.batch_job_deleted();

-- A job inserted while the transaction adds to a batch: an enqueue into a
-- batch first counts its jobs into the batch (batch_admit), then sets
-- gaffer.batch_id for the transaction, inserts them with the statements
-- every enqueue runs, and clears it. No other insert sees the setting;
-- theirs pay the WHEN's lookup of it, nothing more.
CREATE FUNCTION gaffer.batch_job_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.batch_id := current_setting('gaffer.batch_id')::bigint;
    RETURN NEW;
END
$$;

CREATE TRIGGER batch_job_added BEFORE INSERT ON gaffer.jobs
    FOR EACH ROW
    WHEN (NEW.batch_id IS NULL AND current_setting('gaffer.batch_id', true) <> '')
    EXECUTE FUNCTION gaffer.batch_job_added();

-- Closes the tenant's batch: no job may be added to it from now on, and
-- if every job of it is final its callback is enqueued at once. Closing
-- a batch that is not open changes nothing. Returns the batch (NULL
-- columns: no such batch of the tenant).
CREATE FUNCTION gaffer.batch_close(t text, bid bigint) RETURNS gaffer.batches
LANGUAGE plpgsql AS $$
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
$$;

-- Cancels the tenant's batch as a whole: it is closed, its pending, held
-- and retrying jobs end cancelled, its running ones are asked to stop (their
-- nodes told, as request_cancel). Its callback still fires, once, when
-- the last of its jobs is final (at once when none runs). Cancelling a
-- batch that is finished or cancelled changes nothing. Returns the batch
-- (NULL columns: no such batch of the tenant).
CREATE FUNCTION gaffer.batch_cancel(t text, bid bigint) RETURNS gaffer.batches
LANGUAGE plpgsql AS $$
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
$$;
