package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/job"
)

func (h *Handler) cancelJob(r *http.Request, p auth.Principal) (string, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "", "", err
	}
	to := fmt.Sprintf("/ui/jobs/%d", id)
	state, err := h.cfg.Jobs.Cancel(r.Context(), p.ReadTenant(""), id)
	if err != nil {
		return to, "", err
	}
	if state == job.Running {
		return to, fmt.Sprintf("Job %d is running: its handler is being cancelled.", id), nil
	}
	return to, fmt.Sprintf("Job %d cancelled.", id), nil
}

func (h *Handler) retryJob(r *http.Request, p auth.Principal) (string, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "", "", err
	}
	newID, err := h.cfg.Jobs.Retry(r.Context(), p.ReadTenant(""), id)
	if err != nil {
		return fmt.Sprintf("/ui/jobs/%d", id), "", err
	}
	if newID == id {
		return fmt.Sprintf("/ui/jobs/%d", id), fmt.Sprintf("Job %d is due now.", id), nil
	}
	return fmt.Sprintf("/ui/jobs/%d", newID), fmt.Sprintf("Job %d was replayed from the DLQ as job %d.", id, newID), nil
}

// resumeSequence lets the halted sequence of job id go on.
func (h *Handler) resumeSequence(r *http.Request, p auth.Principal) (string, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "", "", err
	}
	back := fmt.Sprintf("/ui/jobs/%d", id)
	j, err := h.cfg.Jobs.Get(r.Context(), p.ReadTenant(""), id)
	if err != nil {
		return back, "", err
	}
	if j.Sequence == "" {
		return back, "", badInput("job %d is in no sequence", id)
	}
	head, err := h.cfg.Jobs.ResumeSequence(r.Context(), j.Tenant, j.Sequence)
	if errors.Is(err, job.ErrNotHalted) || errors.Is(err, job.ErrNotFound) {
		return back, "", badInput("the sequence of job %d is not halted", id)
	}
	if err != nil {
		return back, "", err
	}
	if head == 0 {
		return back, "The sequence was resumed; no job was waiting in it.", nil
	}
	return back, fmt.Sprintf("The sequence was resumed: job %d runs next.", head), nil
}

// errOperatorOnly refuses a tenant's token what acts on every tenant.
func errOperatorOnly(p auth.Principal) error {
	return fmt.Errorf("%w: only an operator's token spanning tenants may do this; this token acts for tenant %s", errForbidden, p.Tenant)
}

// mayDrain: a spanning token drains any node or remote worker, a tenant's
// admin token only its own tenant's remote workers (another tenant's is
// not found, as the token does not see it).
func (h *Handler) mayDrain(r *http.Request, p auth.Principal, id string) error {
	if p.Spans() {
		return nil
	}
	rows, err := h.cfg.Admin.Nodes(r.Context())
	if err != nil {
		return err
	}
	for _, n := range rows {
		if n.ID != id {
			continue
		}
		if n.Kind != "remote" {
			return errOperatorOnly(p)
		}
		if n.Tenant == p.Tenant {
			return nil
		}
	}
	return fmt.Errorf("%w: no remote worker %s of tenant %s", errNotFound, id, p.Tenant)
}

func (h *Handler) pauseQueue(r *http.Request, p auth.Principal) (string, string, error) {
	if !p.Spans() {
		return "/ui/queues", "", errOperatorOnly(p)
	}
	q := r.PathValue("queue")
	if err := h.cfg.Jobs.PauseQueue(r.Context(), q); err != nil {
		return "/ui/queues", "", err
	}
	return "/ui/queues", fmt.Sprintf("Queue %s paused: no node claims from it until it is resumed; running jobs finish.", q), nil
}

func (h *Handler) resumeQueue(r *http.Request, p auth.Principal) (string, string, error) {
	if !p.Spans() {
		return "/ui/queues", "", errOperatorOnly(p)
	}
	q := r.PathValue("queue")
	if err := h.cfg.Jobs.ResumeQueue(r.Context(), q); err != nil {
		return "/ui/queues", "", err
	}
	return "/ui/queues", fmt.Sprintf("Queue %s resumed.", q), nil
}

func (h *Handler) drainNode(r *http.Request, p auth.Principal) (string, string, error) {
	id := r.PathValue("node")
	if err := h.mayDrain(r, p, id); err != nil {
		return "/ui/nodes", "", err
	}
	text := strings.TrimSpace(r.PostForm.Get("deadline"))
	if text == "" {
		text = "30s"
	}
	d, err := time.ParseDuration(text)
	if err != nil || d < 0 || d > cluster.MaxDrainDeadline {
		return "/ui/nodes", "", badInput("the drain deadline must be a duration between 0s and 24h, such as 30s or 5m; got %q", text)
	}
	if err := h.cfg.Admin.Drain(r.Context(), id, d); err != nil {
		return "/ui/nodes", "", err
	}
	return "/ui/nodes", fmt.Sprintf("Node %s is draining: it claims nothing more, and jobs still running after %s are released to other nodes.", id, d), nil
}

func (h *Handler) undrainNode(r *http.Request, p auth.Principal) (string, string, error) {
	id := r.PathValue("node")
	if err := h.mayDrain(r, p, id); err != nil {
		return "/ui/nodes", "", err
	}
	if err := h.cfg.Admin.Undrain(r.Context(), id); err != nil {
		return "/ui/nodes", "", err
	}
	return "/ui/nodes", fmt.Sprintf("Node %s claims jobs again.", id), nil
}

func cronPath(tenant, name string) string {
	return "/ui/cron/" + url.PathEscape(tenant) + "/" + url.PathEscape(name)
}

func (h *Handler) pauseCron(r *http.Request, p auth.Principal) (string, string, error) {
	return h.cronAction(r, p, "paused", func(tenant, name string) error {
		_, err := h.cfg.Cron.Pause(r.Context(), tenant, name)
		return err
	})
}

func (h *Handler) resumeCron(r *http.Request, p auth.Principal) (string, string, error) {
	return h.cronAction(r, p, "resumed", func(tenant, name string) error {
		_, err := h.cfg.Cron.Resume(r.Context(), tenant, name)
		return err
	})
}

func (h *Handler) triggerCron(r *http.Request, p auth.Principal) (string, string, error) {
	var jobID int64
	to, msg, err := h.cronAction(r, p, "triggered", func(tenant, name string) error {
		var err error
		jobID, err = h.cfg.Cron.Trigger(r.Context(), tenant, name)
		return err
	})
	if err == nil {
		msg += fmt.Sprintf(": job %d enqueued.", jobID)
	}
	return to, msg, err
}

func (h *Handler) cronAction(r *http.Request, p auth.Principal, done string, act func(tenant, name string) error) (string, string, error) {
	tenant, err := cronTenant(r, p)
	if err != nil {
		return "/ui/cron", "", err
	}
	name := r.PathValue("name")
	to := cronPath(tenant, name)
	if err := act(tenant, name); err != nil {
		return to, "", err
	}
	return to, fmt.Sprintf("Cron entry %s %s", name, done), nil
}

// dlqBack is the DLQ page with the filter the form carried.
func dlqBack(r *http.Request) string {
	return link("/ui/dlq", "queue", r.PostForm.Get("queue"), "kind", r.PostForm.Get("kind"), "error", r.PostForm.Get("error"),
		"show", r.PostForm.Get("show"), "tenant", r.PostForm.Get("tenant"))
}

// replayDLQ replays the entries ticked (id fields), or with all=yes every
// unreplayed entry matching the filter.
func (h *Handler) replayDLQ(r *http.Request, p auth.Principal) (string, string, error) {
	back := dlqBack(r)
	if r.PostForm.Get("all") == "yes" {
		f, _, err := dlqFilter(r.PostForm.Get, p, r.PostForm.Get("tenant"))
		if err != nil {
			return back, "", err
		}
		f.Replayed = nil
		rs, err := h.cfg.DLQ.ReplayMatching(r.Context(), f)
		if err != nil {
			return back, "", err
		}
		return back, fmt.Sprintf("Replayed %d entries, each into one new job.", len(rs)), nil
	}
	ids := r.PostForm["id"]
	if len(ids) == 0 {
		return back, "", badInput("tick at least one entry to replay")
	}
	var replayed []string
	var refused []string
	for _, s := range ids {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return back, "", badInput("entry ids must be positive integers, got %q", s)
		}
		rep, err := h.cfg.DLQ.Replay(r.Context(), p.ReadTenant(""), id)
		if err != nil {
			status, text := h.describe(err)
			if status >= 500 {
				return back, "", err
			}
			refused = append(refused, fmt.Sprintf("entry %d: %s", id, text))
			continue
		}
		replayed = append(replayed, fmt.Sprintf("%d→job %d", id, rep.JobID))
	}
	if len(ids) == 1 && len(replayed) == 1 && r.PostForm.Get("back") != "" {
		back = backTo(r)
	}
	msg := fmt.Sprintf("Replayed %d of %d entries", len(replayed), len(ids))
	if len(replayed) > 0 {
		msg += " (" + strings.Join(replayed, ", ") + ")"
	}
	if len(refused) > 0 {
		msg += "; refused " + strings.Join(refused, "; ")
	}
	return back, msg + ".", nil
}

// purgeDLQ deletes every entry matching the filter; the form must carry
// confirm=purge.
func (h *Handler) purgeDLQ(r *http.Request, p auth.Principal) (string, string, error) {
	back := dlqBack(r)
	if r.PostForm.Get("confirm") != "purge" {
		return back, "", badInput("tick the confirmation box to purge: purged entries cannot be replayed")
	}
	f, _, err := dlqFilter(r.PostForm.Get, p, r.PostForm.Get("tenant"))
	if err != nil {
		return back, "", err
	}
	n, err := h.cfg.DLQ.Purge(r.Context(), f)
	if err != nil {
		return back, "", err
	}
	return back, fmt.Sprintf("Deleted %d DLQ entries.", n), nil
}

func (h *Handler) deleteDLQEntry(r *http.Request, p auth.Principal) (string, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "/ui/dlq", "", err
	}
	if err := h.cfg.DLQ.Delete(r.Context(), p.ReadTenant(""), id); err != nil {
		return "/ui/dlq", "", err
	}
	return "/ui/dlq", fmt.Sprintf("DLQ entry %d deleted.", id), nil
}

func (h *Handler) cancelWorkflow(r *http.Request, p auth.Principal) (string, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "/ui/workflows", "", err
	}
	to := fmt.Sprintf("/ui/workflows/%d", id)
	if _, err := h.cfg.Workflows.Cancel(r.Context(), p.ReadTenant(""), id); err != nil {
		return to, "", err
	}
	return to, fmt.Sprintf("Workflow run %d cancelled.", id), nil
}
