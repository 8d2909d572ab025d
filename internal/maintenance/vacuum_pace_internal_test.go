package maintenance

import (
	"testing"
	"time"
)

// A vacuum that took d is followed by the next no sooner than 2d after
// its end, so that vacuums take at most a third of the vacuumer's time,
// and only once the threshold's worth more rows have died than it left.
func TestVacuumPaceRestsTwiceAsLongAsTheLastVacuumTook(t *testing.T) {
	p := vacuumPace{threshold: 1000}
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	if p.worthReading(t0, 999) {
		t.Fatal("due below the threshold")
	}
	if !p.worthReading(t0, 1000) || !p.moved(1) {
		t.Fatal("the first vacuum is not due at the threshold")
	}
	p.vacuumed(t0, t0.Add(2*time.Second), 1, 300)
	end := t0.Add(2 * time.Second)
	for _, c := range []struct {
		after time.Duration
		dead  int64
		want  bool
	}{
		{time.Second, 5000, false}, // resting
		{3999 * time.Millisecond, 5000, false},
		{4 * time.Second, 1299, false}, // rested, but 999 more than it left
		{4 * time.Second, 1300, true},  // rested, and the threshold's worth more
		{time.Hour, 1299, false},       // however long it waits
	} {
		if got := p.worthReading(end.Add(c.after), c.dead); got != c.want {
			t.Errorf("%s after, %d dead: due %v, want %v", c.after, c.dead, got, c.want)
		}
	}
	if p.moved(1) || p.moved(0) || !p.moved(2) {
		t.Error("moved: only a later horizon counts")
	}
	// Autovacuum ran meanwhile: the count fell below what this one left,
	// and the threshold counts from there.
	if p.worthReading(end.Add(time.Hour), 100) || p.worthReading(end.Add(time.Hour), 1099) || !p.worthReading(end.Add(time.Hour), 1100) {
		t.Error("the residual does not follow another vacuum down")
	}
}

// A vacuum that ran for minutes (it started as a long transaction took
// its snapshot, and ran until that ended) is followed by the next after
// maxVacuumRest, not after twice its time. Red without the bound: the
// next vacuum waits 5 minutes.
func TestVacuumPaceRestsAtMostMaxVacuumRest(t *testing.T) {
	p := vacuumPace{threshold: 1000}
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	end := t0.Add(149 * time.Second)
	p.vacuumed(t0, end, 10, 2_000_000)
	if p.worthReading(end.Add(maxVacuumRest-time.Millisecond), 2_100_000) || !p.worthReading(end.Add(maxVacuumRest), 2_100_000) {
		t.Errorf("after a 149 s vacuum the next is not due %s later", maxVacuumRest)
	}
}
