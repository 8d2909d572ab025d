package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// A kind's Check runs wherever a request of that kind enters through a
// client that has the registry: enqueue (one or many), a cron template, a
// workflow step. It refuses with its error, writing nothing, and may fill
// in the fairness key.
func TestKindCheckRunsWhereRequestsEnter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	reg := job.NewRegistry()
	reg.HandleFunc("mail", func(context.Context, *job.Job) error { return nil }, job.KindOptions{
		Check: func(r *job.Request) error {
			var a struct{ To string }
			json.Unmarshal(r.Args.(json.RawMessage), &a)
			if a.To == "" {
				return &job.ValidationError{Field: "args.to", Message: "is required", Code: "no_recipient"}
			}
			if r.FairnessKey == "" {
				r.FairnessKey = a.To
			}
			return nil
		}})
	jobs := job.NewClient(e.st.Pool(), nil).WithKinds(reg)
	refused := func(what string, err error, field string) {
		t.Helper()
		var ve *job.ValidationError
		if !errors.As(err, &ve) || ve.Field != field || ve.Code != "no_recipient" {
			t.Errorf("%s: %v, want the check's error on %s", what, err, field)
		}
	}
	_, err := jobs.Enqueue(ctx, job.Request{Kind: "mail", Args: map[string]string{}})
	refused("Enqueue", err, "args.to")
	_, err = jobs.EnqueueMany(ctx, []job.Request{{Kind: "mail", Args: map[string]string{"to": "a"}}, {Kind: "mail"}})
	refused("EnqueueMany", err, "jobs[1].args.to")
	_, err = cron.NewClient(e.st.Pool()).WithKinds(reg).Create(ctx, cron.Entry{Name: "c", Schedule: "@daily", Job: cron.JobTemplate{Kind: "mail"}})
	refused("cron Create", err, "job.args.to")
	def, _ := workflow.New("w").Job("a", "mail", nil).Definition()
	_, err = workflow.NewClient(e.st.Pool()).WithKinds(reg).Submit(ctx, def)
	refused("workflow Submit", err, "steps[0].args.to")
	var rows int
	e.st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM gaffer.jobs) + (SELECT count(*) FROM gaffer.cron_entries) + (SELECT count(*) FROM gaffer.workflow_runs)`).Scan(&rows)
	if rows != 0 {
		t.Fatalf("%d rows written by refused requests", rows)
	}

	res, err := jobs.Enqueue(ctx, job.Request{Kind: "mail", Args: map[string]string{"to": "ada@example.com"}})
	if err != nil || res.Job.FairnessKey != "ada@example.com" {
		t.Fatalf("accepted job: %+v, %v; want the check's fairness key", res.Job, err)
	}
	// Without the registry, nothing kind-specific runs.
	if _, err := job.NewClient(e.st.Pool(), nil).Enqueue(ctx, job.Request{Kind: "mail"}); err != nil {
		t.Fatalf("a client without kinds ran a kind check: %v", err)
	}
}
