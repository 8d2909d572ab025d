package job_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// A job that fails many times keeps a bounded history: the first three
// attempts, an entry counting those left out, and the latest ones — 20
// entries, however many attempts (red without migration 0011's bound).
func TestErrorHistoryIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	j := e.enqueue(job.Request{Kind: "k", Queue: "many", MaxAttempts: 50})
	for i := range 50 {
		e.claimAndFail("many", store.Failure{Message: fmt.Sprintf("boom %d", i+1), Kind: "error"})
	}
	got, err := e.client.Get(ctx, "", j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != job.Failed || len(got.Errors) != 20 {
		t.Fatalf("state %s with %d errors, want failed with 20", got.State, len(got.Errors))
	}
	var attempts []int
	for _, x := range got.Errors {
		attempts = append(attempts, x.Attempt)
	}
	want := []int{1, 2, 3, 34}
	for a := 35; a <= 50; a++ {
		want = append(want, a)
	}
	if fmt.Sprint(attempts) != fmt.Sprint(want) {
		t.Fatalf("attempts kept %v, want %v", attempts, want)
	}
	if m := got.Errors[3]; m.Kind != "omitted" || m.Omitted != 31 || !strings.Contains(m.Error, "31 earlier") {
		t.Fatalf("marker %+v, want 31 attempts omitted (4-34)", m)
	}
	if last := got.Errors[19]; last.Error != "boom 50" {
		t.Fatalf("last error %q", last.Error)
	}
	// The DLQ entry carries the same bounded history.
	var n int
	if err := e.st.Pool().QueryRow(ctx, `SELECT jsonb_array_length(errors) FROM gaffer.dlq WHERE job_id = $1`, j.ID).Scan(&n); err != nil || n != 20 {
		t.Fatalf("DLQ entry has %d errors (%v), want 20", n, err)
	}
}

// A handler's error is stored capped at 8 KiB and with URL secrets masked:
// a 900 KB URL with a password used to store 1.8 MB per attempt, password
// included.
func TestStoredErrorIsCappedAndRedacted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	long := "https://admin:hunter2@receiver.test/" + strings.Repeat("p", 900<<10) + "?api_key=s3cret"
	e.reg.HandleFunc("leaky", func(ctx context.Context, j *job.Job) error {
		return job.Permanent(fmt.Errorf("Post %q: %w", long, errors.New("connection refused")))
	})
	e.reg.HandleFunc("leaky-cancel", func(ctx context.Context, j *job.Job) error {
		return job.Cancel(fmt.Errorf("gave up on https://u:pw@x.test/?token=t0k"))
	})
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "leaky"})
	got := e.waitState(j.ID, job.Failed)
	msg := got.Errors[0].Error
	if len(msg) > store.MaxErrorBytes {
		t.Fatalf("stored error is %d bytes, want at most %d", len(msg), store.MaxErrorBytes)
	}
	if !strings.Contains(msg, "truncated") {
		t.Fatalf("a cut error does not say so: ...%s", msg[len(msg)-80:])
	}
	if strings.Contains(msg, "hunter2") || !strings.Contains(msg, "admin:***@receiver.test") {
		t.Fatalf("password not masked: %.120s", msg)
	}
	c := e.enqueue(job.Request{Kind: "leaky-cancel"})
	got = e.waitState(c.ID, job.Cancelled)
	if m := got.Errors[0].Error; strings.Contains(m, "pw@") || strings.Contains(m, "t0k") {
		t.Fatalf("cancel reason not redacted: %q", m)
	}
}
