package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/gafferhq/gaffer/job"
)

// The sequenced share of the load (Profile.SequencedShare) goes into one
// of sequenceKeys sequences (on_failure continue, so that the share's
// failures and their replays keep it moving).
const sequenceKeys = 4

// sequencedRequest puts r into one of the sequences.
func sequencedRequest(r job.Request, rng *rand.Rand) job.Request {
	r.Sequence = &job.Sequence{Key: fmt.Sprintf("chaos-seq-%d", rng.IntN(sequenceKeys)), OnFailure: job.SequenceContinue}
	return r
}

// setUpSequenceAudit records, for every job of a sequence a statement
// moves to running, the jobs of its sequence then running besides it and
// those enqueued into it before it (smaller ids) not yet ended. A claim
// of a sequence's job commits before the next job of the sequence can
// become pending, so an overlap or a job out of turn shows in these
// counts. The audit reads the job's columns, not the sequences table the
// triggers keep.
func (h *harness) setUpSequenceAudit(ctx context.Context) {
	if _, err := h.pool.Exec(ctx, `
		CREATE TABLE chaos_sequence_audit (job_id bigint, key text, attempt int, running int, earlier int, at timestamptz DEFAULT clock_timestamp());
		CREATE FUNCTION chaos_sequence_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO chaos_sequence_audit (job_id, key, attempt, running, earlier)
			SELECT NEW.id, NEW.sequence_key, NEW.attempt,
			       count(*) FILTER (WHERE r.state = 'running' AND r.id <> NEW.id),
			       count(*) FILTER (WHERE r.id < NEW.id AND r.state NOT IN ('completed', 'failed', 'cancelled'))
			FROM gaffer.jobs r WHERE r.tenant = NEW.tenant AND r.sequence_key = NEW.sequence_key;
			RETURN NULL;
		END $$;
		CREATE TRIGGER chaos_sequence_audit AFTER UPDATE ON gaffer.jobs FOR EACH ROW
			WHEN (NEW.state = 'running' AND OLD.state IS DISTINCT FROM 'running' AND NEW.sequence_key IS NOT NULL)
			EXECUTE FUNCTION chaos_sequence_audit();`); err != nil {
		h.t.Fatal(err)
	}
}

// checkSequences requires that no job of a sequence ever ran beside
// another of it or before every job enqueued into it earlier had ended,
// that each sequence's jobs first started in id order, and that the
// sequenced share ran at all.
func (h *harness) checkSequences(ctx context.Context, r *Report, v func(string, ...any)) {
	if h.o.Profile.SequencedShare == 0 {
		return
	}
	rows, err := h.pool.Query(ctx, `SELECT key, count(*), count(*) FILTER (WHERE running > 0), count(*) FILTER (WHERE earlier > 0)
		FROM chaos_sequence_audit GROUP BY key ORDER BY key`)
	if err != nil {
		h.t.Fatalf("read the sequence audit: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var starts, beside, early int
		if err := rows.Scan(&key, &starts, &beside, &early); err != nil {
			h.t.Fatalf("read the sequence audit: %v", err)
		}
		r.SequenceStarts += starts
		if beside > 0 || early > 0 {
			v("sequence %s: of %d attempts started, %d ran beside another job of the sequence and %d before an earlier job had ended", key, starts, beside, early)
		}
	}
	if err := rows.Err(); err != nil {
		h.t.Fatalf("read the sequence audit: %v", err)
	}
	var disordered int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM (
			SELECT job_id < lag(job_id) OVER (PARTITION BY key ORDER BY at, job_id) AS back
			FROM chaos_sequence_audit WHERE attempt = 1) s WHERE back`).Scan(&disordered); err != nil {
		h.t.Fatalf("read the sequence audit: %v", err)
	}
	if disordered > 0 {
		v("%d jobs of sequences first started after a job enqueued into their sequence later", disordered)
	}
	if r.SequenceStarts == 0 {
		v("no job of a sequence ever started: the sequence invariant proved nothing")
	}
}
