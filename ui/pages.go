package ui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/tzdata"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// nodeView is a node row with whether it holds the leader fence.
type nodeView struct {
	cluster.NodeRecord
	Leader bool
}

// Shown is the state to show: a node that left on its own (drained or
// stopped) is "left", one that vanished is "dead".
func (n nodeView) Shown() string {
	return cluster.ShownState(n.State, n.LeftReason)
}

// nodes are the nodes and remote workers p sees: a tenant's token sees
// the nodes, which carry nothing of any tenant, and only its own tenant's
// remote workers (G9).
func (h *Handler) nodes(r *http.Request, p auth.Principal) ([]nodeView, cluster.FenceState, error) {
	rows, err := h.cfg.Admin.Nodes(r.Context())
	if err != nil {
		return nil, cluster.FenceState{}, err
	}
	fence, err := h.cfg.Admin.Fence(r.Context())
	if err != nil {
		return nil, fence, err
	}
	out := make([]nodeView, 0, len(rows))
	for _, n := range rows {
		if n.Kind == "remote" && !p.Owns(n.Tenant) {
			continue
		}
		out = append(out, nodeView{NodeRecord: n, Leader: n.ID == fence.Leader && n.State != "dead"})
	}
	return out, fence, nil
}

// zoneRulesDisagreement words how the live nodes' zone rules differ, or
// is "" when they agree.
func zoneRulesDisagreement(nodes []nodeView) string {
	return tzdata.Disagreement(nodes, func(n nodeView) (string, string, bool) {
		return n.ID, n.TZData, n.State != "dead" && n.Kind != "remote"
	})
}

type overviewData struct {
	// Cluster is whether the token may see the cluster's own state
	// (cluster:read): leader, nodes, etcd. Without it those stay empty.
	Cluster bool
	Fence   cluster.FenceState
	Status  *cluster.Status
	// Health is what else the serving node sees degraded (a long
	// transaction holding back vacuum).
	Health []string
	Chart  chart
	Queues []job.Queue
	// Nodes are the live nodes and those that left within the hour
	// (remote workers: a tenant's token sees its own tenant's only).
	Nodes []nodeView
	// ZoneRules says how live nodes' time zone rules differ; "" if not.
	ZoneRules string
	Counts    map[string]int
	// Remote is how many remote workers the token sees are live.
	Remote int
	DLQ    int64
}

func (h *Handler) overview(r *http.Request, v *view) error {
	v.Title = "Overview"
	ctx := r.Context()
	d := overviewData{Counts: map[string]int{}, Cluster: v.Can(auth.ScopeClusterRead)}
	if d.Cluster {
		nodes, fence, err := h.nodes(r, v.P)
		if err != nil {
			return err
		}
		d.Fence, d.ZoneRules = fence, zoneRulesDisagreement(nodes)
		for _, n := range nodes {
			if n.Kind == "remote" {
				if n.State != "dead" {
					d.Remote++
				}
			} else {
				d.Counts[n.State]++
			}
			if n.State != "dead" || n.SinceSeen < time.Hour {
				d.Nodes = append(d.Nodes, n)
			}
		}
		if h.cfg.Cluster != nil {
			st := h.cfg.Cluster.Status()
			d.Status = &st
		}
		if h.cfg.Health != nil {
			d.Health = h.cfg.Health(v.P.Spans())
		}
	}
	// Throughput and queues are the token's tenant's only.
	tenant := v.P.ReadTenant(v.Tenant)
	series, err := h.cfg.Jobs.Throughput(ctx, tenant, time.Hour)
	if err != nil {
		return err
	}
	d.Chart = throughputChart(series, time.Now())
	if d.Queues, err = h.cfg.Jobs.QueueDepths(ctx, tenant, depthCap); err != nil {
		return err
	}
	if d.DLQ, err = h.cfg.DLQ.CountUnreplayed(ctx, v.P.ReadTenant(v.Tenant), depthCap); err != nil {
		return err
	}
	v.Data = d
	return nil
}

type jobsData struct {
	States             []job.State
	State, Queue, Kind string
	// CronEntry and WorkflowRun keep one entry's or one run's jobs.
	CronEntry   string
	WorkflowRun int64
	// Search is the search box's text: jobs whose kind or args contain
	// it, among the newest job.SearchWindow the other filters select.
	Search string
	Before int64
	Jobs   []*job.Job
	// Older is the cursor of the next page; zero on the last.
	Older int64
	// Timers shows the workflow timers (gaffer.sleep, gaffer.signal
	// jobs), which the page otherwise leaves out of the rows it read;
	// Hidden is how many it left out.
	Timers bool
	Hidden int
	// Estimate is the planner's row estimate for the whole table, shown to
	// tokens that span tenants; exact counts of millions are slow.
	Estimate int64
	// Tabs are the state tabs, each with its count for the filter
	// (capped at depthCap); All is their sum.
	Tabs []stateTab
	All  int64
	// Matching is the count of the tab shown: the jobs the filter selects.
	Matching int64
	// Query is the filter, for links and the bulk forms.
	Query jobsQuery
	// SearchWindow is how many of the newest jobs a search looks through;
	// WindowCut says this page's search reached the end of its window
	// (older jobs may match: Older goes on past it).
	SearchWindow int
	WindowCut    bool
}

// stateTab is a state tab of the jobs list: its state ("" for all), count
// for the filter, link, and whether it is the one shown.
type stateTab struct {
	State  string
	Count  int64
	Link   string
	Active bool
}

// BulkLink is the count preview of a bulk action on every job matching
// the filter.
func (d jobsData) BulkLink(action string) string {
	return d.Query.Link("/ui/jobs/bulk", "action", action)
}

func (h *Handler) jobsPage(r *http.Request, v *view) error {
	v.Title = "Jobs"
	q, err := readJobsQuery(r.URL.Query().Get, v.P)
	if err != nil {
		return err
	}
	q.Tenant = v.Tenant
	if id, err := strconv.ParseInt(q.Search, 10, 64); err == nil && id > 0 {
		// A job id goes to that job, when the token sees it; otherwise the
		// number is searched for as text.
		if _, err := h.cfg.Jobs.Get(r.Context(), v.P.ReadTenant(""), id); err == nil {
			return redirect(fmt.Sprintf("/ui/jobs/%d", id))
		} else if !errors.Is(err, job.ErrNotFound) {
			return err
		}
	}
	d := jobsData{States: job.States, State: q.State, Queue: q.Queue, Kind: q.Kind, CronEntry: q.CronEntry, WorkflowRun: q.WorkflowRun,
		Search: q.Search, Timers: q.Timers, Query: q, SearchWindow: job.SearchWindow}
	f := q.filter(v.P)
	// The page reads timers and leaves them out itself, saying how many.
	f.NoTimers = false
	f.Limit = pageSize
	if d.Before, err = idParam(r, "before"); err != nil {
		return err
	}
	f.BeforeID, f.MaxBytes = d.Before, h.cfg.MaxPageBytes
	found, err := h.cfg.Jobs.Search(r.Context(), f)
	if err != nil {
		return err
	}
	// A search whose window was cut goes on past it, even from a page
	// that found nothing.
	d.Jobs, d.Older, d.WindowCut = found.Jobs, found.Next, found.WindowCut
	if !d.Timers && d.Kind == "" && d.WorkflowRun == 0 {
		all := len(d.Jobs)
		d.Jobs = job.WithoutTimers(d.Jobs)
		d.Hidden = all - len(d.Jobs)
	}
	counts, err := h.cfg.Jobs.CountByState(r.Context(), q.filter(v.P), depthCap)
	if err != nil {
		return err
	}
	d.Tabs = append(d.Tabs, stateTab{Link: q.withState("").Link("/ui/jobs"), Active: q.State == ""})
	for _, st := range job.States {
		n := int64(counts[st])
		d.All += n
		d.Tabs = append(d.Tabs, stateTab{State: string(st), Count: n, Link: q.withState(string(st)).Link("/ui/jobs"), Active: q.State == string(st)})
		if q.State == string(st) {
			d.Matching = n
		}
	}
	d.Tabs[0].Count = d.All
	if q.State == "" {
		d.Matching = d.All
	}
	if v.Spanning() {
		if d.Estimate, err = h.cfg.Jobs.EstimateJobs(r.Context()); err != nil {
			return err
		}
	}
	v.Data = d
	return nil
}

type jobData struct {
	Job *job.Job
	// Times are its durations and attempt timeline.
	Times jobTimes
	// Entry is a failed job's DLQ entry, if it still exists.
	Entry             *dlq.Entry
	CanCancel         bool
	CanRetry          bool
	RetryExplanation  string
	CancelExplanation string
	// Sequence is where the job's sequence stands (nil: none, or the
	// sequence has nothing left).
	Sequence *job.SequenceStatus
}

func (h *Handler) jobPage(r *http.Request, v *view) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	tenant := v.P.ReadTenant("")
	j, err := h.cfg.Jobs.Get(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	v.Title = "Job " + strconv.FormatInt(id, 10)
	d := jobData{Job: j, Times: timesOf(j, v.Now)}
	switch j.State {
	case job.Retrying:
		d.CanRetry, d.RetryExplanation = true, "Run the next attempt now instead of waiting out the backoff."
	case job.Failed:
		entries, err := h.cfg.DLQ.List(r.Context(), dlq.Filter{Tenant: tenant, JobID: id, Limit: 1})
		if err != nil {
			return err
		}
		if len(entries) == 1 {
			d.Entry = &entries[0]
			if d.Entry.ReplayedAt == nil {
				d.CanRetry, d.RetryExplanation = true, "Replay its DLQ entry into one new job."
			}
		}
	}
	if j.Sequence != "" {
		st, err := h.cfg.Jobs.Sequence(r.Context(), j.Tenant, j.Sequence)
		if err == nil {
			d.Sequence = &st
		} else if !errors.Is(err, job.ErrNotFound) {
			return err
		}
	}
	if !j.State.Finished() {
		d.CanCancel = !j.CancelRequested
		d.CancelExplanation = "Cancel now."
		if j.State == job.Running {
			d.CancelExplanation = "Cancel the running handler's context; the job ends cancelled."
		}
	}
	v.Data = d
	return nil
}

type queuesData struct {
	Queues []job.Queue
	Limits []job.LimitUsage
}

func (h *Handler) queuesPage(r *http.Request, v *view) error {
	v.Title = "Queues"
	qs, err := h.cfg.Jobs.QueueDepths(r.Context(), v.P.ReadTenant(v.Tenant), depthCap)
	if err != nil {
		return err
	}
	d := queuesData{Queues: qs}
	// Limits name queues, kinds and tenants, and their keys are args
	// values: a tenant's token sees its own tenant's only.
	if v.Can(auth.ScopeClusterRead) {
		all, err := h.cfg.Jobs.Limits(r.Context())
		if err != nil {
			return err
		}
		for _, l := range all {
			if v.P.Owns(l.Tenant) {
				d.Limits = append(d.Limits, l)
			}
		}
	}
	v.Data = d
	return nil
}

func (h *Handler) nodesPage(r *http.Request, v *view) error {
	v.Title = "Nodes"
	if !v.Can(auth.ScopeClusterRead) {
		return errNeedsScope(auth.ScopeClusterRead)
	}
	nodes, fence, err := h.nodes(r, v.P)
	if err != nil {
		return err
	}
	v.Data = struct {
		Nodes     []nodeView
		Fence     cluster.FenceState
		ZoneRules string
	}{nodes, fence, zoneRulesDisagreement(nodes)}
	return nil
}

func (h *Handler) workflowsPage(r *http.Request, v *view) error {
	v.Title = "Workflow runs"
	state := r.URL.Query().Get("state")
	before, err := idParam(r, "before")
	if err != nil {
		return err
	}
	runs, err := h.cfg.Workflows.List(r.Context(), v.P.ReadTenant(v.Tenant), state, before, pageSize)
	if err != nil {
		return err
	}
	var older int64
	if len(runs) == pageSize {
		older = runs[len(runs)-1].ID
	}
	v.Data = struct {
		States        []string
		State         string
		Runs          []workflow.Run
		Before, Older int64
	}{workflow.RunStates, state, runs, before, older}
	return nil
}

func (h *Handler) workflowPage(r *http.Request, v *view) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	run, err := h.cfg.Workflows.Get(r.Context(), v.P.ReadTenant(""), id)
	if err != nil {
		return err
	}
	v.Title = "Workflow run " + strconv.FormatInt(id, 10)
	v.Data = struct {
		Run workflow.Run
		DAG dag
		// Signals are the signal steps waiting for their signal.
		Signals []string
	}{run, layoutDAG(run.Steps), waitingSignals(run)}
	return nil
}

// pathID reads a positive integer id from the path.
func pathID(r *http.Request, name string) (int64, error) {
	s := r.PathValue(name)
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badInput("%s must be a positive integer, got %q", name, s)
	}
	return id, nil
}

// idParam reads an optional positive integer from the query.
func idParam(r *http.Request, name string) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badInput("%s must be a positive integer, got %q", name, s)
	}
	return id, nil
}
