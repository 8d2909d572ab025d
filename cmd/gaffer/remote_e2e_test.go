package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/workclient"
)

// remoteE2E is a real `gaffer server` process (lease 2s, claims wait at
// most 5s, so a silent worker is lost after 9s; its own node
// works only the queue "default", so the jobs of queue "py" are left to
// remote workers), an admin token for the CLI and a worker token.
type remoteE2E struct {
	*e2e
	url    string
	worker string // a token of tenant default with the worker scope
}

func newRemoteE2E(t *testing.T, extra ...string) *remoteE2E {
	e := newE2E(t)
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "admin", "--tenant", "*", "--scopes", "admin"))
	worker := strings.TrimSpace(e.ok("tokens", "create", "--name", "py", "--scopes", "worker"))
	_, url := e.server("node-1", append([]string{"--lease-ttl", "2s", "--remote-max-wait", "5s", "--queues", "default=2"}, extra...)...)
	e.env = append(e.env, "GAFFER_URL="+url, "GAFFER_TOKEN="+admin)
	return &remoteE2E{e2e: e, url: url, worker: worker}
}

func (e *remoteE2E) client() *workclient.Client {
	return &workclient.Client{URL: e.url, Token: e.worker}
}

// enqueue enqueues n jobs of kind "work" in queue "py" and returns their
// ids; often before the worker that runs them has registered, so with
// --allow-unknown-kind.
func (e *remoteE2E) enqueue(n int, args string) []int64 {
	e.t.Helper()
	var ids []int64
	for range n {
		var out struct {
			Job struct {
				ID int64 `json:"id"`
			} `json:"job"`
		}
		e.jsonOK(&out, "jobs", "enqueue", "--kind", "work", "--queue", "py", "--args", args, "--allow-unknown-kind")
		ids = append(ids, out.Job.ID)
	}
	return ids
}

// metric sums a metric's samples with the label given from the server's
// /metrics.
func (e *remoteE2E) metric(name, label string) float64 {
	e.t.Helper()
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	total := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name) && strings.Contains(line, label) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return total
}

// G11: a remote worker paused past its lease cannot complete. Its job is
// rescued and claimed by another worker; the paused worker's completion
// (its own attempt, and the current attempt's number with its old token,
// which any reader of the job can see) is refused with 409 lease_lost,
// counted, and the row is unchanged. Red with the lease token check taken
// out of complete_jobs: the second completion is accepted.
func TestRemoteWorkerPausedPastItsLeaseCannotComplete(t *testing.T) {
	t.Parallel()
	e := newRemoteE2E(t)
	ctx := context.Background()
	c := e.client()
	ids := e.enqueue(1, `{"ms":0}`)
	a, err := c.Register(ctx, workclient.Registration{Name: "paused", Queues: []string{"py"}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := c.Claim(ctx, a.ID, 1, 0)
	if err != nil || len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != ids[0] {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	stale := claimed.Jobs[0].Lease
	// The worker stops calling (paused): past its 2s lease the rescuer
	// (every 5s) gives the job back, and another worker claims it.
	e.waitSQL("the paused worker's job rescued", `SELECT state FROM gaffer.jobs WHERE id = $1`, "retrying", ids[0])
	b, err := c.Register(ctx, workclient.Registration{Name: "fresh", Queues: []string{"py"}})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Claim(ctx, b.ID, 1, 5*time.Second)
	if err != nil || len(again.Jobs) != 1 || again.Jobs[0].Attempt != 2 {
		t.Fatalf("second claim: %v %+v", err, again)
	}
	current := again.Jobs[0].Lease
	row := func() string {
		return e.scalar(`SELECT concat_ws(' ', state, attempt, node, lease_token, coalesce(result::text, 'no-result'), jsonb_array_length(errors::jsonb)) FROM gaffer.jobs WHERE id = $1`, ids[0])
	}
	before := row()
	// The paused worker wakes and reports.
	for _, l := range []workclient.Lease{stale, {ID: stale.ID, Attempt: current.Attempt, LeaseToken: stale.LeaseToken}} {
		err := c.CompleteOne(ctx, l, json.RawMessage(`{"from":"the paused worker"}`))
		if !workclient.IsLeaseLost(err) || err.(*workclient.Problem).Status != 409 {
			t.Fatalf("completion of attempt %d with the paused worker's token: %v, want 409 lease_lost", l.Attempt, err)
		}
		if err := c.HeartbeatOne(ctx, a.ID, l); !workclient.IsLeaseLost(err) {
			t.Fatalf("heartbeat: %v", err)
		}
		if _, err := c.Fail(ctx, l, "late failure", true); !workclient.IsLeaseLost(err) {
			t.Fatalf("fail: %v", err)
		}
		if _, err := c.Snooze(ctx, l, time.Hour); !workclient.IsLeaseLost(err) {
			t.Fatalf("snooze: %v", err)
		}
	}
	if after := row(); after != before {
		t.Fatalf("the paused worker's writes changed the job:\nbefore %s\nafter  %s", before, after)
	}
	if n := e.metric("gaffer_job_stale_rejected_total", `op="complete"`); n != 2 {
		t.Fatalf("stale completions counted: %v, want 2", n)
	}
	// The current attempt completes.
	if err := c.CompleteOne(ctx, current, json.RawMessage(`{"from":"the fresh worker"}`)); err != nil {
		t.Fatal(err)
	}
	if got := e.scalar(`SELECT result::text FROM gaffer.jobs WHERE id = $1`, ids[0]); got != `{"from":"the fresh worker"}` {
		t.Fatalf("result %s", got)
	}
}

// G3 for remote workers: a remote worker process SIGKILLed while it runs
// jobs (it heartbeated them until then) loses them when their leases
// expire, and another worker runs each once more; a worker killed while
// its claim waits holds no job. Red with the lease rescuer's expiry test
// taken out (nothing rescues the dead worker's jobs).
func TestKilledRemoteWorkersJobsRerun(t *testing.T) {
	t.Parallel()
	e := newRemoteE2E(t)
	auditEffects(e)
	ids := e.enqueue(5, `{"ms":200}`)
	doomed := startRemoteWorker(t, e.url, e.worker, "W_QUEUES=py", "W_MAX=5", "W_HOLD=1", "W_NAME=doomed")
	e.waitSQL("the doomed worker holds every job", `SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1`, "5", doomed.id)
	time.Sleep(2500 * time.Millisecond) // past one lease: its heartbeats keep them
	if n := e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1`, doomed.id); n != "5" {
		t.Fatalf("a live worker's heartbeats did not keep its jobs: %s running", n)
	}
	doomed.cmd.Process.Signal(syscall.SIGKILL)
	<-doomed.exited
	// A long-poll cut by a kill takes nothing: the job enqueued after it
	// goes to a live worker at once.
	poller := startRemoteWorker(t, e.url, e.worker, "W_QUEUES=py", "W_NAME=poller")
	time.Sleep(300 * time.Millisecond)
	poller.cmd.Process.Signal(syscall.SIGKILL)
	<-poller.exited
	ids = append(ids, e.enqueue(1, `{"ms":0}`)...)
	survivor := startRemoteWorker(t, e.url, e.worker, "W_QUEUES=py", "W_MAX=5", "W_NAME=survivor")
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for e.scalar(`SELECT state FROM gaffer.jobs WHERE id = $1`, id) != "completed" {
			if time.Now().After(deadline) {
				t.Fatalf("job %d not completed: %s", id, e.scalar(`SELECT concat_ws(' ', state, attempt, node) FROM gaffer.jobs WHERE id = $1`, id))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, id := range ids[:5] {
		got := e.scalar(`SELECT concat_ws(' ', attempt, node, errors::jsonb->0->>'kind', result->>'worker') FROM gaffer.jobs WHERE id = $1`, id)
		if got != fmt.Sprintf("2 %s lost %s", survivor.id, survivor.id) {
			t.Fatalf("job %d: %s, want attempt 2 completed by the survivor after the doomed worker's attempt was lost", id, got)
		}
	}
	if n := e.scalar(`SELECT count(*) FROM (SELECT job_id FROM e2e_completions GROUP BY job_id HAVING count(*) > 1) d`); n != "0" {
		t.Fatalf("%s jobs completed twice", n)
	}
	if got := e.scalar(`SELECT concat_ws(' ', attempt, node) FROM gaffer.jobs WHERE id = $1`, ids[5]); got != "1 "+survivor.id {
		t.Fatalf("the job enqueued after the cut poll: %s", got)
	}
	// The killed workers fall silent: lost in the nodes view, after
	// max wait + 2 leases.
	e.waitSQL("the doomed worker marked lost", `SELECT concat_ws(' ', state, left_reason) FROM gaffer.nodes WHERE id = $1`, "dead lost", doomed.id)
}

// auditEffects records every accepted completion.
func auditEffects(e *remoteE2E) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), `
		CREATE TABLE e2e_completions (job_id bigint, attempt int, node text);
		CREATE FUNCTION e2e_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO e2e_completions VALUES (NEW.id, NEW.attempt, NEW.node);
			RETURN NEW;
		END $$;
		CREATE TRIGGER e2e_audit AFTER UPDATE ON gaffer.jobs FOR EACH ROW
			WHEN (NEW.state = 'completed' AND NEW.finalized_at IS DISTINCT FROM OLD.finalized_at)
			EXECUTE FUNCTION e2e_audit();`)
	if err != nil {
		e.t.Fatal(err)
	}
}

// G6 for remote workers: `gaffer nodes drain` of a remote worker — its
// claims get nothing from the order on, its running jobs finish, and it
// is recorded as drained; a drained worker holding a job past the
// deadline has it released for another worker. Red with the drain check
// taken out of claim_pick_remote (the worker claims the waiting jobs).
func TestRemoteWorkerDrain(t *testing.T) {
	t.Parallel()
	e := newRemoteE2E(t)
	ids := e.enqueue(4, `{"ms":1500}`)
	w := startRemoteWorker(t, e.url, e.worker, "W_QUEUES=py", "W_MAX=2", "W_NAME=drained")
	e.waitSQL("two jobs running", `SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1`, "2", w.id)
	e.ok("nodes", "drain", w.id, "--deadline", "30s")
	select {
	case <-w.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the drained worker did not stop")
	}
	if !w.saw("DRAINED") {
		t.Fatal("the worker was not told it was draining")
	}
	if n := e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE node = $1 AND state = 'completed'`, w.id); n != "2" {
		t.Fatalf("%s of its running jobs completed, want 2", n)
	}
	if n := e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1) AND state = 'pending' AND attempt = 0`, ids); n != "2" {
		t.Fatalf("%s jobs never claimed, want 2: it claimed after the order", n)
	}
	e.waitSQL("recorded as drained", `SELECT concat_ws(' ', state, left_reason) FROM gaffer.nodes WHERE id = $1`, "dead drained", w.id)
	var nodes struct {
		Data []struct {
			ID         string `json:"id"`
			Kind       string `json:"kind"`
			State      string `json:"state"`
			LeftReason string `json:"left_reason"`
		} `json:"data"`
	}
	e.jsonOK(&nodes, "nodes", "list")
	found := false
	for _, n := range nodes.Data {
		found = found || (n.ID == w.id && n.Kind == "remote" && n.State == "dead" && n.LeftReason == "drained")
	}
	if !found {
		t.Fatalf("the drained worker is not in the nodes view as drained: %+v", nodes)
	}
	if out := e.ok("nodes", "list"); !strings.Contains(out, "remote (default)") {
		t.Fatalf("nodes list does not show the remote worker's kind:\n%s", out)
	}

	// The deadline: a worker that holds its job past it has it released.
	holder := startRemoteWorker(t, e.url, e.worker, "W_QUEUES=py", "W_MAX=1", "W_HOLD=1", "W_NAME=holder")
	e.waitSQL("the holder runs a job", `SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1`, "1", holder.id)
	held := e.scalar(`SELECT id FROM gaffer.jobs WHERE state = 'running' AND node = $1`, holder.id)
	e.ok("nodes", "drain", holder.id, "--deadline", "1s")
	e.waitSQL("the held job released at the deadline", `SELECT concat_ws(' ', state, errors::jsonb->-1->>'kind') FROM gaffer.jobs WHERE id = $1`, "pending released", held)
	e.waitSQL("the holder recorded as drained", `SELECT concat_ws(' ', state, left_reason) FROM gaffer.nodes WHERE id = $1`, "dead drained", holder.id)
	startRemoteWorker(t, e.url, e.worker, "W_QUEUES=py", "W_MAX=2", "W_NAME=after")
	e.waitSQL("every job completed", `SELECT count(*) FROM gaffer.jobs WHERE state = 'completed'`, "4")
}

// Progress from a remote worker: visible in the API and `gaffer jobs
// get`, and refused (409, nothing changed) once the attempt lost its
// lease. Red with the lease check taken out of set_progress.
func TestRemoteProgress(t *testing.T) {
	t.Parallel()
	e := newRemoteE2E(t)
	ctx := context.Background()
	c := e.client()
	ids := e.enqueue(1, `{}`)
	a, _ := c.Register(ctx, workclient.Registration{Queues: []string{"py"}})
	claimed, err := c.Claim(ctx, a.ID, 1, 0)
	if err != nil || len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	l := claimed.Jobs[0].Lease
	if err := c.Progress(ctx, l, 40, "4 of 10 pages"); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(ids[0])
	if out := e.ok("jobs", "get", id); !strings.Contains(out, "40% 4 of 10 pages (attempt 1,") {
		t.Fatalf("jobs get does not show the progress:\n%s", out)
	}
	var got struct {
		Progress struct {
			Percent float64 `json:"percent"`
			Message string  `json:"message"`
		} `json:"progress"`
	}
	e.jsonOK(&got, "jobs", "get", id)
	if got.Progress.Percent != 40 || got.Progress.Message != "4 of 10 pages" {
		t.Fatalf("API view progress %+v", got.Progress)
	}
	// The worker pauses past its lease; the job moves on.
	e.waitSQL("the job rescued", `SELECT state FROM gaffer.jobs WHERE id = $1`, "retrying", ids[0])
	if err := c.Progress(ctx, l, 90, "late"); !workclient.IsLeaseLost(err) {
		t.Fatalf("progress after losing the lease: %v, want 409 lease_lost", err)
	}
	b, _ := c.Register(ctx, workclient.Registration{Queues: []string{"py"}})
	if again, err := c.Claim(ctx, b.ID, 1, 5*time.Second); err != nil || len(again.Jobs) != 1 {
		t.Fatalf("second claim: %v %+v", err, again)
	}
	if err := c.Progress(ctx, l, 95, "later still"); !workclient.IsLeaseLost(err) {
		t.Fatalf("progress of the old attempt while the new one runs: %v", err)
	}
	if out := e.ok("jobs", "get", id); !strings.Contains(out, "40% 4 of 10 pages (attempt 1,") {
		t.Fatalf("a refused progress changed the job:\n%s", out)
	}
}

// G10 for remote workers: a concurrency limit holds across three remote
// worker processes claiming up to 5 jobs each, one of them SIGKILLed
// while it holds slots: never more than the limit run at once (audited
// after every statement), and its slots come back only with the rescue.
// Red with limit_admit taken out of claim_pick_remote: up to 15 run.
func TestLimitsHoldForRemoteClaims(t *testing.T) {
	t.Parallel()
	e := newRemoteE2E(t)
	_, err := e.pool.Exec(context.Background(), `
		CREATE TABLE e2e_running (n int);
		CREATE FUNCTION e2e_count_running() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO e2e_running SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND kind = 'work';
			RETURN NULL;
		END $$;
		CREATE TRIGGER e2e_count_running AFTER UPDATE ON gaffer.jobs FOR EACH STATEMENT EXECUTE FUNCTION e2e_count_running();`)
	if err != nil {
		t.Fatal(err)
	}
	e.ok("limits", "set", "work-3", "--kind", "work", "--concurrency", "3")
	ids := e.enqueue(24, `{"ms":300}`)
	var workers []*remoteWorker
	for i := range 3 {
		workers = append(workers, startRemoteWorker(t, e.url, e.worker, "W_QUEUES=py", "W_MAX=5", fmt.Sprintf("W_NAME=w%d", i)))
	}
	var killed *remoteWorker
	deadline := time.Now().Add(20 * time.Second)
	for killed == nil {
		// A job that started within the last 100 ms of its 300: the kill
		// lands while the worker holds it (on a loaded machine a job
		// seen running earlier may be done by the time the kill lands).
		for _, w := range workers {
			if e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1
				AND attempted_at > clock_timestamp() - interval '100 milliseconds'`, w.id) != "0" {
				killed = w
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no worker ran a job")
		}
		time.Sleep(10 * time.Millisecond)
	}
	killed.cmd.Process.Signal(syscall.SIGKILL)
	<-killed.exited
	deadline = time.Now().Add(60 * time.Second)
	for e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1) AND state = 'completed'`, ids) != "24" {
		if time.Now().After(deadline) {
			t.Fatal("not every job completed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if most := e.scalar(`SELECT max(n) FROM e2e_running`); most != "3" {
		t.Fatalf("at most %s jobs ran at once under a limit of 3", most)
	}
	if n := e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE errors::jsonb @> '[{"kind": "lost"}]'`); n == "0" {
		t.Fatal("the kill landed on no running job: the test proved nothing about dead workers' slots")
	}
}
