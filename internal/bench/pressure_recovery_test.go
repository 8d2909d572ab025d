package bench

import (
	"testing"
	"time"
)

// The recovery after a release ends with the first interval from which on
// every p99 is within the clean level; a late spike puts it back.
func TestRecoveryIsTheFirstIntervalBackForGood(t *testing.T) {
	p99s := func(ms ...float64) []soakSample {
		var ss []soakSample
		for _, m := range ms {
			ss = append(ss, soakSample{P99: m})
		}
		return ss
	}
	for _, c := range []struct {
		after []float64
		want  float64 // seconds; -1: not back
	}{
		{[]float64{9, 8, 10}, 10},
		{[]float64{80, 30, 9, 8}, 30},
		{[]float64{80, 9, 30, 8, 7}, 40},
		{[]float64{80, 9, 8, 30}, -1},
	} {
		got := recovery(p99s(c.after...), 10, 10*time.Second)
		if (got == nil) != (c.want < 0) || (got != nil && *got != c.want) {
			t.Errorf("recovery(%v) = %v, want %v", c.after, got, c.want)
		}
	}
}
