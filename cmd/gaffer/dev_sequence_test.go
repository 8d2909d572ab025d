package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// seqJob is a job of a sequence as dev's API shows it.
type seqJob struct {
	ID          int64
	State       string
	Node        string
	Attempt     int
	AttemptedAt *time.Time `json:"attempted_at"`
	FinalizedAt *time.Time `json:"finalized_at"`
}

func devEnqueueInto(t *testing.T, base, token, sequence string, ms int) int64 {
	t.Helper()
	body := fmt.Sprintf(`{"kind":"demo.sleep","args":{"ms":%d},"sequence":{"key":%q}}`, ms, sequence)
	req, _ := http.NewRequest("POST", base+"/v1/jobs", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Job struct{ ID int64 } }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 201 {
		t.Fatalf("enqueue into %s: %d %v", sequence, resp.StatusCode, err)
	}
	return out.Job.ID
}

// followSequence waits until the sequence's jobs (ids, in enqueue order)
// all completed, checking all along that a job is held while the one
// before it has not ended, and at the end that each started only after
// the one before it finished.
func followSequence(t *testing.T, base, token string, ids []int64, within time.Duration) []seqJob {
	t.Helper()
	jobs := make([]seqJob, len(ids))
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		// Read from the last job to the first: a job seen not held was
		// given its turn after the one before it ended, so the later
		// read of that one sees it ended.
		for i := len(ids) - 1; i >= 0; i-- {
			if code := devGet(t, base, token, fmt.Sprintf("/v1/jobs/%d", ids[i]), &jobs[i]); code != 200 {
				t.Fatalf("job %d: %d", ids[i], code)
			}
		}
		for i := 1; i < len(jobs); i++ {
			if jobs[i].State != "held" && jobs[i-1].State != "completed" && jobs[i-1].State != "failed" && jobs[i-1].State != "cancelled" {
				t.Fatalf("job %d is %s while job %d before it in the sequence is %s", jobs[i].ID, jobs[i].State, jobs[i-1].ID, jobs[i-1].State)
			}
		}
		if jobs[len(jobs)-1].State == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sequence did not finish in %s: %+v", within, jobs)
		}
	}
	for i := 1; i < len(jobs); i++ {
		if jobs[i].AttemptedAt.Before(*jobs[i-1].FinalizedAt) {
			t.Errorf("job %d started at %s, before job %d before it finished at %s", jobs[i].ID, jobs[i].AttemptedAt, jobs[i-1].ID, jobs[i-1].FinalizedAt)
		}
	}
	return jobs
}

// A sequence's running job whose node is killed (kill -9) or paused
// (kill -STOP past its lease, then -CONT) keeps the sequence's turn: the
// next job stays held until the job is rescued and run again on another
// node, the paused node's late completion changes nothing, and the rest
// run in order after it. Real node processes, real PostgreSQL and etcd.
func TestDevSequenceSurvivesKilledAndPausedNodes(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	token := "dev-token-for-the-sequence-test"
	d := startDev(t, []string{"GAFFER_DEV_TOKEN=" + token}, "--nodes", "3", "--addr", addr,
		"--lease-ttl", "2s", "--session-ttl", "2s", "--queues", "default=2")
	base := "http://" + addr
	nodes := nodesOf(t, d)

	runningOn := func(id int64) string {
		var j seqJob
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			devGet(t, base, token, fmt.Sprintf("/v1/jobs/%d", id), &j)
			if j.State == "running" {
				return j.Node
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d never ran: %+v", id, j)
			}
		}
	}

	// Killed.
	k := []int64{devEnqueueInto(t, base, token, "k", 3000), devEnqueueInto(t, base, token, "k", 50), devEnqueueInto(t, base, token, "k", 50)}
	victim := runningOn(k[0])
	if err := syscall.Kill(nodes[victim].pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := followSequence(t, base, token, k, 60*time.Second)
	if got[0].Attempt != 2 || got[0].Node == victim {
		t.Errorf("the killed node's job completed on %s at attempt %d; want another node's second attempt", got[0].Node, got[0].Attempt)
	}

	// Paused past its lease, then woken.
	p := []int64{devEnqueueInto(t, base, token, "p", 3000), devEnqueueInto(t, base, token, "p", 50), devEnqueueInto(t, base, token, "p", 50)}
	sleeper := runningOn(p[0])
	if sleeper == victim {
		t.Fatalf("job %d runs on %s, which was killed", p[0], sleeper)
	}
	if err := syscall.Kill(nodes[sleeper].pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	woken := false
	wake := func() {
		if !woken {
			woken = true
			syscall.Kill(nodes[sleeper].pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(wake)
	// Woken once the job runs again elsewhere: its late result must not
	// count.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var j seqJob
		devGet(t, base, token, fmt.Sprintf("/v1/jobs/%d", p[0]), &j)
		if j.Attempt >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the paused node's job was not run again: %+v", j)
		}
	}
	wake()
	got = followSequence(t, base, token, p, 60*time.Second)
	if got[0].Attempt != 2 || got[0].Node == sleeper {
		t.Errorf("the paused node's job completed on %s at attempt %d; want another node's second attempt", got[0].Node, got[0].Attempt)
	}
}
