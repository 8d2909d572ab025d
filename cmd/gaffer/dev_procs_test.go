package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// devNodeProc is a dev node as dev's banner shows it.
type devNodeProc struct {
	name, addr string
	pid        int
}

var devNodeLine = regexp.MustCompile(`(?m)^\s+(dev-\d+)\s+pid (\d+)\s+http://(\S+)$`)

// nodesOf reads the nodes from dev's banner.
func nodesOf(t *testing.T, d *devProc) map[string]devNodeProc {
	t.Helper()
	nodes := map[string]devNodeProc{}
	for _, m := range devNodeLine.FindAllStringSubmatch(d.out.String(), -1) {
		pid, _ := strconv.Atoi(m[2])
		nodes[m[1]] = devNodeProc{name: m[1], pid: pid, addr: m[3]}
	}
	if len(nodes) == 0 {
		t.Fatalf("no nodes in dev's banner:\n%s", d.out.String())
	}
	return nodes
}

// devJob is a job as dev's API shows it.
type devJob struct {
	ID      int64
	State   string
	Node    string
	Attempt int
	Result  json.RawMessage
	Errors  []struct {
		Attempt int
		Kind    string
		Node    string
	}
}

// devGet GETs path from dev's API into out (when not nil) and returns the
// status.
func devGet(t *testing.T, base, token, path string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	return resp.StatusCode
}

// alive says whether process pid runs (a zombie, ended but not yet
// reaped by whoever adopted it, does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// kill -9 of one node of `gaffer dev --nodes 3` while it runs jobs: the
// API keeps answering at dev's address (the killed node was the one it
// proxied to), dev says which node was killed and how, and the other
// nodes rescue the node's jobs and complete them.
func TestDevKilledNodeIsRescued(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	token := "dev-token-for-the-kill-test"
	d := startDev(t, []string{"GAFFER_DEV_TOKEN=" + token}, "--nodes", "3", "--addr", addr,
		"--lease-ttl", "2s", "--session-ttl", "2s", "--queues", "default=2")
	base := "http://" + addr
	nodes := nodesOf(t, d)
	if len(nodes) != 3 {
		t.Fatalf("%d nodes in the banner, want 3:\n%s", len(nodes), d.out.String())
	}
	ids := map[int64]bool{}
	for range 6 {
		ids[devEnqueue(t, base, token, "demo.sleep", `{"ms": 3000}`)] = true
	}
	devRunning(t, base, token, 6) // two on each node
	var running struct{ Data []devJob }
	devGet(t, base, token, "/v1/jobs?state=running&limit=100", &running)
	held := map[int64]bool{}
	for _, j := range running.Data {
		if j.Node == "dev-1" {
			held[j.ID] = true
		}
	}
	if len(held) == 0 {
		t.Fatalf("dev-1 holds no job: %+v", running.Data)
	}
	victim := nodes["dev-1"]
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The API answers at once, from another node.
	if code := devGet(t, base, token, "/v1/jobs?limit=1", nil); code != 200 {
		t.Fatalf("the API right after dev-1 was killed: %d", code)
	}
	want := fmt.Sprintf("node dev-1 (pid %d) was killed by SIGKILL; dev-2, dev-3 still running", victim.pid)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(d.out.String(), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("dev did not say %q:\n%s", want, d.out.String())
		}
	}
	for id := range ids {
		var j devJob
		for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if code := devGet(t, base, token, fmt.Sprintf("/v1/jobs/%d", id), &j); code != 200 {
				t.Fatalf("job %d: %d", id, code)
			}
			if j.State == "completed" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d is %s 45s after dev-1 was killed: %+v", id, j.State, j)
			}
		}
		if held[id] && (j.Node == "dev-1" || j.Attempt != 2) {
			t.Errorf("job %d, held by the killed dev-1, completed on %s at attempt %d: want another node's second attempt", id, j.Node, j.Attempt)
		}
	}
	if code := devGet(t, base, token, "/readyz", nil); code != 200 {
		t.Errorf("/readyz with two of three nodes running: %d", code)
	}
	d.stop(t) // and its throwaway database goes
}

// kill -STOP of the node running a job, past its lease: another node
// rescues the job and completes it; the API keeps answering at dev's
// address meanwhile. Then kill -CONT: the paused node's attempt ends
// (its receiver answered while it was paused) and its outcome is refused
// (fenced): the job stays completed by the second attempt, and the
// receiver was called twice, not a third time.
func TestDevPausedNodeIsFenced(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var attempts []int
	first := make(chan struct{}, 1)
	release := make(chan struct{})
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("Gaffer-Attempt"))
		mu.Lock()
		attempts = append(attempts, n)
		mu.Unlock()
		if n == 1 {
			first <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		fmt.Fprintf(w, `{"attempt":%d}`, n)
	}))
	defer receiver.Close()
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })

	addr := freeAddr(t)
	token := "dev-token-for-the-pause-test"
	d := startDev(t, []string{"GAFFER_DEV_TOKEN=" + token}, "--nodes", "2", "--addr", addr,
		"--lease-ttl", "2s", "--session-ttl", "2s", "--log-level", "debug")
	base := "http://" + addr
	nodes := nodesOf(t, d)
	job := enqueueHTTP(t, base, token, "default", receiver.URL+"/slow")
	if job.status != 201 {
		t.Fatalf("enqueue: %+v", job)
	}
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the job's first attempt never called the receiver")
	}
	var j devJob
	devGet(t, base, token, fmt.Sprintf("/v1/jobs/%d", job.id), &j)
	paused, ok := nodes[j.Node]
	if !ok || j.State != "running" {
		t.Fatalf("job %d: %+v, want running on a dev node", job.id, j)
	}
	if err := syscall.Kill(paused.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(paused.pid, syscall.SIGCONT) })

	// Rescued and completed by the other node, the API answering all along.
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if code := devGet(t, base, token, fmt.Sprintf("/v1/jobs/%d", job.id), &j); code != 200 {
			t.Fatalf("job %d while %s is paused: %d", job.id, paused.name, code)
		}
		if j.State == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s 45s after %s was paused: %+v", job.id, j.State, paused.name, j)
		}
	}
	if j.Node == paused.name || j.Attempt != 2 {
		t.Fatalf("job %d completed on %s at attempt %d; want the other node's second attempt", job.id, j.Node, j.Attempt)
	}

	// The paused node's call gets its answer, then the node resumes: its
	// stale attempt's outcome is refused.
	releaseOnce.Do(func() { close(release) })
	if err := syscall.Kill(paused.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	fenced := regexp.MustCompile(`(refused: the attempt no longer owns the job|attempt ended after losing its lease; outcome discarded): node=` +
		regexp.QuoteMeta(paused.name) + ` job_id=` + strconv.FormatInt(job.id, 10) + ` attempt=1\b`)
	for deadline := time.Now().Add(30 * time.Second); !fenced.MatchString(d.logs.String()); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s resumed, and its stale attempt of job %d was not refused (no %q in the log)", paused.name, job.id, fenced)
		}
	}
	devGet(t, base, token, fmt.Sprintf("/v1/jobs/%d", job.id), &j)
	if j.State != "completed" || j.Node == paused.name || j.Attempt != 2 || !strings.Contains(string(j.Result), `"attempt":2`) {
		t.Fatalf("job %d after the paused node resumed: %+v %s", job.id, j, j.Result)
	}
	time.Sleep(time.Second)
	mu.Lock()
	if fmt.Sprint(attempts) != "[1 2]" {
		t.Errorf("the receiver was called for attempts %v, want [1 2]", attempts)
	}
	mu.Unlock()
	d.stop(t)
}

// kill -9 of dev itself leaves no node running, nor its PostgreSQL: the
// kernel ends the nodes (Pdeathsig), and they watch for it besides.
func TestDevKilledLeavesNoNodeBehind(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	d := startDev(t, []string{"GAFFER_DEV_TOKEN=dev-token-for-the-orphan-test"}, "--nodes", "2", "--addr", addr)
	var pids []int
	for _, n := range nodesOf(t, d) {
		pids = append(pids, n.pid)
	}
	dir := dataDirOf(t, d.logs.String())
	t.Cleanup(func() { os.RemoveAll(dir) }) // dev had no chance to
	if b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0]); err == nil {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %d is not running before dev was killed", pid)
		}
	}
	d.cmd.Process.Kill()
	<-d.done
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes %v still run 15s after dev was killed with SIGKILL (nodes and postgres: %v)", left, pids)
		}
	}
}

// dev reads a client's address as a node does before it proxies: a
// client's own X-Forwarded-For is not believed (its failed
// authentications are limited as one address however it varies the
// header), unless --trusted-proxies names the client as a proxy.
func TestDevForwardsTheClientAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		args    []string
		limited bool
	}{{"untrusted", nil, true}, {"trusted proxy", []string{"--trusted-proxies", "127.0.0.1"}, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr := freeAddr(t)
			d := startDev(t, []string{"GAFFER_DEV_TOKEN=dev-token-for-the-forwarded-test"}, append([]string{"--addr", addr}, c.args...)...)
			limited := 0
			for i := range 15 {
				req, _ := http.NewRequest("GET", "http://"+addr+"/v1/jobs", nil)
				req.Header.Set("Authorization", "Bearer gft_not-a-token-of-this-cluster-0123")
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.9.8.%d", i+1))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					limited++
				} else if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("request %d with a wrong token: %d", i+1, resp.StatusCode)
				}
			}
			if c.limited && limited == 0 {
				t.Fatal("15 failed authentications from one client, each with another X-Forwarded-For, were never limited: dev's nodes believed the client's header")
			}
			if !c.limited && limited > 0 {
				t.Fatalf("%d of 15 failed authentications from 15 addresses behind a trusted proxy were limited: the address did not reach the node", limited)
			}
			d.stop(t)
		})
	}
}

// Each dev node's own port is the cluster's, like dev's address: an http
// job may not call it (dev opens the rest of loopback).
func TestDevNodePortsStayRefused(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	token := "dev-token-for-the-node-ports-test"
	d := startDev(t, []string{"GAFFER_DEV_TOKEN=" + token}, "--nodes", "2", "--addr", addr)
	for _, n := range nodesOf(t, d) {
		port := n.addr[strings.LastIndex(n.addr, ":"):]
		for _, target := range []string{"http://" + n.addr + "/metrics", "http://localhost" + port + "/v1/jobs"} {
			if r := enqueueHTTP(t, "http://"+addr, token, "default", target); r.status != 400 || r.code != "destination_not_allowed" {
				t.Errorf("an http job at %s's %s: %+v, want 400 destination_not_allowed", n.name, target, r)
			}
		}
	}
	d.stop(t)
}
