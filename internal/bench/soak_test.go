package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"testing"
	"time"
)

func TestEnqueuedAtReadsTheSoakArgs(t *testing.T) {
	at := time.Unix(0, 1763870000123456789)
	for _, args := range []string{`{"t":1763870000123456789}`, `{"t": 1763870000123456789}`} {
		got, ok := enqueuedAt([]byte(args))
		if !ok || !got.Equal(at) {
			t.Errorf("enqueuedAt(%s) = %v, %v; want %v", args, got, ok, at)
		}
	}
	if _, ok := enqueuedAt([]byte(`{}`)); ok {
		t.Error("enqueuedAt({}) read a time")
	}
}

func TestSoakSummaryComparesFirstAndLastFiveMinutes(t *testing.T) {
	s := &soakResult{}
	for m := 1; m <= 30; m++ {
		x := soakSample{Minute: float64(m), JobsPerSec: 1000, P99: 10, TableMB: 100, IndexMB: 20}
		if m > 25 {
			x.JobsPerSec, x.P99 = 850, 12
		}
		if m <= 6 { // growing until the first sweep after the retention period
			x.TableMB = float64(m) * 15
		}
		s.Samples = append(s.Samples, x)
	}
	s.summarize(5 * time.Minute)
	if s.First.Minutes != 5 || s.First.JobsPerSec != 1000 || s.Last.JobsPerSec != 850 || s.Last.P99 != 12 {
		t.Fatalf("windows: first %+v last %+v", s.First, s.Last)
	}
	if s.Settled == nil || s.Settled.FromMinute != 7 || s.Settled.MinMB != 120 || s.Settled.MaxMB != 120 {
		t.Fatalf("sizes after retention: %+v", s.Settled)
	}
	misses := soakVerdict(s, 0.10)
	if len(misses) != 2 {
		t.Fatalf("verdict %q: want the throughput drop and the p99 rise", misses)
	}
}

func TestSoakSVGIsWellFormed(t *testing.T) {
	s := &soakResult{Rate: 1000, Retention: "5m0s"}
	for m := 1; m <= 10; m++ {
		s.Samples = append(s.Samples, soakSample{Minute: float64(m), JobsPerSec: 1000, EnqueuedPerSec: 1000, P50: 2, P99: 9, TableMB: 50, IndexMB: 10})
	}
	var buf bytes.Buffer
	if err := writeSoakSVG(&buf, s, 6); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&buf)
	lines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if e, ok := tok.(xml.StartElement); ok && e.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 7 {
		t.Errorf("%d series drawn, want 7", lines)
	}
}
