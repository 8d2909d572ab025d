package ui

import (
	"fmt"
	"testing"
)

func TestNiceScale(t *testing.T) {
	for _, c := range []struct {
		max, top, step float64
		labels         string
	}{
		{0, 1, 0.2, "0/s 0.2/s 0.4/s 0.6/s 0.8/s 1/s"},
		{0.3, 0.3, 0.1, "0/s 0.1/s 0.2/s 0.3/s"},
		{38.4, 40, 10, "0/s 10/s 20/s 30/s 40/s"},
		{41, 50, 10, "0/s 10/s 20/s 30/s 40/s 50/s"},
		{9.7, 10, 2, "0/s 2/s 4/s 6/s 8/s 10/s"},
		{7, 8, 2, "0/s 2/s 4/s 6/s 8/s"},
		{40700, 50000, 10000, "0/s 10.0k/s 20.0k/s 30.0k/s 40.0k/s 50.0k/s"},
	} {
		top, step := niceScale(c.max)
		if fmt.Sprintf("%.4g %.4g", top, step) != fmt.Sprintf("%.4g %.4g", c.top, c.step) {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", c.max, top, step, c.top, c.step)
		}
		var labels string
		for i := 0; float64(i)*step <= top*1.0001; i++ {
			if i > 0 {
				labels += " "
			}
			labels += rate(float64(i) * step)
		}
		if labels != c.labels {
			t.Errorf("labels for %v: %q, want %q", c.max, labels, c.labels)
		}
	}
}
