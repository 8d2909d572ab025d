package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	// ChannelUnits carries "queue\ttenant\tfairness key" when a due job
	// is inserted (beside ChannelJobs): the unit a side claim may take it
	// from. See ParseUnitNotification.
	ChannelUnits = "gaffer_units"
)

// ParseUnitNotification reads a ChannelUnits payload. The fairness key is
// last, so it may hold tabs; ok is false for a payload of another form.
func ParseUnitNotification(payload string) (queue string, u Unit, ok bool) {
	queue, rest, ok1 := strings.Cut(payload, "\t")
	tenant, fkey, ok2 := strings.Cut(rest, "\t")
	if !ok1 || !ok2 || queue == "" {
		return "", Unit{}, false
	}
	return queue, Unit{Tenant: tenant, FairnessKey: fkey}, true
}

// ListenerConfig configures a Listener.
type ListenerConfig struct {
	Channels []string
	// URL is where the LISTEN connection goes (read by ListenConfig).
	// Default: the pool's own connection settings. A transaction-mode
	// pooler cannot carry LISTEN, whose registration lives in one server
	// session: when the pool goes through one, give a direct (or
	// session-pooled) URL here.
	URL string
	// OnNotify is called for every notification, from the listener's
	// goroutine: it must not block.
	OnNotify func(channel, payload string)
	// OnConnect is called after every (re)connection, once LISTEN is in
	// place: notifications sent while disconnected are lost, so callers
	// resynchronise here. Must not block.
	OnConnect func()
	// OnDisconnect is called when LISTEN is no longer in place (the
	// connection was lost): until the next OnConnect, notifications do
	// not arrive. Must not block.
	OnDisconnect func()
	Logger       hclog.Logger
}

// Listener holds a dedicated connection that LISTENs on channels and
// reconnects, with jittered backoff, whenever it breaks.
type Listener struct {
	store     *Store
	cfg       ListenerConfig
	conn      *pgx.ConnConfig
	connErr   error
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
	if cfg.OnDisconnect == nil {
		cfg.OnDisconnect = func() {}
	}
	l := &Listener{store: s, cfg: cfg}
	if cfg.URL != "" {
		l.conn, _, l.connErr = ListenConfig(cfg.URL)
	} else {
		l.conn = s.pool.Config().ConnConfig
	}
	return l
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
		listened := false
		err := l.session(ctx, func() { listened = true })
		if l.connected.Swap(false) {
			l.cfg.OnDisconnect()
		}
		if ctx.Err() != nil {
			return
		}
		// Connecting fails while the server is down or starting: try
		// again often enough that LISTEN is back within half a second of
		// the server (until then the claim loops poll every 50 ms).
		ceiling := 500 * time.Millisecond
		if errors.Is(err, ErrListenDeaf) {
			// Not a blip: the set-up is wrong, and says how. Nothing is
			// lost meanwhile, only latency: every node also polls.
			ceiling = time.Minute
		}
		if listened || ConnectionLost(err) {
			// A connection that was listening, or was being set up, was
			// lost (terminated by a pooler or an operator, a restart):
			// connect again at once, and back off only if connecting
			// fails.
			backoff = 100 * time.Millisecond
			l.cfg.Logger.Warn("listen connection lost; reconnecting at once", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(mrand.N(20 * time.Millisecond)):
			}
			continue
		}
		l.cfg.Logger.Warn("listen connection lost; reconnecting", "error", err, "backoff", backoff)
		wait := backoff/2 + mrand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(backoff*2, ceiling)
	}
}

// session connects, listens and relays notifications until the connection
// fails or ctx ends.
func (l *Listener) session(ctx context.Context, connected func()) error {
	if l.connErr != nil {
		return l.connErr
	}
	conn, err := pgx.ConnectConfig(ctx, l.conn.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	probe := probeChannel()
	for _, ch := range append(append([]string(nil), l.cfg.Channels...), probe) {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	if err := l.probe(ctx, conn, probe); err != nil {
		return err
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

// ConnectionLost says whether err ended a connection the server had
// accepted: the server terminated it (57P01 admin_shutdown:
// pg_terminate_backend, a pooler recycling it, a fast shutdown; 57P02
// crash_shutdown) or the connection broke under it, or it was found
// closed already. The pool drops such a connection, and the next one is
// likely alive: try again at once. A connection refused (the server
// down, or starting: 57P03) is not lost; wait before trying again.
func ConnectionLost(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "57P01" || pgErr.Code == "57P02"
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err)
}

// ErrListenDeaf means the LISTEN connection did not receive a
// notification sent through the pool.
var ErrListenDeaf = errors.New("LISTEN receives nothing on this connection: a notification sent through the pool did not arrive in time; " +
	"a transaction-mode pooler (PgBouncer pool_mode = transaction) cannot carry LISTEN, and the listen URL must reach the same server as the database URL: " +
	"give the node a direct or session-pooled URL for it (--listen-database-url); until then it finds new work by polling")

// listenProbeTimeout is how long a notification sent through the pool
// may take to reach a new LISTEN connection (a variable for tests).
var listenProbeTimeout = 10 * time.Second

// probe proves the connection hears what the pool says: it sends a
// notification on the connection's private channel through the pool and
// waits for it, relaying the notifications that arrive meanwhile. LISTEN
// succeeds through a transaction-mode pooler, or on a server other than
// the pool's, and then hears nothing; without the probe the node would
// think itself connected and wait for wake-ups that never come.
func (l *Listener) probe(ctx context.Context, conn *pgx.Conn, channel string) error {
	// A pool connection that was terminated fails its statement and is
	// dropped; when every connection of the pool was terminated at once
	// (as the listen connection was) each may fail in turn before the
	// pool opens a new one.
	var err error
	for try := int32(0); try <= l.store.pool.Stat().MaxConns(); try++ {
		if _, err = l.store.pool.Exec(ctx, `SELECT pg_notify($1, '')`, channel); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("send a probe notification through the pool: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, listenProbeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(waitCtx)
		if err != nil {
			if ctx.Err() == nil && waitCtx.Err() != nil {
				return ErrListenDeaf
			}
			return err
		}
		if n.Channel == channel {
			return nil
		}
		l.cfg.OnNotify(n.Channel, n.Payload)
	}
}

// probeChannel names a channel no other connection listens on.
func probeChannel() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "gaffer_probe_" + hex.EncodeToString(b)
}

// listenerIdlePing is how long the listener waits in silence before it
// checks that its connection is alive.
const listenerIdlePing = 15 * time.Second
