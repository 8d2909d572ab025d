package dlq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// deadLetter enqueues a job and fails it permanently through the store, as
// a worker would, returning its DLQ entry id.
func deadLetter(t *testing.T, st *store.Store, r job.Request, msg string) int64 {
	t.Helper()
	ctx := context.Background()
	res, err := job.NewClient(st.Pool(), nil).Enqueue(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: res.Job.Queue, Limit: 1, Token: 7, LeaseTTL: time.Minute, Node: "n"})
	if err != nil || len(rows) != 1 || rows[0].ID != res.Job.ID {
		t.Fatalf("claim: %v %v", rows, err)
	}
	l := store.Lease{ID: rows[0].ID, Attempt: rows[0].Attempt, Token: rows[0].LeaseToken}
	if state, err := st.FailJob(ctx, store.Failure{Lease: l, Permanent: true, Message: msg, Kind: "error"}); err != nil || state != "failed" {
		t.Fatalf("fail: %s %v", state, err)
	}
	var id int64
	if err := st.Pool().QueryRow(ctx, `SELECT id FROM gaffer.dlq WHERE job_id = $1`, res.Job.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestConcurrentReplaysMakeOneJob(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	c := dlq.NewClient(st.Pool())
	ctx := context.Background()
	id := deadLetter(t, st, job.Request{Kind: "k", Args: map[string]int{"n": 1}, Queue: "mail", Priority: 3,
		FairnessKey: "fk-1", LimitKey: "lk-1"}, "smtp down")

	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok []dlq.Replay
	refused := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Replay(ctx, "", id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok = append(ok, r)
			case errors.Is(err, dlq.ErrAlreadyReplayed):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(ok) != 1 || refused != 15 {
		t.Fatalf("%d replays succeeded, %d refused; want 1 and 15", len(ok), refused)
	}
	var jobs int
	st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE replay_of = $1`, id).Scan(&jobs)
	if jobs != 1 {
		t.Fatalf("%d jobs replay the entry", jobs)
	}
	e, _ := c.Get(ctx, "", id)
	nj, _ := job.NewClient(st.Pool(), nil).Get(ctx, "", ok[0].JobID)
	// The replay keeps its fairness unit and its limit key (G10).
	if e.ReplayJobID != nj.ID || nj.ReplayOf != id || nj.Queue != "mail" || nj.Priority != 3 || string(nj.Args) != `{"n":1}` || nj.State != job.Pending ||
		nj.FairnessKey != "fk-1" || nj.LimitKey != "lk-1" {
		t.Fatalf("entry %+v, job %+v", e, nj)
	}
}

func TestFilterReplayMatchingAndPurge(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	c := dlq.NewClient(st.Pool())
	ctx := context.Background()
	a := deadLetter(t, st, job.Request{Kind: "email", Queue: "mail"}, "SMTP timeout")
	b := deadLetter(t, st, job.Request{Kind: "email", Queue: "mail"}, "mailbox full")
	d := deadLetter(t, st, job.Request{Kind: "resize", Queue: "media"}, "smtp? no: bad image")
	other := deadLetter(t, st, job.Request{Kind: "email", Queue: "mail", Tenant: "acme"}, "smtp timeout")

	list := func(f dlq.Filter) []int64 {
		t.Helper()
		es, err := c.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, e := range es {
			ids = append(ids, e.ID)
		}
		return ids
	}
	if got := list(dlq.Filter{Tenant: "default", Kind: "email"}); len(got) != 2 || got[0] != b || got[1] != a {
		t.Fatalf("by kind: %v", got)
	}
	if got := list(dlq.Filter{ErrorContains: "SMTP"}); len(got) != 3 {
		t.Fatalf("by error text: %v", got)
	}
	if got := list(dlq.Filter{Tenant: "acme"}); len(got) != 1 || got[0] != other {
		t.Fatalf("by tenant: %v", got)
	}
	if got := list(dlq.Filter{FailedAfter: time.Now().Add(time.Hour)}); len(got) != 0 {
		t.Fatalf("future range: %v", got)
	}
	if got := list(dlq.Filter{Limit: 2}); len(got) != 2 || got[0] != other {
		t.Fatalf("page 1: %v", got)
	}
	if got := list(dlq.Filter{Limit: 2, BeforeID: d}); len(got) != 2 || got[0] != b {
		t.Fatalf("page 2: %v", got)
	}
	if _, err := c.List(ctx, dlq.Filter{Queue: "Not Valid"}); err == nil {
		t.Fatal("invalid queue filter accepted")
	}

	// Replay every default-tenant email matching "smtp": only a.
	rs, err := c.ReplayMatching(ctx, dlq.Filter{Tenant: "default", Kind: "email", ErrorContains: "smtp"})
	if err != nil || len(rs) != 1 || rs[0].EntryID != a {
		t.Fatalf("replay matching: %v %v", rs, err)
	}
	// Again: nothing left to replay in that filter.
	if rs, _ := c.ReplayMatching(ctx, dlq.Filter{Tenant: "default", Kind: "email", ErrorContains: "smtp"}); len(rs) != 0 {
		t.Fatalf("second replay matching replayed %v", rs)
	}
	replayed := true
	if got := list(dlq.Filter{Replayed: &replayed}); len(got) != 1 || got[0] != a {
		t.Fatalf("replayed filter: %v", got)
	}

	// Tenant scoping: acme's entry is invisible to default.
	if _, err := c.Get(ctx, "default", other); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("cross-tenant get: %v", err)
	}
	if _, err := c.Replay(ctx, "default", other); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("cross-tenant replay: %v", err)
	}
	if err := c.Delete(ctx, "default", other); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("cross-tenant delete: %v", err)
	}
	if err := c.Delete(ctx, "", d); err != nil {
		t.Fatal(err)
	}
	n, err := c.Purge(ctx, dlq.Filter{Tenant: "default"})
	if err != nil || n != 2 {
		t.Fatalf("purged %d, %v", n, err)
	}
	left := list(dlq.Filter{})
	if len(left) != 1 || left[0] != other {
		t.Fatalf("left %v", left)
	}
	e, _ := c.Get(ctx, "", other)
	if len(e.Errors) != 1 || !strings.Contains(e.Errors[0].Error, "smtp timeout") || e.Reason != "permanent" {
		t.Fatalf("entry %+v", e)
	}
}
