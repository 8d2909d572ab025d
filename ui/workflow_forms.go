package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/workflow"
)

// The workflow page sends signals (as POST /v1/workflows/{id}/signal) and
// retries failed steps (as POST /v1/workflows/{id}/steps/{step}/retry),
// with the jobs:write scope.

// waitingSignals are the run's signal steps waiting for their signal.
func waitingSignals(run workflow.Run) []string {
	var out []string
	if run.State != workflow.Running {
		return nil
	}
	for _, s := range run.Steps {
		if s.Type == "signal" && s.State == "active" {
			out = append(out, s.Name)
		}
	}
	return out
}

func (h *Handler) signalWorkflow(r *http.Request, p auth.Principal) (string, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "/ui/workflows", "", err
	}
	step := strings.TrimSpace(r.PostForm.Get("step"))
	if step == "" {
		return "", "", badField("step", "choose the signal step to signal")
	}
	var payload json.RawMessage
	if text := strings.TrimSpace(r.PostForm.Get("payload")); text != "" {
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(text)); err != nil {
			return "", "", badField("payload", "payload must be JSON, such as {\"approved\": true}, or empty for null: %s", quoteBounded(err.Error()))
		}
		payload = b.Bytes()
	}
	err = h.cfg.Workflows.Signal(r.Context(), p.ReadTenant(""), id, step, payload)
	switch {
	case errors.Is(err, workflow.ErrNotSignalStep), errors.Is(err, workflow.ErrNotWaiting):
		return "", "", badField("step", "step %s: %v", quoteBounded(step), err)
	case errors.Is(err, workflow.ErrNotFound) && strings.Contains(err.Error(), "has no step"):
		return "", "", badField("step", "%v", err)
	case err != nil:
		return fmt.Sprintf("/ui/workflows/%d", id), "", err
	}
	return fmt.Sprintf("/ui/workflows/%d", id), fmt.Sprintf("Signal %s delivered: the step completed with the payload as its result.", step), nil
}

func (h *Handler) retryStep(r *http.Request, p auth.Principal) (string, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "/ui/workflows", "", err
	}
	to := fmt.Sprintf("/ui/workflows/%d", id)
	step := r.PathValue("step")
	newID, err := h.cfg.Workflows.RetryStep(r.Context(), p.ReadTenant(""), id, step)
	if errors.Is(err, workflow.ErrStepNotRetryable) {
		return to, "", badInput("%v", err)
	}
	if err != nil {
		return to, "", err
	}
	return to, fmt.Sprintf("Step %s is running again as job %d; the run goes on once it completes.", step, newID), nil
}
