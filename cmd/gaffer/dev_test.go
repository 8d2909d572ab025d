package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// devProc is a running `gaffer dev`.
type devProc struct {
	cmd       *exec.Cmd
	out, logs *lockedBuffer
	done      chan struct{}
}

// startDev runs `gaffer dev` with args and the environment env (on top of
// this process's, less DATABASE_URL unless env sets it) and waits for its
// banner.
func startDev(t *testing.T, env []string, args ...string) *devProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"dev"}, args...)...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DATABASE_URL=") })
	cmd.Env = append(append(cmd.Env, "GAFFER_E2E_MAIN=1"), env...)
	d := &devProc{cmd: cmd, out: &lockedBuffer{}, logs: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.out, d.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-d.done
		// The nodes are processes of their own: a race in one (go test
		// -race) shows only in the log dev copies.
		if strings.Contains(d.logs.String(), "WARNING: DATA RACE") {
			t.Error("a data race in gaffer dev or one of its nodes")
		}
		if t.Failed() {
			t.Logf("dev %v stdout:\n%s\nlog:\n%s", args, d.out.String(), d.logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(d.out.String(), "Press Ctrl-C to stop") {
		select {
		case <-d.done:
			t.Fatalf("gaffer dev %v exited (%v) before its banner", args, cmd.ProcessState)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("gaffer dev never printed its banner")
		}
	}
	return d
}

// stop interrupts dev as Ctrl-C does and waits for a clean exit.
func (d *devProc) stop(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		t.Fatal("gaffer dev did not stop within 60s of an interrupt")
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("gaffer dev exited %d after an interrupt", code)
	}
}

// gaffer dev --data DIR keeps the database across restarts — also as
// root (as in CI), where PostgreSQL runs as the postgres user and must
// pass through DIR, which it may do without reading it.
func TestDevDataDirKeepsTheDatabase(t *testing.T) {
	t.Parallel()
	work, err := os.MkdirTemp("", "gaffer-dev-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o755); err != nil { // a working directory
		t.Fatal(err)
	}
	dir := filepath.Join(work, "data")
	addr := freeAddr(t)
	token := "dev-token-for-the-data-dir-test"
	env := []string{"GAFFER_DEV_TOKEN=" + token}
	d := startDev(t, env, "--data", dir, "--addr", addr)
	if !strings.Contains(d.out.String(), "token:     "+token) {
		t.Fatalf("dev did not take its token from $GAFFER_DEV_TOKEN:\n%s", d.out.String())
	}
	job := enqueueHTTP(t, "http://"+addr, token, "later", "http://127.0.0.1:1/never-called") // no node works "later"
	if job.status != 201 {
		t.Fatalf("enqueue: %+v", job)
	}
	d.stop(t)

	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o007 != 0 || perm&0o060 != 0 {
		t.Errorf("%s has mode %#o: others, or the postgres group, may read or change it", dir, perm)
	}
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if strconv.Itoa(int(st.Gid)) != pg.Gid || fi.Mode().Perm()&0o010 == 0 {
			t.Errorf("%s: mode %#o group %d; the postgres group (%s) needs to pass through", dir, fi.Mode().Perm(), st.Gid, pg.Gid)
		}
	}

	// Again on the same data: the token and the job are still there.
	d = startDev(t, env, "--data", dir, "--addr", addr)
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/v1/jobs/%d", addr, job.id), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"queue":"later"`) {
		t.Fatalf("job %d after a restart on the same --data: %d %s", job.id, resp.StatusCode, body)
	}
	d.stop(t)
}

// Draining a node of `gaffer dev --nodes 2` leaves the API, the
// dashboard, /readyz and /metrics to the node still running: before, the
// drained node's closed pool answered every request "the database is
// unreachable", /readyz stayed 503 on it, and /metrics had dev-1's series
// only.
func TestDevDrainedNodeLeavesTheAPIToTheOthers(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	token := "dev-token-for-the-drain-test"
	d := startDev(t, []string{"GAFFER_DEV_TOKEN=" + token}, "--nodes", "2", "--addr", addr)
	base := "http://" + addr
	call := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := call("POST", "/v1/nodes/dev-1/drain"); code != 200 {
		t.Fatalf("drain dev-1: %d %s", code, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.logs.String(), "node stopped: node=dev-1") {
		if time.Now().After(deadline) {
			t.Fatal("dev-1 did not stop within 30s of its drain")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := call("GET", "/v1/jobs?limit=1"); code != 200 {
		t.Fatalf("the API after dev-1 drained: %d %s", code, body)
	}
	if code, body := call("GET", "/readyz"); code != 200 {
		t.Fatalf("/readyz after dev-1 drained: %d %s", code, body)
	}
	job := enqueueHTTP(t, base, token, "later", "http://127.0.0.1:1/never-called")
	if job.status != 201 {
		t.Fatalf("enqueue after dev-1 drained: %+v", job)
	}
	code, body := call("GET", "/metrics")
	if code != 200 || !strings.Contains(body, `node="dev-2"`) || !strings.Contains(body, `node="dev-1"`) {
		t.Fatalf("/metrics: %d, want every dev node's series (node=\"dev-1\", node=\"dev-2\"):\n%.2000s", code, body)
	}
	d.stop(t)
}

// devEnqueue posts a job of kind with args through dev's API and returns
// its id.
func devEnqueue(t *testing.T, base, token, kind, args string) int64 {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/jobs", strings.NewReader(fmt.Sprintf(`{"kind":%q,"args":%s}`, kind, args)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Job struct{ ID int64 } }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 201 {
		t.Fatalf("enqueue %s: %d %v", kind, resp.StatusCode, err)
	}
	return out.Job.ID
}

// devRunning waits until n jobs are running.
func devRunning(t *testing.T, base, token string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest("GET", base+"/v1/jobs?state=running&limit=100", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Data []struct{ ID int64 }
		}
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if len(out.Data) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs running after 30s, want %d", len(out.Data), n)
		}
	}
}

// Ctrl-C on a throwaway database stops every node at once, running jobs
// given back, and removes the database: before, it waited out each busy
// node's drain in turn (30.7 s for two), for a database deleted next.
func TestDevStopsAtOnceOnAThrowawayDatabase(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	token := "dev-token-for-the-throwaway-stop-test"
	d := startDev(t, []string{"GAFFER_DEV_TOKEN=" + token}, "--nodes", "2", "--addr", addr)
	base := "http://" + addr
	for range 4 {
		devEnqueue(t, base, token, "demo.sleep", `{"ms": 120000}`)
	}
	devRunning(t, base, token, 4)
	dir := dataDirOf(t, d.logs.String())
	start := time.Now()
	d.stop(t)
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("dev took %s to stop with jobs running on a throwaway database", took.Round(time.Millisecond))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the throwaway database %s is still there after dev stopped (%v)", dir, err)
	}
}

// dataDirOf reads the throwaway PostgreSQL's directory from dev's log.
func dataDirOf(t *testing.T, logs string) string {
	t.Helper()
	_, after, ok := strings.Cut(logs, "postgres started:")
	if !ok {
		t.Fatalf("no \"postgres started\" line in dev's log:\n%s", logs)
	}
	_, after, ok = strings.Cut(after, " data=")
	if !ok {
		t.Fatalf("no data= on dev's \"postgres started\" line:\n%s", logs)
	}
	return strings.Fields(after)[0]
}

// With a kept database, Ctrl-C lets running jobs finish for the drain
// timeout and says so; a second Ctrl-C stops at once, giving them back.
// Before, the second was swallowed.
func TestDevSecondInterruptStopsAtOnce(t *testing.T) {
	t.Parallel()
	work, err := os.MkdirTemp("", "gaffer-dev-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	token := "dev-token-for-the-second-interrupt"
	d := startDev(t, []string{"GAFFER_DEV_TOKEN=" + token}, "--data", filepath.Join(work, "data"), "--addr", addr, "--drain-timeout", "10m")
	base := "http://" + addr
	id := devEnqueue(t, base, token, "demo.sleep", `{"ms": 600000}`)
	devRunning(t, base, token, 1)
	d.cmd.Process.Signal(os.Interrupt)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(d.out.String(), "Ctrl-C again to stop at once"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("dev did not say a second Ctrl-C stops at once:\n%s", d.out.String())
		}
	}
	select {
	case <-d.done:
		t.Fatal("dev exited before its running job finished or a second Ctrl-C")
	case <-time.After(time.Second):
	}
	start := time.Now()
	d.stop(t) // the second Ctrl-C
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("dev took %s to stop after a second Ctrl-C", took.Round(time.Millisecond))
	}
	// The job was given back, its attempt kept: pending again in the
	// kept database.
	d = startDev(t, []string{"GAFFER_DEV_TOKEN=" + token}, "--data", filepath.Join(work, "data"), "--addr", addr, "--queues", "other=1")
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/jobs/%d", base, id), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		State   string
		Attempt int
	}
	json.NewDecoder(resp.Body).Decode(&j)
	resp.Body.Close()
	if j.State != "pending" && j.State != "retrying" {
		t.Fatalf("the job a second Ctrl-C stopped is %s (attempt %d), want given back (pending)", j.State, j.Attempt)
	}
	d.stop(t)
}

// `gaffer dev 2>&1 | tee log`, then Ctrl-C: the terminal's Ctrl-C ends
// tee too, and dev's next write goes to a broken pipe. It must fail that
// write, not die of SIGPIPE before removing its throwaway database.
func TestDevSurvivesABrokenPipe(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	cmd := exec.Command(os.Args[0], "dev", "--addr", addr)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DATABASE_URL=") })
	cmd.Env = append(cmd.Env, "GAFFER_E2E_MAIN=1")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	var seen strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), "Press Ctrl-C to stop") {
		n, err := pr.Read(buf)
		if err != nil {
			t.Fatalf("dev's output ended before its banner: %v\n%s", err, seen.String())
		}
		seen.Write(buf[:n])
	}
	dir := dataDirOf(t, seen.String())
	pr.Close() // tee is gone
	cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop within 60s of an interrupt")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("dev died of %s", ws.Signal())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the throwaway database %s is still there after dev stopped (%v)", dir, err)
	}
}

// Without --token, a kept database's dev token is the same on every run
// (kept owner-only in the data directory): before, each restart on the
// same --data minted another admin token, never revoked.
func TestDevKeepsOneTokenForItsData(t *testing.T) {
	t.Parallel()
	work, err := os.MkdirTemp("", "gaffer-dev-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "data")
	addr := freeAddr(t)
	env := []string{"GAFFER_DEV_TOKEN="} // none given
	tokenOf := func(d *devProc) string {
		for _, line := range strings.Split(d.out.String(), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "token:"); ok {
				return strings.TrimSpace(rest)
			}
		}
		t.Fatalf("no token in the banner:\n%s", d.out.String())
		return ""
	}
	d := startDev(t, env, "--data", dir, "--addr", addr)
	first := tokenOf(d)
	d.stop(t)
	fi, err := os.Stat(filepath.Join(dir, "dev-token"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the kept token's file: %v, %v; want mode 0600", fi, err)
	}
	d = startDev(t, env, "--data", dir, "--addr", addr)
	if again := tokenOf(d); again != first {
		t.Fatalf("a restart on the same --data printed another token: %q, then %q", first, again)
	}
	if job := enqueueHTTP(t, "http://"+addr, first, "later", "http://127.0.0.1:1/never-called"); job.status != 201 {
		t.Fatalf("the kept token does not work: %+v", job)
	}
	d.stop(t)
}

// A busy address is said at once, before etcd and PostgreSQL start and the
// migrations run (before, after all of them).
func TestDevSaysABusyPortFirst(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cmd := exec.Command(os.Args[0], "dev", "--addr", busy.Addr().String())
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DATABASE_URL=") })
	cmd.Env = append(cmd.Env, "GAFFER_E2E_MAIN=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err == nil || !strings.Contains(string(out), "listen on "+busy.Addr().String()) {
		t.Fatalf("gaffer dev on a busy address: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "started") || strings.Contains(string(out), "migrations") {
		t.Fatalf("gaffer dev started something before it found its address busy (%s):\n%s", took, out)
	}
}
