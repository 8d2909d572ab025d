package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/internal/tzdata"
	"github.com/gafferhq/gaffer/job"
)

type queueView struct {
	Name         string  `json:"name"`
	Paused       bool    `json:"paused"`
	Pending      int64   `json:"pending"`
	Retrying     int64   `json:"retrying"`
	Running      int64   `json:"running"`
	OldestDueAge float64 `json:"oldest_due_age_seconds"`
	// Workers counts the live nodes and remote workers that work the
	// queue; Warning says why its waiting jobs will not run (no worker,
	// or the queue is paused), empty when they will.
	Workers int64  `json:"workers"`
	Warning string `json:"warning,omitempty"`
}

// listQueues answers a tenant's token with its own queues and counts
// only; a token spanning tenants sees every queue, or one tenant's with
// ?tenant=.
func (s *Server) listQueues(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	qs, err := s.cfg.Jobs.Queues(r.Context(), tenantFilter(p, r))
	if err != nil {
		return 0, nil, err
	}
	views := make([]queueView, len(qs))
	for i, q := range qs {
		views[i] = queueView{Name: q.Name, Paused: q.Paused, Pending: q.Pending, Retrying: q.Retrying, Running: q.Running, OldestDueAge: q.OldestDueAge.Seconds(),
			Workers: q.Workers, Warning: q.Unworked()}
	}
	return http.StatusOK, list[queueView]{Data: views}, nil
}

type queueState struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
}

func (s *Server) setQueuePaused(r *http.Request, paused bool) (int, any, error) {
	name := r.PathValue("queue")
	if err := job.ValidateName("queue", name); err != nil {
		return 0, nil, paramProblem("queue", err.Error())
	}
	var err error
	if paused {
		err = s.cfg.Jobs.PauseQueue(r.Context(), name)
	} else {
		err = s.cfg.Jobs.ResumeQueue(r.Context(), name)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, queueState{Name: name, Paused: paused}, nil
}

func (s *Server) pauseQueue(r *http.Request, _ auth.Principal, _ []byte) (int, any, error) {
	return s.setQueuePaused(r, true)
}

func (s *Server) resumeQueue(r *http.Request, _ auth.Principal, _ []byte) (int, any, error) {
	return s.setQueuePaused(r, false)
}

type nodeView struct {
	ID               string         `json:"id"`
	Hostname         string         `json:"hostname"`
	Version          string         `json:"version"`
	TZData           string         `json:"tzdata"`
	Queues           map[string]int `json:"queues"`
	State            string         `json:"state"`
	InFlight         int            `json:"in_flight"`
	Leader           bool           `json:"leader"`
	StartedAt        time.Time      `json:"started_at"`
	LastSeen         time.Time      `json:"last_seen"`
	SecondsSinceSeen float64        `json:"seconds_since_seen"`
	DrainRequestedAt *time.Time     `json:"drain_requested_at,omitempty"`
	DrainDeadline    *time.Time     `json:"drain_deadline,omitempty"`
	DrainedAt        *time.Time     `json:"drained_at,omitempty"`
	LeftAt           *time.Time     `json:"left_at,omitempty"`
	LeftReason       string         `json:"left_reason,omitempty"`
	// Kind is "node" or "remote" (a remote worker: it claims over HTTP;
	// its queues show 0, since it asks for as many jobs as it wants).
	// Tenant and Kinds are a remote worker's: the tenant whose jobs it
	// works ("*": every tenant's) and the kinds it named (none: any).
	Kind   string   `json:"kind"`
	Tenant string   `json:"tenant,omitempty"`
	Kinds  []string `json:"kinds,omitempty"`
}

// visible reports whether the principal sees n: a node carries nothing of
// any tenant, a remote worker is its tenant's (G9).
func visible(p auth.Principal, n nodeView) bool {
	return n.Kind != "remote" || p.Owns(n.Tenant)
}

// nodes are the nodes and remote workers p sees.
func (s *Server) nodes(ctx context.Context, p auth.Principal) ([]nodeView, cluster.FenceState, error) {
	rows, err := s.cfg.Admin.Nodes(ctx)
	if err != nil {
		return nil, cluster.FenceState{}, err
	}
	fence, err := s.cfg.Admin.Fence(ctx)
	if err != nil {
		return nil, fence, err
	}
	views := make([]nodeView, 0, len(rows))
	for _, n := range rows {
		v := nodeView{ID: n.ID, Hostname: n.Hostname, Version: n.Version, TZData: n.TZData, Queues: n.Queues, State: n.State, InFlight: n.InFlight,
			Leader: n.ID == fence.Leader && n.State != "dead", StartedAt: n.StartedAt, LastSeen: n.LastSeen, SecondsSinceSeen: n.SinceSeen.Seconds(),
			DrainRequestedAt: n.DrainRequestedAt, DrainDeadline: n.DrainDeadline, DrainedAt: n.DrainedAt, LeftAt: n.LeftAt, LeftReason: n.LeftReason,
			Kind: n.Kind, Tenant: n.Tenant, Kinds: n.Kinds}
		if v.Queues == nil {
			v.Queues = map[string]int{}
		}
		if visible(p, v) {
			views = append(views, v)
		}
	}
	return views, fence, nil
}

// listNodes answers a tenant's token with the nodes and its own tenant's
// remote workers only.
func (s *Server) listNodes(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	views, _, err := s.nodes(r.Context(), p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list[nodeView]{Data: views}, nil
}

type drainBody struct {
	Deadline *string `json:"deadline"`
}

// mayDrain is nil when p may drain or undrain the node or remote worker
// id: a spanning token any, a tenant's admin token only its own tenant's
// remote workers. Another tenant's worker answers 404, as the token does
// not see it; a node answers 403.
func (s *Server) mayDrain(r *http.Request, p auth.Principal, id string) error {
	if p.Spans() {
		return nil
	}
	rows, err := s.cfg.Admin.Nodes(r.Context())
	if err != nil {
		return err
	}
	for _, n := range rows {
		if n.ID != id {
			continue
		}
		if n.Kind != "remote" {
			return operatorOnly(p)
		}
		if n.Tenant == p.Tenant {
			return nil
		}
	}
	return notFoundProblem("remote worker of tenant "+p.Tenant, id)
}

func (s *Server) drainNode(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	id := r.PathValue("id")
	deadline := 30 * time.Second
	if len(body) > 0 {
		var b drainBody
		if pr := decodeStrict(body, &b); pr != nil {
			return 0, nil, pr
		}
		d, pr := parseDuration("deadline", b.Deadline)
		if pr != nil {
			return 0, nil, pr
		}
		if b.Deadline != nil {
			deadline = d
		}
		if deadline < 0 || deadline > cluster.MaxDrainDeadline {
			return 0, nil, fieldProblem("deadline", "deadline must be between 0s and 24h")
		}
	}
	if err := s.mayDrain(r, p, id); err != nil {
		return 0, nil, err
	}
	if err := s.cfg.Admin.Drain(r.Context(), id, deadline); err != nil {
		if errors.Is(err, cluster.ErrUnknownNode) {
			return 0, nil, notFoundProblem("live node", id)
		}
		return 0, nil, err
	}
	return s.nodeByID(r, p, id)
}

func (s *Server) undrainNode(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id := r.PathValue("id")
	if err := s.mayDrain(r, p, id); err != nil {
		return 0, nil, err
	}
	if err := s.cfg.Admin.Undrain(r.Context(), id); err != nil {
		if errors.Is(err, cluster.ErrUnknownNode) {
			return 0, nil, notFoundProblem("live node", id)
		}
		return 0, nil, err
	}
	return s.nodeByID(r, p, id)
}

func (s *Server) nodeByID(r *http.Request, p auth.Principal, id string) (int, any, error) {
	views, _, err := s.nodes(r.Context(), p)
	if err != nil {
		return 0, nil, err
	}
	for _, v := range views {
		if v.ID == id {
			return http.StatusOK, v, nil
		}
	}
	return 0, nil, notFoundProblem("node", id)
}

type clusterView struct {
	Leader      string         `json:"leader,omitempty"`
	Epoch       int64          `json:"epoch"`
	LeaderSince *time.Time     `json:"leader_since,omitempty"`
	Nodes       map[string]int `json:"nodes"`
	// RemoteWorkers counts the remote workers by state, apart from the
	// nodes.
	RemoteWorkers map[string]int `json:"remote_workers"`
	// This node's view.
	EtcdConnected bool     `json:"etcd_connected"`
	Degraded      []string `json:"degraded"`
}

// clusterStatus counts, for a tenant's token, only its own tenant's
// remote workers.
func (s *Server) clusterStatus(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	views, fence, err := s.nodes(r.Context(), p)
	if err != nil {
		return 0, nil, err
	}
	out := clusterView{Leader: fence.Leader, Epoch: fence.Epoch, LeaderSince: fence.RaisedAt, Nodes: map[string]int{"active": 0, "draining": 0, "dead": 0},
		RemoteWorkers: map[string]int{"active": 0, "draining": 0, "dead": 0}, Degraded: []string{}}
	for _, v := range views {
		if v.Kind == "remote" {
			out.RemoteWorkers[v.State]++
		} else {
			out.Nodes[v.State]++
		}
	}
	if d := tzdata.Disagreement(views, func(v nodeView) (string, string, bool) {
		return v.ID, v.TZData, v.State != "dead" && v.Kind != "remote"
	}); d != "" {
		out.Degraded = append(out.Degraded, d)
	}
	if s.cfg.Cluster != nil {
		st := s.cfg.Cluster.Status()
		out.EtcdConnected = st.EtcdConnected
		out.Degraded = append(out.Degraded, st.Degraded...)
	} else {
		out.Degraded = append(out.Degraded, "this node runs without etcd: no leader election")
	}
	if s.cfg.Health != nil {
		out.Degraded = append(out.Degraded, s.cfg.Health(p.Spans())...)
	}
	return http.StatusOK, out, nil
}
