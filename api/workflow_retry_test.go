package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/workflow"
)

// POST /v1/workflows/{id}/steps/{step}/retry retries a failed step: the
// failed run returns to running, the step follows a new job. A step that
// did not fail, a step of no run the token sees, and a bad name are
// refused.
func TestRetryWorkflowStepEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var run workflow.Run
	e.do(e.writer, "POST", "/v1/workflows", `{"name":"w","steps":[{"name":"a","kind":"k","queue":"wf-retry"},{"name":"b","kind":"k","depends_on":["a"]}]}`).decode(t, &run)
	path := fmt.Sprintf("/v1/workflows/%d/steps/a/retry", run.ID)
	e.expectProblem(e.do(e.writer, "POST", path, nil), 409, "not_retryable")

	jobs, err := e.st.ClaimJobs(ctx, store.ClaimParams{Queue: "wf-retry", Limit: 1, Token: 1, LeaseTTL: time.Minute, Node: "test"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	j := jobs[0]
	if _, err := e.st.FailJob(ctx, store.Failure{Lease: store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}, Permanent: true, Message: "boom", Kind: "error"}); err != nil {
		t.Fatal(err)
	}
	e.expectProblem(e.do(e.acme, "POST", path, nil), 404, "not_found")
	e.expectProblem(e.do(e.reader, "POST", path, nil), 403, "forbidden")
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/workflows/%d/steps/zz/retry", run.ID), nil), 404, "not_found")
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/workflows/%d/steps/-bad/retry", run.ID), nil), 400, "invalid_parameter")

	var got workflow.Run
	e.do(e.writer, "POST", path, nil).decode(t, &got)
	if got.State != workflow.Running || got.Steps[0].State != "active" || got.Steps[0].JobID == j.ID || got.Steps[1].State != "waiting" {
		t.Fatalf("after the retry: %+v", got)
	}
	e.expectProblem(e.do(e.writer, "POST", path, nil), 409, "not_retryable")
}
