package job_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// Progress: a handler reports it through its lease; it shows on the job
// as it was written (18.3 stored as a real read 18.299999237060547);
// after the lease is lost it is refused and changes nothing.
func TestSetProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	reported := make(chan error, 1)
	release := make(chan struct{})
	e.reg.HandleFunc("long", func(ctx context.Context, j *job.Job) error {
		reported <- j.SetProgress(ctx, 18.3, "halfway: 17 of 40 pages")
		<-release
		// The lease is gone by now (the test took the job over).
		reported <- j.SetProgress(ctx, 90, "late")
		return nil
	})
	e.startWorker(job.WorkerConfig{LeaseTTL: time.Hour})
	j := e.enqueue(job.Request{Kind: "long"})
	if err := <-reported; err != nil {
		t.Fatalf("SetProgress: %v", err)
	}
	got, _ := e.client.Get(ctx, "", j.ID)
	if got.Progress == nil || got.Progress.Percent != 18.3 || got.Progress.Message != "halfway: 17 of 40 pages" || got.Progress.Attempt != 1 || got.Progress.At.IsZero() {
		t.Fatalf("progress %+v", got.Progress)
	}
	// Another attempt takes the job over (as after a lost lease).
	e.exec(`UPDATE gaffer.jobs SET attempt = attempt + 1, lease_token = 7 WHERE id = $1`, j.ID)
	close(release)
	if err := <-reported; !errors.Is(err, job.ErrLeaseLost) {
		t.Fatalf("SetProgress after losing the lease: %v", err)
	}
	got, _ = e.client.Get(ctx, "", j.ID)
	if got.Progress.Percent != 18.3 {
		t.Fatalf("a stale progress was recorded: %+v", got.Progress)
	}
	// Bad values are refused before anything is written.
	for _, c := range []struct {
		p   float64
		msg string
	}{{-1, ""}, {100.5, ""}, {50, string(make([]byte, job.MaxProgressMessage+1))}, {50, "two\nlines"}, {50, "\u202eevil"}, {50, "\xff"}} {
		if err := job.CheckProgress(c.p, c.msg); err == nil {
			t.Errorf("CheckProgress(%v, %q) accepted", c.p, c.msg)
		}
	}
	if err := job.CheckProgress(100, "done ✓"); err != nil {
		t.Fatal(err)
	}
	// A job read back is not an attempt this process runs.
	if err := got.SetProgress(ctx, 1, ""); err == nil {
		t.Fatal("SetProgress on a job read with Get succeeded")
	}
}
