package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/workclient"
)

// runRemoteWorker is a remote worker process for the end-to-end tests:
// the test binary re-executed with GAFFER_E2E_REMOTE_WORKER set. It talks
// to a node only over HTTP, as a worker in another language would:
// registers (printing "WORKER <id>"), long-polls for up to W_MAX jobs at
// once, heartbeats the ones it runs, and for each job sleeps args.ms
// (with W_HOLD, until it is killed or loses the lease), reporting 50%
// progress half way, then completes it with {"worker": id}. On a claim
// that says draining it stops claiming, finishes what it runs and exits
// ("DRAINED"); on SIGTERM it does the same and leaves.
func runRemoteWorker() int {
	c := &workclient.Client{URL: os.Getenv("GAFFER_URL"), Token: os.Getenv("GAFFER_TOKEN")}
	ctx := context.Background()
	most, _ := strconv.Atoi(os.Getenv("W_MAX"))
	if most < 1 {
		most = 1
	}
	var kinds []string
	if k := os.Getenv("W_KINDS"); k != "" {
		kinds = strings.Split(k, ",")
	}
	w, err := c.Register(ctx, workclient.Registration{Name: os.Getenv("W_NAME"), Queues: strings.Split(os.Getenv("W_QUEUES"), ","), Kinds: kinds})
	if err != nil {
		fmt.Fprintln(os.Stderr, "register:", err)
		return 1
	}
	fmt.Printf("WORKER %s\n", w.ID)
	hold := os.Getenv("W_HOLD") != ""

	var mu sync.Mutex
	running := map[int64]workclient.Lease{}
	lost := map[int64]chan struct{}{}
	var wg sync.WaitGroup
	// Heartbeats: every running lease, one call per interval. A lease
	// refused ends that job's work at once.
	go func() {
		for range time.Tick(w.HeartbeatInterval()) {
			mu.Lock()
			var leases []workclient.Lease
			for _, l := range running {
				leases = append(leases, l)
			}
			mu.Unlock()
			if len(leases) == 0 {
				continue
			}
			outs, err := c.Heartbeat(ctx, w.ID, leases)
			if err != nil {
				fmt.Fprintln(os.Stderr, "heartbeat:", err)
				continue
			}
			for _, o := range outs {
				if o.Status != "ok" {
					mu.Lock()
					if ch := lost[o.ID]; ch != nil {
						close(ch)
						delete(lost, o.ID)
					}
					mu.Unlock()
				}
			}
		}
	}()
	work := func(j workclient.Job) {
		defer wg.Done()
		defer func() {
			mu.Lock()
			delete(running, j.ID)
			delete(lost, j.ID)
			mu.Unlock()
		}()
		mu.Lock()
		gone := lost[j.ID]
		mu.Unlock()
		var a struct {
			MS int `json:"ms"`
		}
		json.Unmarshal(j.Args, &a)
		wait := time.Duration(a.MS) * time.Millisecond
		if hold {
			wait = time.Hour
		}
		select {
		case <-time.After(wait / 2):
		case <-gone:
			fmt.Printf("LOST %d\n", j.ID)
			return
		}
		if err := c.Progress(ctx, j.Lease, 50, "half way"); err != nil {
			fmt.Printf("PROGRESS %d %v\n", j.ID, err)
		}
		select {
		case <-time.After(wait - wait/2):
		case <-gone:
			fmt.Printf("LOST %d\n", j.ID)
			return
		}
		err := c.CompleteOne(ctx, j.Lease, json.RawMessage(fmt.Sprintf(`{"worker":%q}`, w.ID)))
		fmt.Printf("DONE %d %v\n", j.ID, err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	for {
		select {
		case <-stop:
			wg.Wait()
			n, err := c.Leave(ctx, w.ID)
			fmt.Printf("LEFT %d %v\n", n, err)
			return 0
		default:
		}
		mu.Lock()
		free := most - len(running)
		mu.Unlock()
		if free <= 0 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		res, err := c.Claim(ctx, w.ID, free, 2*time.Second)
		if p, ok := err.(*workclient.Problem); ok && p.Code == "worker_gone" {
			wg.Wait()
			fmt.Println("GONE")
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "claim:", err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for _, j := range res.Jobs {
			mu.Lock()
			running[j.ID] = j.Lease
			lost[j.ID] = make(chan struct{})
			mu.Unlock()
			fmt.Printf("CLAIMED %d %d\n", j.ID, j.Attempt)
			wg.Add(1)
			go work(j)
		}
		if res.Draining {
			wg.Wait()
			fmt.Println("DRAINED")
			return 0
		}
	}
}

// remoteWorker is a running remote worker process.
type remoteWorker struct {
	id     string
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	lines  []string
}

// startRemoteWorker runs a remote worker process against url with token
// and the W_* settings given, and waits until it has registered.
func startRemoteWorker(t *testing.T, url, token string, env ...string) *remoteWorker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GAFFER_E2E_REMOTE_WORKER=1", "GAFFER_URL="+url, "GAFFER_TOKEN="+token)
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{mu: &sync.Mutex{}, w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &remoteWorker{cmd: cmd, exited: make(chan struct{})}
	// Wait closes the stdout pipe once the process has exited, dropping
	// lines not read yet: it waits for the reader below to reach the end.
	read := make(chan struct{})
	go func() { <-read; cmd.Wait(); close(w.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-w.exited
		if t.Failed() {
			w.mu.Lock()
			t.Logf("remote worker %s:\n%s\n%s", w.id, strings.Join(w.lines, "\n"), stderr.String())
			w.mu.Unlock()
		}
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			w.mu.Lock()
			w.lines = append(w.lines, line)
			w.mu.Unlock()
			if id, ok := strings.CutPrefix(line, "WORKER "); ok {
				ready <- id
			}
		}
		io.Copy(io.Discard, stdout)
		close(read)
	}()
	select {
	case w.id = <-ready:
	case <-w.exited:
		t.Fatalf("remote worker exited before registering: %s", stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("remote worker did not register")
	}
	return w
}

// saw reports whether the worker printed a line starting with prefix.
func (w *remoteWorker) saw(prefix string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
