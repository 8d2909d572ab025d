package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
	"github.com/gafferhq/gaffer/store"
)

// newWorkers returns Workers on the env's database, fed by a
// listener as on a node, with the lease and poll given, on e.clock if
// set.
func (e *env) newWorkers(cfg remote.Config) *remote.Workers {
	e.t.Helper()
	cfg.Pool, cfg.Metrics = e.st.Pool(), e.metrics
	if cfg.Logger == nil {
		cfg.Logger = testLogger(e.t)
	}
	r, err := remote.NewWorkers(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.clock != nil {
		r.SetClock(e.clock)
	}
	l := e.st.NewListener(store.ListenerConfig{
		Channels: []string{store.ChannelJobs, store.ChannelControl}, OnNotify: r.HandleNotification, OnConnect: r.WakeAll,
	})
	l.Start(context.Background())
	for deadline := time.Now().Add(10 * time.Second); !l.Connected(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatal("listener not connected after 10s")
		}
	}
	e.t.Cleanup(func() {
		r.Stop()
		l.Stop()
	})
	return r
}

func (e *env) register(r *remote.Workers, reg remote.Registration) remote.Worker {
	e.t.Helper()
	w, err := r.Register(context.Background(), reg)
	if err != nil {
		e.t.Fatalf("register %+v: %v", reg, err)
	}
	return w
}

func (e *env) claim(r *remote.Workers, c remote.Claim) []remote.ClaimedJob {
	e.t.Helper()
	res, err := r.Claim(context.Background(), c)
	if err != nil {
		e.t.Fatalf("claim %+v: %v", c, err)
	}
	return res.Jobs
}

// A remote worker gets only its tenant's jobs of the kinds it named, in
// its queues; a spanning worker gets every tenant's. Red with the tenant
// or kind filter taken out of claim_pick_remote.
func TestClaimIsBoundToTenantKindsAndQueues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.newWorkers(remote.Config{})
	mine := e.enqueue(job.Request{Kind: "resize", Tenant: "acme", Queue: "py"})
	e.enqueue(job.Request{Kind: "resize", Tenant: "other", Queue: "py"})
	e.enqueue(job.Request{Kind: "transcode", Tenant: "acme", Queue: "py"})
	e.enqueue(job.Request{Kind: "resize", Tenant: "acme", Queue: "elsewhere"})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"py"}, Kinds: []string{"resize"}})
	got := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 10})
	if len(got) != 1 || got[0].ID != mine.ID || got[0].Lease.Attempt != 1 || got[0].Lease.Token == 0 || got[0].LeaseExpiresAt.IsZero() {
		t.Fatalf("claimed %+v, want job %d alone", got, mine.ID)
	}
	if string(got[0].Args) != "{}" || got[0].Tenant != "acme" {
		t.Fatalf("claimed job %+v", got[0].Job)
	}
	// Another tenant's token cannot use the worker.
	if _, err := r.Claim(context.Background(), remote.Claim{Tenant: "other", Worker: w.ID, Max: 10}); !errors.Is(err, remote.ErrUnknownWorker) {
		t.Fatalf("claim through another tenant's token: %v", err)
	}
	// A spanning worker with no kinds takes every tenant's jobs of any kind in its queues.
	all := e.register(r, remote.Registration{Tenant: remote.AllTenants, Queues: []string{"py"}})
	if got := e.claim(r, remote.Claim{Worker: all.ID, Max: 10}); len(got) != 2 {
		t.Fatalf("spanning worker claimed %d jobs, want 2", len(got))
	}
}

// Within its tenant, a remote claim shares its slots among the fairness
// units, and takes turns through more units than it has slots.
func TestClaimSharesAmongUnits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.newWorkers(remote.Config{})
	var reqs []job.Request
	for _, key := range []string{"k1", "k2", "k3", "k4", "k5"} {
		for range 20 {
			reqs = append(reqs, job.Request{Kind: "k", Tenant: "acme", FairnessKey: key})
		}
	}
	if _, err := e.client.EnqueueMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	seen := map[string]int{}
	for range 3 {
		for _, cj := range e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 2}) {
			seen[cj.FairnessKey]++
		}
	}
	if len(seen) != 5 {
		t.Fatalf("three claims of 2 served units %v: want all 5 served in turn", seen)
	}
}

// Every write a remote worker makes for an attempt is fenced by its
// lease: with a wrong token, or once the job moved on to a new attempt,
// it changes nothing and is counted. Red with the lease token check
// taken out of complete_jobs (the forged-token completion is accepted).
func TestWritesAreFencedByTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.newWorkers(remote.Config{})
	rescuer := newRescuer(e)
	j := e.enqueue(job.Request{Kind: "k", Tenant: "acme"})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	first := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 1})[0]

	// A forged token for the current attempt is refused.
	forged := first.Lease
	forged.Token++
	res, err := r.Complete(ctx, "acme", []remote.Completion{{Lease: forged, Result: json.RawMessage(`{"forged":true}`)}})
	if err != nil || !errors.Is(res[0].Err, job.ErrLeaseLost) {
		t.Fatalf("forged completion: %v %+v", err, res)
	}
	// The worker pauses past its lease; the job is rescued and claimed
	// again by another worker.
	e.exec(`UPDATE gaffer.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, j.ID)
	if n, err := rescuer.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("rescued %d (%v)", n, err)
	}
	w2 := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	second := e.claim(r, remote.Claim{Tenant: "acme", Worker: w2.ID, Max: 1})[0]
	before, _ := e.client.Get(ctx, "", j.ID)

	// Every write of the first attempt is refused, and so is the first
	// attempt's token with the current attempt's number.
	stale := first.Lease
	current := second.Lease
	current.Token = first.Lease.Token
	for _, l := range []remote.Lease{stale, current} {
		if res, err := r.Complete(ctx, "acme", []remote.Completion{{Lease: l, Result: json.RawMessage(`1`)}}); err != nil || !errors.Is(res[0].Err, job.ErrLeaseLost) {
			t.Fatalf("stale complete %+v: %v %+v", l, err, res)
		}
		if res, err := r.Heartbeat(ctx, "acme", w.ID, []remote.Lease{l}); err != nil || !errors.Is(res[0].Err, job.ErrLeaseLost) {
			t.Fatalf("stale heartbeat %+v: %v %+v", l, err, res)
		}
		if _, err := r.Fail(ctx, "acme", remote.Failure{Lease: l, Message: "late"}); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("stale fail %+v: %v", l, err)
		}
		if _, err := r.Snooze(ctx, "acme", l, time.Minute); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("stale snooze %+v: %v", l, err)
		}
		if err := r.Progress(ctx, "acme", l, 50, "late"); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("stale progress %+v: %v", l, err)
		}
	}
	after, _ := e.client.Get(ctx, "", j.ID)
	if after.State != job.Running || after.Attempt != 2 || after.Node != w2.ID || after.Result != nil || after.Progress != nil ||
		len(after.Errors) != len(before.Errors) || after.MaxAttempts != before.MaxAttempts {
		t.Fatalf("the stale writes changed the job: %+v", after)
	}
	if n := e.counter("gaffer_job_stale_rejected_total"); n != 11 {
		t.Fatalf("stale_rejected_total %v, want 11", n)
	}
	// Another tenant's worker token cannot write even with the right lease.
	if res, err := r.Complete(ctx, "other", []remote.Completion{{Lease: second.Lease}}); err != nil || !errors.Is(res[0].Err, job.ErrNotFound) {
		t.Fatalf("another tenant's completion: %v %+v", err, res)
	}
	// The current attempt's writes go through.
	if err := r.Progress(ctx, "acme", second.Lease, 40, "four of ten"); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Complete(ctx, "acme", []remote.Completion{{Lease: second.Lease, Result: json.RawMessage(`{"n": 1.0}`)}}); err != nil || res[0].Err != nil {
		t.Fatalf("complete: %v %+v", err, res)
	}
	done, _ := e.client.Get(ctx, "", j.ID)
	if done.State != job.Completed || string(done.Result) != `{"n": 1.0}` || done.Progress == nil || done.Progress.Percent != 40 || done.Progress.Attempt != 2 {
		t.Fatalf("completed job %+v (progress %+v)", done, done.Progress)
	}
	if n := e.counter("gaffer_job_completed_total"); n != 1 {
		t.Fatalf("completed_total %v", n)
	}
}

// Fail, snooze and a batch with per-job outcomes.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.newWorkers(remote.Config{})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	var ids []int64
	for i := range 4 {
		ids = append(ids, e.enqueue(job.Request{Kind: "k", Tenant: "acme", MaxAttempts: 1 + i%2}).ID)
	}
	got := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 10})
	if len(got) != 4 {
		t.Fatalf("claimed %d", len(got))
	}
	byID := map[int64]remote.ClaimedJob{}
	for _, cj := range got {
		byID[cj.ID] = cj
	}
	// ids[0]: max 1 attempt, fails: into the DLQ.
	if st, err := r.Fail(ctx, "acme", remote.Failure{Lease: byID[ids[0]].Lease, Message: "boom https://u:secret@example.com/x?k=v", Stack: "Traceback"}); err != nil || st != job.Failed {
		t.Fatalf("fail last attempt: %s %v", st, err)
	}
	// ids[1]: 2 attempts, fails with retry_after: retrying, due in an hour.
	if st, err := r.Fail(ctx, "acme", remote.Failure{Lease: byID[ids[1]].Lease, Message: "later", RetryAfter: time.Hour}); err != nil || st != job.Retrying {
		t.Fatalf("fail: %s %v", st, err)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE id = $1 AND run_at > now() + interval '59 minutes'`, ids[1]); n != 1 {
		t.Fatal("retry_after not applied by the database clock")
	}
	// ids[2]: snoozed, not a used attempt.
	if st, err := r.Snooze(ctx, "acme", byID[ids[2]].Lease, time.Hour); err != nil || st != job.Pending {
		t.Fatalf("snooze: %s %v", st, err)
	}
	// A batch: ids[3] completes, ids[0] (already failed) is lease_lost, a
	// made-up id is not found.
	res, err := r.Complete(ctx, "acme", []remote.Completion{{Lease: byID[ids[3]].Lease}, {Lease: byID[ids[0]].Lease}, {Lease: remote.Lease{JobID: 999999, Attempt: 1, Token: 1}}})
	if err != nil || res[0].Err != nil || !errors.Is(res[1].Err, job.ErrLeaseLost) || !errors.Is(res[2].Err, job.ErrNotFound) {
		t.Fatalf("batch: %v %+v", err, res)
	}
	failed, _ := e.client.Get(ctx, "", ids[0])
	if len(failed.Errors) != 1 || failed.Errors[0].Error != "boom https://u:***@example.com/x?k=***" || failed.Errors[0].Stack != "Traceback" || failed.Errors[0].Node != w.ID {
		t.Fatalf("failed job's errors %+v", failed.Errors)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.dlq WHERE job_id = $1`, ids[0]); n != 1 {
		t.Fatal("no DLQ entry")
	}
	// Batches that name a job twice, or nothing, are refused whole.
	var ve *job.ValidationError
	if _, err := r.Complete(ctx, "acme", []remote.Completion{{Lease: byID[ids[3]].Lease}, {Lease: byID[ids[3]].Lease}}); !errors.As(err, &ve) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := r.Heartbeat(ctx, "acme", w.ID, nil); !errors.As(err, &ve) {
		t.Fatalf("empty heartbeat: %v", err)
	}
	// A result that is not valid JSON text refuses the batch.
	if _, err := r.Complete(ctx, "acme", []remote.Completion{{Lease: byID[ids[3]].Lease, Result: json.RawMessage(`{"a":1,"a":2}`)}}); !errors.As(err, &ve) {
		t.Fatalf("duplicate member names in a result: %v", err)
	}
}

// Drain of a remote worker: its claims return nothing (a waiting one
// wakes and says so), its running jobs may finish until the deadline,
// then the rest are released, and it is recorded as drained; a drained
// worker is gone.
func TestWorkerDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.newWorkers(remote.Config{})
	admin := cluster.NewAdmin(e.st.Pool())
	e.enqueue(job.Request{Kind: "k", Tenant: "acme"})
	e.enqueue(job.Request{Kind: "k", Tenant: "acme"})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	got := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 2})
	if len(got) != 2 {
		t.Fatalf("claimed %d", len(got))
	}
	e.enqueue(job.Request{Kind: "k", Tenant: "acme"})
	// A claim waiting when the drain order comes wakes and says draining.
	waiting := make(chan remote.ClaimResult, 1)
	go func() {
		res, _ := r.Claim(ctx, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 1, Wait: 20 * time.Second})
		waiting <- res
	}()
	// The third job is claimable: the waiting claim may take it first.
	time.Sleep(200 * time.Millisecond)
	if err := admin.Drain(ctx, w.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-waiting:
		if len(res.Jobs) == 1 {
			// It got the third job before the order; its next claim sees the drain.
			got = append(got, res.Jobs...)
			res, _ = r.Claim(ctx, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 1, Wait: time.Second})
		}
		if !res.Draining || len(res.Jobs) != 0 {
			t.Fatalf("claim after the drain order: %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting claim did not wake on the drain order")
	}
	e.sweep(r)
	if st := e.nodeState(w.ID); st != "draining" {
		t.Fatalf("state %q, want draining", st)
	}
	// In-flight jobs may still finish.
	if res, err := r.Complete(ctx, "acme", []remote.Completion{{Lease: got[0].Lease}}); err != nil || res[0].Err != nil {
		t.Fatalf("complete while draining: %v %+v", err, res)
	}
	// The deadline passes with the rest running: they are released.
	if err := admin.Drain(ctx, w.ID, 0); err != nil {
		t.Fatal(err)
	}
	e.sweep(r)
	for _, cj := range got[1:] {
		j, _ := e.client.Get(ctx, "", cj.ID)
		if j.State != job.Pending || len(j.Errors) != 1 || j.Errors[0].Kind != "released" || j.MaxAttempts != cj.MaxAttempts+1 {
			t.Fatalf("job %d after the deadline: %s %+v", cj.ID, j.State, j.Errors)
		}
	}
	if st := e.nodeState(w.ID); st != "dead" {
		t.Fatalf("state %q, want dead (drained)", st)
	}
	if reason := e.leftReason(w.ID); reason != "drained" {
		t.Fatalf("left reason %q", reason)
	}
	if res, err := r.Claim(ctx, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 1}); err != nil || !res.Draining {
		t.Fatalf("claim of a drained worker: %v %+v, want draining", err, res)
	}
}

// A drained worker with nothing running leaves at the next sweep.
func TestWorkerDrainedWhenIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.newWorkers(remote.Config{})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	if err := cluster.NewAdmin(e.st.Pool()).Drain(context.Background(), w.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	e.sweep(r)
	if st, reason := e.nodeState(w.ID), e.leftReason(w.ID); st != "dead" || reason != "drained" {
		t.Fatalf("idle drained worker: %s (%s)", st, reason)
	}
}

// A remote worker that stops calling loses its leases like a node (the
// lease rescuer runs its jobs again) and is marked lost; a worker that
// leaves gives its jobs back at once.
func TestSilentWorkerLosesItsLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.newWorkers(remote.Config{LeaseTTL: time.Second, SilentAfter: 1500 * time.Millisecond, MaxWait: time.Second})
	j := e.enqueue(job.Request{Kind: "k", Tenant: "acme"})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	if got := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 1}); len(got) != 1 {
		t.Fatal("no claim")
	}
	time.Sleep(1600 * time.Millisecond)
	if n, err := newRescuer(e).RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("rescued %d (%v)", n, err)
	}
	if got, _ := e.client.Get(ctx, "", j.ID); got.State != job.Retrying || got.Errors[0].Kind != "lost" {
		t.Fatalf("after rescue: %s %+v", got.State, got.Errors)
	}
	e.sweep(r)
	if st, reason := e.nodeState(w.ID), e.leftReason(w.ID); st != "dead" || reason != "lost" {
		t.Fatalf("silent worker: %s (%s)", st, reason)
	}
	if _, err := r.Claim(ctx, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 1}); !errors.Is(err, remote.ErrWorkerGone) {
		t.Fatalf("claim of a lost worker: %v", err)
	}
	// Leave: the running job is released at once, no attempt used up.
	w2 := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	if got := e.claim(r, remote.Claim{Tenant: "acme", Worker: w2.ID, Max: 1}); len(got) != 1 {
		t.Fatal("no claim")
	}
	if n, err := r.Leave(ctx, "acme", w2.ID); err != nil || n != 1 {
		t.Fatalf("leave: %d %v", n, err)
	}
	if got, _ := e.client.Get(ctx, "", j.ID); got.State != job.Pending || got.Errors[len(got.Errors)-1].Kind != "released" {
		t.Fatalf("after leave: %s %+v", got.State, got.Errors)
	}
	if _, err := r.Leave(ctx, "acme", w2.ID); !errors.Is(err, remote.ErrUnknownWorker) {
		t.Fatalf("second leave: %v", err)
	}
}

func (e *env) sweep(r *remote.Workers) {
	e.t.Helper()
	if _, err := remote.Sweep(r, context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) nodeState(id string) string {
	e.t.Helper()
	var s string
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT state FROM gaffer.nodes WHERE id = $1`, id).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) leftReason(id string) string {
	e.t.Helper()
	var s string
	e.st.Pool().QueryRow(context.Background(), `SELECT coalesce(left_reason, '') FROM gaffer.nodes WHERE id = $1`, id).Scan(&s)
	return s
}

// A concurrency limit holds across remote and in-process claims: remote
// claims go through the same admission. Red with claim_pick_remote not
// calling limit_admit (the remote worker takes all 10).
func TestClaimsCountAgainstLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "three", Kind: "k", Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		e.enqueue(job.Request{Kind: "k", Tenant: "acme"})
	}
	// A node holds one slot.
	e.claimAs("node-a", time.Hour)
	r := e.newWorkers(remote.Config{})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}, Kinds: []string{"k"}})
	got := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 10})
	if len(got) != 2 {
		t.Fatalf("remote claim took %d with one of 3 slots held: want 2", len(got))
	}
	if more := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 10}); len(more) != 0 {
		t.Fatalf("a full limit let %d more through", len(more))
	}
	// A completion frees a slot.
	if res, err := r.Complete(ctx, "acme", []remote.Completion{{Lease: got[0].Lease}}); err != nil || res[0].Err != nil {
		t.Fatalf("complete: %v %+v", err, res)
	}
	if more := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 10}); len(more) != 1 {
		t.Fatalf("after a completion: %d, want 1", len(more))
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE state = 'running'`); n != 3 {
		t.Fatalf("%d running, limit 3", n)
	}
}

// A remote claim shared among units (two fairness keys) is limited too:
// it decides whether limits apply from the kinds and tenants it took.
func TestSharedClaimCountsAgainstLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "three", Kind: "k", Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"f1", "f2"} {
		for range 10 {
			e.enqueue(job.Request{Kind: "k", Tenant: "acme", FairnessKey: key})
		}
	}
	r := e.newWorkers(remote.Config{})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}, Kinds: []string{"k"}})
	if got := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 10}); len(got) != 3 {
		t.Fatalf("a claim of 10 over two units took %d under a limit of 3", len(got))
	}
}

// Bad registrations and claims are refused, naming the field; a tenant
// holds at most MaxPerTenant workers.
func TestValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.newWorkers(remote.Config{MaxPerTenant: 2})
	for _, c := range []struct {
		reg   remote.Registration
		field string
	}{
		{remote.Registration{Tenant: "acme"}, "queues"},
		{remote.Registration{Tenant: "acme", Queues: []string{"Bad Queue"}}, "queues"},
		{remote.Registration{Tenant: "acme", Queues: []string{"q"}, Kinds: []string{"bad kind!"}}, "kinds"},
		{remote.Registration{Tenant: "acme", Queues: []string{"q"}, Name: "a\nb"}, "name"},
		{remote.Registration{Tenant: "acme", Queues: []string{"q"}, Version: string(make([]byte, 65))}, "version"},
		{remote.Registration{Tenant: "Not A Tenant", Queues: []string{"q"}}, "tenant"},
	} {
		var ve *job.ValidationError
		if _, err := r.Register(ctx, c.reg); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("register %+v: %v, want a %s error", c.reg, err, c.field)
		}
	}
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"q", "q"}})
	if len(w.Queues) != 1 || w.LeaseTTL != 30*time.Second || w.HeartbeatInterval != 10*time.Second {
		t.Fatalf("registered %+v", w)
	}
	e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"q"}})
	if _, err := r.Register(ctx, remote.Registration{Tenant: "acme", Queues: []string{"q"}}); !errors.Is(err, remote.ErrTooManyWorkers) {
		t.Fatalf("third worker: %v", err)
	}
	e.register(r, remote.Registration{Tenant: "other", Queues: []string{"q"}})
	for _, c := range []remote.Claim{
		{Tenant: "acme", Worker: w.ID, Max: 0},
		{Tenant: "acme", Worker: w.ID, Max: 1001},
		{Tenant: "acme", Worker: w.ID, Max: 1, Wait: time.Minute},
	} {
		var ve *job.ValidationError
		if _, err := r.Claim(ctx, c); !errors.As(err, &ve) {
			t.Errorf("claim %+v: %v", c, err)
		}
	}
	if _, err := r.Claim(ctx, remote.Claim{Worker: "rw_nope", Max: 1}); !errors.Is(err, remote.ErrUnknownWorker) {
		t.Fatalf("unknown worker: %v", err)
	}
}
