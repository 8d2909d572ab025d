package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/gafferhq/gaffer/store"
)

// devCluster is gaffer dev's nodes: child processes running `gaffer
// dev-node`, each with its own pools and its own port, so that one can be
// killed (kill -9), paused (kill -STOP) or drained (kill -TERM) while the
// others run on and rescue its jobs, as in a real cluster.
//
// No node outlives dev: each is killed when dev dies, however it dies
// (Pdeathsig; the node also watches for a new parent), and dev stops and
// waits for every node before it returns.
type devCluster struct {
	log    hclog.Logger
	stderr io.Writer
	nodes  []*devNode
	mu     sync.Mutex // guards the nodes' stopping
	// exited receives each node as its process ends.
	exited chan *devNode
}

// devNode is one node's process.
type devNode struct {
	name string
	addr string // its HTTP address (127.0.0.1:port)
	pid  int
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has ended
	// answers is whether the node's last health probe was answered: a
	// paused (SIGSTOP) node's port still accepts connections, but nothing
	// behind it answers.
	answers atomic.Bool
	// stopping is set once the node was sent SIGTERM: a second one
	// stops it at once.
	stopping bool
}

// start starts a node process: args for the gaffer command, env its
// environment, ln its HTTP listener (handed over and closed here).
func (c *devCluster) start(args, env []string, ln net.Listener) error {
	if c.exited == nil {
		c.exited = make(chan *devNode, 16)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start a dev node: %w", err)
	}
	lf, err := ln.(*net.TCPListener).File()
	ln.Close() // the node's copy is the one that counts: when it dies, its port refuses at once
	if err != nil {
		return fmt.Errorf("start a dev node: %w", err)
	}
	defer lf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start a dev node: %w", err)
	}
	defer pw.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.ExtraFiles = []*os.File{lf} // devListenerFD
	// Its own process group: the terminal's Ctrl-C reaches dev alone, and
	// dev stops the nodes (a second Ctrl-C forces them). Pdeathsig: if dev
	// is killed, the kernel kills the node. (Pdeathsig fires when the
	// thread that started the node ends; Go ends only threads locked to a
	// goroutine, and this goroutine is not locked.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		pr.Close()
		return fmt.Errorf("start a dev node: %w", err)
	}
	n := &devNode{name: nodeName(args), addr: ln.Addr().String(), pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	n.answers.Store(true)
	c.nodes = append(c.nodes, n)
	// The node's log goes to dev's stderr. A write that fails (the
	// terminal or `| tee` is gone) drops the line: the node is never
	// held up by its log.
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		defer pr.Close()
		r := bufio.NewReaderSize(pr, 64<<10)
		for {
			line, err := r.ReadSlice('\n')
			if len(line) > 0 {
				c.stderr.Write(line)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		cmd.Wait()
		<-copied // its last lines before the news of its end
		close(n.done)
		c.exited <- n
	}()
	c.log.Info("dev node started", "node", n.name, "pid", n.pid, "addr", n.addr)
	return nil
}

// nodeName is the --node-id in a node's arguments.
func nodeName(args []string) string {
	for i, a := range args {
		if a == "--node-id" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return "?"
}

// waitReady waits until every node's /readyz answers 200, and then until
// each has joined the cluster (its /readyz lists nothing degraded, as
// etcd unreachable until its session and registration are up; for up to
// joinWithin, then it is left degraded), and until the nodes table shows
// every node active. A node that ends first is an error: its log says
// why.
//
// The nodes start side by side, and a leader that starts its dead-node
// watch between another node's row and that node's etcd registration
// marks it dead until its next report (2s): a drain ordered meanwhile
// finds no live node by that name.
func (c *devCluster) waitReady(ctx context.Context, within time.Duration, st *store.Store) error {
	const joinWithin = 20 * time.Second
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: time.Second}
	for _, n := range c.nodes {
		var readySince time.Time
		for {
			if resp, err := client.Get("http://" + n.addr + "/readyz"); err == nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					if readySince.IsZero() {
						readySince = time.Now()
					}
					if strings.TrimSpace(string(b)) == "ready" || time.Since(readySince) > joinWithin {
						break
					}
				}
			}
			select {
			case <-n.done:
				return fmt.Errorf("dev node %s (pid %d) %s before it was ready; its log is above", n.name, n.pid, n.ending())
			case <-ctx.Done():
				return nil // Ctrl-C while starting: the caller stops
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("dev node %s (pid %d) was not ready within %s", n.name, n.pid, within)
			}
		}
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		rows, err := st.ListNodes(ctx)
		if err != nil {
			continue
		}
		active := map[string]bool{}
		for _, r := range rows {
			active[r.ID] = r.State == "active"
		}
		all := true
		for _, n := range c.nodes {
			all = all && active[n.name]
		}
		if all {
			return nil
		}
	}
	return nil
}

// stop sends SIGTERM to every node still running, then SIGCONT, so that
// a paused node gets it too. The first SIGTERM drains a node; with force,
// a node already draining is sent another, which stops it at once.
func (c *devCluster) stop(force bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if !n.ended() && (force || !n.stopping) {
			n.stopping = true
			n.cmd.Process.Signal(syscall.SIGTERM)
			n.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
}

// stopAll stops every node still running (SIGTERM: it drains) and waits
// for them; a node still running after bound is killed.
func (c *devCluster) stopAll(bound time.Duration) {
	c.stop(false)
	deadline := time.After(bound)
	for _, n := range c.nodes {
		select {
		case <-n.done:
		case <-deadline:
			c.log.Warn("dev node did not stop in time; killing it", "node", n.name, "pid", n.pid, "waited", bound)
			n.cmd.Process.Kill()
			<-n.done
		}
	}
}

// stillRunning says which nodes run on.
func (c *devCluster) stillRunning() string {
	var names []string
	for _, n := range c.nodes {
		if !n.ended() {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "no node is running (Ctrl-C to stop)"
	}
	return strings.Join(names, ", ") + " still running"
}

// ended says whether the node's process has ended.
func (n *devNode) ended() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// ending says how the node's process ended.
func (n *devNode) ending() string {
	st := n.cmd.ProcessState
	if st == nil {
		return "ended"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "was killed by " + unix.SignalName(ws.Signal())
	}
	if st.ExitCode() == 0 {
		return "drained and stopped (exit 0)"
	}
	return "exited with status " + strconv.Itoa(st.ExitCode())
}

// devNodeListeners opens n listeners for the nodes on 127.0.0.1: on the
// ports after main's when they are free (8081, 8082… for 8080), any free
// one otherwise.
func devNodeListeners(main net.Addr, n int) ([]net.Listener, error) {
	port := 0
	if a, ok := main.(*net.TCPAddr); ok && a.Port != 0 {
		port = a.Port
	}
	var lns []net.Listener
	for i := range n {
		var ln net.Listener
		var err error
		if port != 0 && port+i+1 <= 65535 {
			ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+i+1)))
		}
		if ln == nil || err != nil {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("listen for dev node %d: %w", i+1, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// lineWriter serialises writes to w, so that lines from several
// goroutines (dev's log, its nodes' logs) do not interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
