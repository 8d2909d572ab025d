package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Member is a node as registered in etcd.
type Member struct {
	NodeInfo
	State     string    `json:"state"`
	InFlight  int       `json:"in_flight"`
	StartedAt time.Time `json:"started_at"`
}

// publish writes this node's registration under its session's lease.
func (c *Cluster) publish(ctx context.Context, sess *concurrency.Session) error {
	c.mu.Lock()
	state := c.state
	c.mu.Unlock()
	m := Member{NodeInfo: c.cfg.Node, State: state, InFlight: c.cfg.Worker.InFlight(), StartedAt: startedAt}
	b, _ := json.Marshal(m)
	value := fmt.Sprintf("%x/%s", int64(sess.Lease()), b)
	if value == c.published {
		return nil // unchanged: etcd keeps it under the lease
	}
	putCtx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	if _, err := c.etcd().Put(putCtx, c.nodeKey(c.cfg.Node.ID), string(b), clientv3.WithLease(sess.Lease())); err != nil {
		return err
	}
	c.published = value
	return nil
}

var startedAt = time.Now()

// Members lists the nodes registered in etcd now.
func (c *Cluster) Members(ctx context.Context) ([]Member, error) {
	client := c.client.Load()
	if client == nil {
		return nil, errors.New("not connected to etcd yet")
	}
	resp, err := client.Get(ctx, c.nodesPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) == nil {
			out = append(out, m)
		}
	}
	return out, nil
}
