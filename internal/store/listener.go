package store

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/internal/service"
)

// Notification channels.
const (
	// ChannelJobs carries a queue name when a due job is inserted.
	ChannelJobs = "gaffer_jobs"
	// ChannelControl carries JSON control messages: cancel a running job,
	// pause or resume a queue, drain a node.
	ChannelControl = "gaffer_control"
	// ChannelCron carries "tenant/name" when a cron entry changes.
	ChannelCron = "gaffer_cron"
)

// ListenerConfig configures a Listener.
type ListenerConfig struct {
	Channels []string
	// OnNotify is called for every notification, from the listener's
	// goroutine: it must not block.
	OnNotify func(channel, payload string)
	// OnConnect is called after every (re)connection, once LISTEN is in
	// place: notifications sent while disconnected are lost, so callers
	// resynchronise here. Must not block.
	OnConnect func()
	Logger    hclog.Logger
}

// Listener holds a dedicated connection that LISTENs on channels and
// reconnects, with jittered backoff, whenever it breaks.
type Listener struct {
	store     *Store
	cfg       ListenerConfig
	runner    service.Runner
	connected atomic.Bool
}

// NewListener returns a listener; Start connects it.
func (s *Store) NewListener(cfg ListenerConfig) *Listener {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.OnNotify == nil {
		cfg.OnNotify = func(string, string) {}
	}
	if cfg.OnConnect == nil {
		cfg.OnConnect = func() {}
	}
	return &Listener{store: s, cfg: cfg}
}

// Start begins listening in the background. It does not block and is
// idempotent; the loop runs until Stop or until ctx ends.
func (l *Listener) Start(ctx context.Context) error {
	l.runner.Start(ctx, l.loop)
	return nil
}

// Stop closes the connection and waits for the loop to exit.
func (l *Listener) Stop() { l.runner.Stop() }

// Connected reports whether LISTEN is currently in place.
func (l *Listener) Connected() bool { return l.connected.Load() }

func (l *Listener) loop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.session(ctx, func() { backoff = 100 * time.Millisecond })
		l.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		l.cfg.Logger.Warn("listen connection lost; reconnecting", "error", err, "backoff", backoff)
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// session connects, listens and relays notifications until the connection
// fails or ctx ends.
func (l *Listener) session(ctx context.Context, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.store.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range l.cfg.Channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	l.connected.Store(true)
	connected()
	l.cfg.OnConnect()
	for {
		// A connection that died silently (a blackholed network) would
		// wait forever, so a quiet spell ends in a ping.
		waitCtx, cancel := context.WithTimeout(ctx, listenerIdlePing)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		if err == nil {
			l.cfg.OnNotify(n.Channel, n.Payload)
			continue
		}
		if ctx.Err() != nil || waitCtx.Err() == nil {
			return err
		}
		pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = conn.Ping(pingCtx)
		cancel()
		if err != nil {
			return err
		}
	}
}

// listenerIdlePing is how long the listener waits in silence before it
// checks that its connection is alive.
const listenerIdlePing = 15 * time.Second
