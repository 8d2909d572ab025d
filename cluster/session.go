package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/gafferhq/gaffer/internal/clock"
)

// connect returns the etcd client, creating it the first time. Without a
// username that only sets up a lazily dialling client; with one, the
// client authenticates as it is created (etcd's client does so), which
// fails while etcd is unreachable or refuses the credentials: the
// session loop then retries. Only the session loop calls it.
func (c *Cluster) connect() (*clientv3.Client, error) {
	if cl := c.client.Load(); cl != nil {
		return cl, nil
	}
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:            c.cfg.Endpoints,
		DialTimeout:          c.cfg.DialTimeout,
		DialKeepAliveTime:    c.cfg.SessionTTL / 2,
		DialKeepAliveTimeout: c.cfg.SessionTTL / 4,
		TLS:                  c.cfg.TLS,
		Username:             c.cfg.Username,
		Password:             c.cfg.Password,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	c.client.Store(cl)
	return cl, nil
}

// etcd is the client the session loop connected. Leader services and the
// session's helpers run only within a session, so it is never nil there.
func (c *Cluster) etcd() *clientv3.Client { return c.client.Load() }

// sessionLoop holds an etcd session, re-creating it whenever it ends,
// with jittered backoff while etcd is unreachable.
func (c *Cluster) sessionLoop(ctx context.Context) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := c.session(ctx, func() { backoff = 200 * time.Millisecond })
		c.connected.Store(false)
		c.metrics.etcdConnected.Set(0)
		if ctx.Err() != nil {
			return
		}
		err = c.explainTimeout(ctx, err)
		c.mu.Lock()
		c.etcdErr = err.Error()
		c.mu.Unlock()
		c.log.Warn("etcd session ended; retrying", "error", err, "backoff", backoff)
		if !clock.Sleep(ctx, c.clock, backoff/2+rand.N(backoff/2+1)) {
			return
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// session runs one etcd session: register, campaign, lead, until the
// session ends or ctx does.
func (c *Cluster) session(ctx context.Context, connected func()) error {
	client, err := c.connect()
	if err != nil {
		return err
	}
	ttl := int(c.cfg.SessionTTL / time.Second)
	grantCtx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	lease, err := client.Grant(grantCtx, int64(ttl))
	cancel()
	if err != nil {
		return fmt.Errorf("grant lease: %w", err)
	}
	// The session's own context must outlive ctx: Close revokes the lease
	// with it.
	sess, err := concurrency.NewSession(client, concurrency.WithLease(lease.ID), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return fmt.Errorf("new session: %w", err)
	}
	sessCtx, stopSession := context.WithCancel(ctx)
	defer func() {
		stopSession()
		closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		sess.Orphan()
		client.Revoke(closeCtx, sess.Lease())
	}()
	c.lastAck.Store(c.clock.Now().UnixNano())
	go c.watchKeepalives(sessCtx, sess)
	if err := c.publish(sessCtx, sess); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	c.mu.Lock()
	c.etcdErr = ""
	c.mu.Unlock()
	c.connected.Store(true)
	c.metrics.etcdConnected.Set(1)
	connected()
	c.log.Info("joined cluster", "lease", fmt.Sprintf("%x", int64(sess.Lease())))

	election := concurrency.NewElection(sess, c.electionPrefix())
	go c.watchLeader(sessCtx, election)
	won := make(chan error, 1)
	campaigning := false
	campaign := func() {
		campaigning = true
		go func() { won <- election.Campaign(sessCtx, c.cfg.Node.ID) }()
	}
	// resign gives up the election key; a pending Campaign must return
	// first (the Election is not safe for concurrent use).
	resign := func() {
		if campaigning {
			stopSession()
			<-won
			campaigning = false
		}
		resignCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		election.Resign(resignCtx)
		cancel()
	}
	campaign()
	publish := c.clock.NewTicker(time.Second)
	defer publish.Stop()
	defer c.revoke("session ended")
	var term *leadership // this session's term, once won
	for {
		var fenced <-chan struct{}
		if term != nil {
			fenced = term.fenced
		}
		select {
		case <-ctx.Done():
			c.revoke("node stopping")
			resign()
			return ctx.Err()
		case <-sess.Done():
			if c.fenceOnly && term != nil {
				// Keep leading until the fence says otherwise.
				c.mu.Lock()
				c.leading = nil
				c.mu.Unlock()
				go c.orphanedLeadership(ctx, term)
			}
			return errors.New("session lease expired or revoked")
		case err := <-won:
			campaigning = false
			if err != nil {
				if sessCtx.Err() != nil {
					return err
				}
				c.log.Warn("campaign failed; campaigning again", "error", err)
				clock.Sleep(ctx, c.clock, time.Second)
				campaign()
				continue
			}
			if term, err = c.becomeLeader(ctx, sessCtx, sess, election); err != nil {
				c.log.Warn("won the election but cannot lead; resigning", "error", err)
				resign()
				clock.Sleep(ctx, c.clock, time.Second)
				campaign()
			}
		case <-fenced:
			term = nil
			c.revoke("fenced: a newer leader exists")
			resign()
			campaign()
		case <-publish.C():
			if err := c.publish(sessCtx, sess); err != nil && sessCtx.Err() == nil {
				c.log.Warn("refresh node registration", "error", err)
			}
		}
	}
}
