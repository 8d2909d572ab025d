package chaos

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/testnode"
)

func TestMain(m *testing.M) {
	testnode.Main()
	os.Exit(m.Run())
}

func seed(t *testing.T) int64 {
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
		return n
	}
	return time.Now().UnixNano() % 1_000_000
}

func summarize(t *testing.T, r Report) {
	rec := append([]float64(nil), r.Recovery...)
	sort.Float64s(rec)
	pct := func(p float64) float64 {
		if len(rec) == 0 {
			return 0
		}
		return rec[min(len(rec)-1, int(p*float64(len(rec))))]
	}
	t.Logf("profile %s seed %d: %d jobs accepted, %d completed, %d failed into the DLQ, %d replays, %d cron occurrences, %d workflow runs (%d steps)",
		r.Profile, r.Seed, r.Jobs, r.Completed, r.Failed, r.Replays, r.CronOccurrences, r.Workflows, r.WorkflowSteps)
	t.Logf("faults %v; %d handler executions, %d external-effect duplicates (%.2f%%); %d stale writes refused",
		r.Faults, r.Executions, r.ExternalDuplicates, 100*float64(r.ExternalDuplicates)/float64(max(r.Executions, 1)), r.StaleRefused)
	t.Logf("recovery from a node kill to its jobs released: p50 %.2fs p99 %.2fs (%d kills with running jobs)", pct(0.5), pct(0.99), len(rec))
	t.Logf("scripted workflow runs %v: %d step replays (%d while a dependent waited), %d step jobs cancelled, %d cancelled steps resumed, %d step inputs checked",
		r.ScriptedRuns, r.StepReplays, r.ReplaysBeforeDependent, r.StepCancels, r.CancelledStepsResumed, r.InputsChecked)
	t.Logf("batches: %d opened, each checked for exactly one callback after its jobs", r.Batches)
	t.Logf("SIGTERM: %d of %d landed on a claim in flight, %d jobs claimed while stopping given back; node killed with etcd down: its jobs ran again after %v s",
		r.SigtermsAimed, r.Faults[FaultSigterm], r.ClaimsReleased, r.EtcdOutageRerun)
	t.Logf("limit %s (%d per key): %d limited claims audited, %d at the limit; most running at once per key %v; %d changes of limit %s meanwhile",
		limitName, keyLimit, r.LimitClaims, r.LimitFull, r.LimitPeak, r.LimitChanges, churnLimit)
	t.Logf("sequences: %d attempts of %d sequences' jobs audited", r.SequenceStarts, sequenceKeys)
	if out := os.Getenv("CHAOS_REPORT"); out != "" {
		b, _ := json.MarshalIndent(r, "", "  ")
		os.WriteFile(out, b, 0o644)
	}
}

// TestChaos runs the profile named by CHAOS_PROFILE (default "ci") and
// requires zero violations.
func TestChaos(t *testing.T) {
	if raceEnabled {
		t.Skip("the chaos suite runs without the race detector (CI runs it in the plain pass); its processes would be too slow")
	}
	name := os.Getenv("CHAOS_PROFILE")
	if name == "" {
		name = "ci"
	}
	p, ok := Profiles[name]
	if !ok || name == "mutation" || name == "limits-mutation" {
		t.Fatalf("unknown CHAOS_PROFILE %q", name)
	}
	if d := os.Getenv("CHAOS_DURATION"); d != "" {
		var err error
		if p.Duration, err = time.ParseDuration(d); err != nil {
			t.Fatalf("CHAOS_DURATION: %v", err)
		}
	}
	// CHAOS_MUTATION=no-limit-check runs the profile with the claim's
	// limit check removed: the run must then fail (docs/reliability.md).
	r := Run(t, Options{Profile: p, Seed: seed(t), NoLimitCheck: os.Getenv("CHAOS_MUTATION") == "no-limit-check"})
	summarize(t, r)
	for _, v := range r.Violations {
		t.Errorf("violation: %s", v)
	}
	if r.Jobs == 0 || r.Completed == 0 || r.Failed == 0 || r.CronOccurrences == 0 || r.Workflows == 0 || r.Batches == 0 {
		t.Fatalf("the load did not happen: %+v", r)
	}
}

// TestChaosFindsBrokenLeases builds the nodes without the lease
// compare-and-set and requires the suite to catch it.
func TestChaosFindsBrokenLeases(t *testing.T) {
	if raceEnabled {
		t.Skip("see TestChaos")
	}
	if testing.Short() {
		t.Skip("builds a mutated binary")
	}
	bin := filepath.Join(t.TempDir(), "chaos-mutant.test")
	build := exec.Command("go", "test", "-c", "-tags", "gaffer_mutation_nolease", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the mutant: %v\n%s", err, out)
	}
	testnode.Binary = bin
	defer func() { testnode.Binary = os.Args[0] }()
	r := Run(t, Options{Profile: Profiles["mutation"], Seed: seed(t)})
	summarize(t, r)
	if len(r.Violations) == 0 {
		t.Fatal("with the lease check removed the suite found no violation: it cannot tell a broken cluster from a sound one")
	}
	for _, v := range r.Violations {
		t.Logf("found (as it should): %s", v)
	}
}

// TestChaosFindsBrokenLimits removes the limit check from the claim
// (gaffer.limit_admit admits every candidate) and requires the limit
// invariant to catch it: the suite can tell a limit that holds from one
// that does not.
func TestChaosFindsBrokenLimits(t *testing.T) {
	if raceEnabled {
		t.Skip("see TestChaos")
	}
	if testing.Short() {
		t.Skip("a second cluster run")
	}
	r := Run(t, Options{Profile: Profiles["limits-mutation"], Seed: seed(t), NoLimitCheck: true})
	summarize(t, r)
	found := false
	for _, v := range r.Violations {
		t.Logf("found: %s", v)
		found = found || strings.HasPrefix(v, "limit "+limitName+": key")
	}
	if !found {
		t.Fatal("with the limit check removed the limit invariant found no key over its limit: it cannot fail")
	}
}
