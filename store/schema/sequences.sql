-- Sequences (docs/shaping.md#sequences): the jobs of one (tenant,
-- sequence_key) run one at a time, in enqueue order. A sequence's turn is
-- its row in gaffer.sequences: head is the job whose turn it is (pending,
-- running or retrying), halted_by the failed job that stopped it. The
-- jobs after the head wait as 'held', a state no claim index holds, so
-- the claim never sees them and costs nothing more for them.
--
-- Everything a sequence needs happens in triggers on gaffer.jobs, so
-- that every writer — an enqueue, a DLQ replay, a node's completion, a
-- lease rescue, a cancel, a delete, a node of the release before — keeps
-- it without knowing of it:
--   - sequence_enter (BEFORE INSERT): a job entering a sequence takes the
--     turn if the sequence has none and is not halted; else it is held.
--   - sequence_turn_ended (AFTER UPDATE OF state), sequence_job_deleted
--     (AFTER DELETE): when the head ends, the sequence's oldest held job
--     becomes pending — or, if the head failed with on_failure halt, the
--     sequence halts.
-- Each locks the sequence's row first, so the enqueues and endings of a
-- sequence are serialised, and the statement after the lock (READ
-- COMMITTED: a fresh snapshot) sees every job a sequence's earlier
-- writers committed. An attempt's end is written only by its fenced
-- statements, so a stale attempt can never end a turn: a killed node's
-- job keeps its sequence's turn until the rescuer ends its attempt, and
-- a retrying job still holds it.

-- The job entering a sequence (NEW.sequence_key), or a DLQ replay of a
-- sequence's failed job (NEW.replay_of names its DLQ entry: the replay
-- joins the failed job's sequence, with its on_failure, while that job is
-- kept). A replay of the job that halted its sequence takes the turn back
-- at once — it runs before the jobs held behind it, as the job it
-- replays would have; any other job takes the turn only if nobody holds
-- it and the sequence is not halted, and is held otherwise.
CREATE FUNCTION gaffer.sequence_enter() RETURNS trigger
LANGUAGE plpgsql AS $fn$
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
$fn$;

CREATE TRIGGER sequence_enter BEFORE INSERT ON gaffer.jobs
    FOR EACH ROW
    WHEN (NEW.state = 'pending' AND (NEW.sequence_key IS NOT NULL OR NEW.replay_of IS NOT NULL))
    EXECUTE FUNCTION gaffer.sequence_enter();

-- Gives a sequence's turn to its oldest held job, which becomes pending
-- (due now, or at its own run_at if that is later), and returns it; with
-- none held, the sequence's row goes and NULL is returned. The caller
-- holds the sequence's row lock. A held job being cancelled meanwhile is
-- waited for and passed over (FOR UPDATE rechecks state = 'held').
CREATE FUNCTION gaffer.sequence_next(p_tenant text, p_key text) RETURNS bigint
LANGUAGE plpgsql AS $fn$
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
$fn$;

-- A sequence's job ended (its state became final) or was deleted. Only
-- the head's end moves the sequence on, and the deletion of the job that
-- halted it resumes it. A held job that ends (cancelled, deleted) changes
-- nothing; any other unfinished job of a sequence is its head (at most
-- one is pending, running or retrying: jobs_sequence_turn_idx); a
-- finished job deleted may be the one that halted it, which an unlocked
-- look tells first (nothing halts a sequence by a job while this
-- statement holds that job's row).
CREATE FUNCTION gaffer.sequence_left() RETURNS trigger
LANGUAGE plpgsql AS $fn$
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
$fn$;

CREATE TRIGGER sequence_turn_ended AFTER UPDATE OF state ON gaffer.jobs
    FOR EACH ROW
    WHEN (OLD.sequence_key IS NOT NULL AND gaffer.job_ends(OLD.state, NEW.state))
    EXECUTE FUNCTION gaffer.sequence_left();

CREATE TRIGGER sequence_job_deleted AFTER DELETE ON gaffer.jobs
    FOR EACH ROW
    WHEN (OLD.sequence_key IS NOT NULL)
    EXECUTE FUNCTION gaffer.sequence_left();

-- Resumes a halted sequence (POST /v1/sequences/{key}/resume): the failed
-- job that halted it stays failed (and in the DLQ), and the oldest held
-- job takes the turn. Returns whether the sequence was halted, and the
-- job whose turn it now is (NULL: none).
CREATE FUNCTION gaffer.sequence_resume(p_tenant text, p_key text, OUT resumed boolean, OUT head bigint)
LANGUAGE plpgsql AS $fn$
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
$fn$;
