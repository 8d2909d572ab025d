package cron

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// "@at" names one instant: absolute with an offset, or a wall-clock time
// in the entry's zone under the package's DST rule.
func TestParseAt(t *testing.T) {
	t.Parallel()
	cases := []struct{ spec, tz, want string }{
		{"@at 2027-01-01T09:00:00Z", "", "2027-01-01T09:00:00Z"},
		{"@at 2027-01-01T09:00:00+01:00", "America/New_York", "2027-01-01T08:00:00Z"}, // the offset wins over the zone
		{"@at 2027-01-01T09:00", "Europe/Berlin", "2027-01-01T08:00:00Z"},
		{"@at 2027-01-01T09:00:30", "UTC", "2027-01-01T09:00:30Z"},
		{"@at   2027-07-01T09:00  ", "Europe/Berlin", "2027-07-01T07:00:00Z"},
		// New York 2026-03-08: 02:30 does not exist; it fires at the
		// transition (03:00 EDT = 07:00Z).
		{"@at 2026-03-08T02:30", "America/New_York", "2026-03-08T07:00:00Z"},
		// New York 2026-11-01: 01:30 happens twice; the first (EDT, 05:30Z).
		{"@at 2026-11-01T01:30", "America/New_York", "2026-11-01T05:30:00Z"},
	}
	for _, c := range cases {
		s := mustParse(t, c.spec, c.tz)
		want := utc(c.want)
		if got := s.Next(want.Add(-time.Hour)); !got.Equal(want) {
			t.Errorf("%q in %q: Next = %s, want %s", c.spec, c.tz, got.UTC().Format(time.RFC3339), c.want)
		}
		// Once, and never again: nothing after the instant, nor at it.
		if got := s.Next(want); !got.IsZero() {
			t.Errorf("%q: Next(at) = %s, want none", c.spec, got)
		}
		if at, ok := oneShotAt(s); !ok || !at.Equal(want) {
			t.Errorf("%q: oneShotAt = %s %v", c.spec, at, ok)
		}
	}
	if _, ok := oneShotAt(mustParse(t, "@daily", "")); ok {
		t.Error("@daily reads as a one-shot")
	}
}

func TestParseAtErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ spec, tz, field, contains string }{
		{"@at", "", "schedule", "@at needs a time"},
		{"@at tomorrow", "", "schedule", "RFC 3339"},
		{"@at 2027-13-01T09:00:00Z", "", "schedule", "RFC 3339"},
		{"@at 2027-01-01", "", "schedule", "RFC 3339"},
		{"@at 2027-01-01T09:00:00.5Z", "", "schedule", "whole seconds"},
		{"@at 2027-01-01T09:00:00Z extra", "", "schedule", "RFC 3339"},
		{"@at 2027-01-01T09:00", "Mars/Olympus_Mons", "timezone", "not a known IANA time zone"},
	}
	for _, c := range cases {
		_, err := Parse(c.spec, c.tz)
		var se *ScheduleError
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(err.Error(), c.contains) {
			t.Errorf("Parse(%q, %q) = %v; want a %s error containing %q", c.spec, c.tz, err, c.field, c.contains)
		}
	}
}
