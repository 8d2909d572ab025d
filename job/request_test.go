package job_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
)

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	big := `{"x":"` + strings.Repeat("a", job.MaxArgsBytes) + `"}`
	cases := []struct {
		name  string
		req   job.Request
		field string
	}{
		{"no kind", job.Request{}, "kind"},
		{"kind with spaces", job.Request{Kind: "send email"}, "kind"},
		{"kind too long", job.Request{Kind: strings.Repeat("k", 129)}, "kind"},
		{"queue out of format", job.Request{Kind: "k", Queue: "Mail Queue"}, "queue"},
		{"queue too long", job.Request{Kind: "k", Queue: strings.Repeat("q", 65)}, "queue"},
		{"tenant out of format", job.Request{Kind: "k", Tenant: "ACME!"}, "tenant"},
		{"priority too low", job.Request{Kind: "k", Priority: -1}, "priority"},
		{"priority too high", job.Request{Kind: "k", Priority: 10}, "priority"},
		{"attempts negative", job.Request{Kind: "k", MaxAttempts: -1}, "max_attempts"},
		{"attempts too many", job.Request{Kind: "k", MaxAttempts: 1001}, "max_attempts"},
		{"timeout negative", job.Request{Kind: "k", Timeout: -time.Second}, "timeout"},
		{"timeout too long", job.Request{Kind: "k", Timeout: 8 * 24 * time.Hour}, "timeout"},
		{"negative delay", job.Request{Kind: "k", Delay: -time.Second}, "delay"},
		{"run_at and delay", job.Request{Kind: "k", RunAt: time.Now(), Delay: time.Second}, "run_at"},
		{"unique key too long", job.Request{Kind: "k", UniqueKey: strings.Repeat("u", 256)}, "unique_key"},
		{"unique key with NUL", job.Request{Kind: "k", UniqueKey: "a\x00b"}, "unique_key"},
		{"unique_for too short", job.Request{Kind: "k", UniqueKey: "u", UniqueFor: 999 * time.Millisecond}, "unique_for"},
		{"unique_for too long", job.Request{Kind: "k", UniqueKey: "u", UniqueFor: 367 * 24 * time.Hour}, "unique_for"},
		{"unique_for negative", job.Request{Kind: "k", UniqueKey: "u", UniqueFor: -time.Hour}, "unique_for"},
		{"unique_for not whole ms", job.Request{Kind: "k", UniqueKey: "u", UniqueFor: time.Second + time.Microsecond}, "unique_for"},
		{"unique_states not a state", job.Request{Kind: "k", UniqueKey: "u", UniqueStates: []job.State{"done"}}, "unique_states"},
		{"unique_for without a key", job.Request{Kind: "k", UniqueFor: time.Hour}, "unique_key"},
		{"unique_states without a key", job.Request{Kind: "k", UniqueStates: []job.State{job.Pending}}, "unique_key"},
		{"windowed key too long", job.Request{Kind: "k", UniqueKey: strings.Repeat("u", 256), UniqueFor: time.Hour}, "unique_key"},
		{"windowed key with NUL", job.Request{Kind: "k", UniqueKey: "a\x00b", UniqueStates: []job.State{job.Pending}}, "unique_key"},
		{"args not JSON", job.Request{Kind: "k", Args: []byte(`{"a":`)}, "args"},
		{"args with NUL", job.Request{Kind: "k", Args: map[string]string{"a": "x\x00y"}}, "args"},
		{"args too big", job.Request{Kind: "k", Args: []byte(big)}, "args"},
		{"args not encodable", job.Request{Kind: "k", Args: make(chan int)}, "args"},
	}
	for _, c := range cases {
		_, err := e.client.Enqueue(ctx, c.req)
		var ve *job.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: error %v, want a validation error on %q", c.name, err, c.field)
		}
	}
	// One bad request in a batch inserts nothing.
	_, err := e.client.EnqueueMany(ctx, []job.Request{{Kind: "ok"}, {Kind: "ok", Priority: 99}})
	var ve *job.ValidationError
	if !errors.As(err, &ve) || ve.Field != "jobs[1].priority" {
		t.Fatalf("batch error %v", err)
	}
	jobs, _ := e.client.List(ctx, job.Filter{})
	if len(jobs) != 0 {
		t.Fatalf("%d jobs written by rejected requests", len(jobs))
	}
	// Defaults are filled in.
	j := e.enqueue(job.Request{Kind: "k"})
	if j.Queue != "default" || j.Tenant != "default" || j.MaxAttempts != job.DefaultMaxAttempts || j.Priority != 0 || j.State != job.Pending {
		t.Fatalf("defaults: %+v", j)
	}
}

func TestListFiltersAndPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var ids []int64
	for i := range 5 {
		q := "a"
		if i%2 == 1 {
			q = "b"
		}
		ids = append(ids, e.enqueue(job.Request{Kind: "k", Queue: q}).ID)
	}
	e.enqueue(job.Request{Kind: "other", Tenant: "acme"})
	page, _ := e.client.List(ctx, job.Filter{Tenant: "default", Limit: 2})
	if len(page) != 2 || page[0].ID != ids[4] || page[1].ID != ids[3] {
		t.Fatalf("page 1 %v", page)
	}
	page, _ = e.client.List(ctx, job.Filter{Tenant: "default", Limit: 2, BeforeID: page[1].ID})
	if len(page) != 2 || page[0].ID != ids[2] {
		t.Fatalf("page 2 %v", page)
	}
	if got, _ := e.client.List(ctx, job.Filter{Queue: "b"}); len(got) != 2 {
		t.Fatalf("queue b: %d", len(got))
	}
	if got, _ := e.client.List(ctx, job.Filter{Kind: "other"}); len(got) != 1 || got[0].Tenant != "acme" {
		t.Fatalf("kind filter: %v", got)
	}
	if got, _ := e.client.List(ctx, job.Filter{States: []job.State{job.Completed}}); len(got) != 0 {
		t.Fatalf("state filter: %d", len(got))
	}
	if _, err := e.client.Get(ctx, "acme", ids[0]); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("cross-tenant get: %v", err)
	}
	if _, err := e.client.Cancel(ctx, "acme", ids[0]); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("cross-tenant cancel: %v", err)
	}
}
