package cron

import (
	"errors"
	"strings"
	"testing"
	"time"

	robfig "github.com/robfig/cron/v3"
)

func mustParse(t *testing.T, spec, tz string) Schedule {
	t.Helper()
	s, err := Parse(spec, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, tz, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func fmtAll(ts []time.Time) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.UTC().Format(time.RFC3339))
	}
	return strings.Join(out, " ")
}

// The DST rule, on both transitions of two zones, for daily and hourly
// schedules. Expected instants are in UTC.
func TestDSTTransitions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, spec, tz, after string
		want                  []string
	}{
		// New York, spring forward 2026-03-08: 02:00 EST → 03:00 EDT (07:00Z).
		{"NY spring daily 02:30 fires at the transition", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"NY spring daily 01:30 unaffected", "30 1 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-09T05:30:00Z"}},
		{"NY spring daily 03:30 unaffected", "30 3 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:30:00Z", "2026-03-09T07:30:00Z"}},
		// Hourly: 02:00 is skipped and fires at the transition, which is also
		// 03:00 EDT: one fire at 07:00Z, 23 fires that day.
		{"NY spring hourly", "0 * * * *", "America/New_York", "2026-03-08T05:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		{"NY spring every 30 min", "*/30 * * * *", "America/New_York", "2026-03-08T06:10:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}},
		// New York, fall back 2026-11-01: 02:00 EDT → 01:00 EST (06:00Z).
		// 01:30 happens twice (05:30Z EDT, 06:30Z EST): it fires the first time.
		{"NY fall daily 01:30 fires once, the first time", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NY fall hourly skips the repeated hour", "0 * * * *", "America/New_York", "2026-11-01T03:30:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}},
		{"NY fall daily 02:30 unaffected", "30 2 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"}},
		// London, spring forward 2026-03-29: 01:00 GMT → 02:00 BST (01:00Z).
		{"London spring daily 01:30 fires at the transition", "30 1 * * *", "Europe/London", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"London spring hourly", "0 * * * *", "Europe/London", "2026-03-28T23:30:00Z",
			[]string{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
		// London, fall back 2026-10-25: 02:00 BST → 01:00 GMT (01:00Z).
		{"London fall daily 01:30 fires once, the first time", "30 1 * * *", "Europe/London", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"London fall hourly skips the repeated hour", "0 * * * *", "Europe/London", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"}},
		// A schedule created during the repeated hour does not fire for the
		// repeat of a time whose first occurrence already passed.
		{"NY created inside the repeated hour", "30 1 * * *", "America/New_York", "2026-11-01T06:15:00Z",
			[]string{"2026-11-02T06:30:00Z"}},
		// Seconds and descriptors.
		{"six fields", "15 30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:15Z"}},
		{"@daily in London", "@daily", "Europe/London", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T00:00:00Z", "2026-03-29T23:00:00Z"}},
		{"fixed offset", "0 9 * * *", "+05:30", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T03:30:00Z", "2026-01-02T03:30:00Z"}},
		{"@every ignores zones", "@every 90m", "America/New_York", "2026-03-08T06:00:00Z",
			[]string{"2026-03-08T07:30:00Z", "2026-03-08T09:00:00Z"}},
	}
	for _, c := range cases {
		s := mustParse(t, c.spec, c.tz)
		got := NextN(s, utc(c.after), len(c.want))
		if fmtAll(got) != strings.Join(c.want, " ") {
			t.Errorf("%s: %s %s after %s\n got  %s\n want %s", c.name, c.spec, c.tz, c.after, fmtAll(got), strings.Join(c.want, " "))
		}
	}
}

// A full year of an hourly schedule in New York: 365 × 24 wall-clock
// hours, of which the skipped 02:00 shares 03:00's instant (one fire), and
// the repeated 01:00 fires once: 8759 distinct, increasing fires.
func TestHourlyAcrossAYear(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "0 * * * *", "America/New_York")
	from := utc("2026-01-01T05:00:00Z") // local midnight
	to := utc("2027-01-01T05:00:00Z")
	n := 0
	for at := s.Next(from.Add(-time.Second)); at.Before(to); at = s.Next(at) {
		n++
	}
	if n != 8759 {
		t.Fatalf("%d hourly fires in 2026 New York, want 8759", n)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ spec, tz, field, contains string }{
		{"", "", "schedule", "required"},
		{"* * *", "", "schedule", "has 3 fields"},
		{"61 * * * *", "", "schedule", "61"},
		{"0 0 30 2 *", "", "schedule", "never fires"},
		{"0 0 31 4 *", "", "schedule", "never fires"},
		{"@fortnightly", "", "schedule", "fortnightly"},
		{"@every 500ms", "", "schedule", "whole seconds"},
		{"@every 0s", "", "schedule", "at least 1s"},
		{"@every soon", "", "schedule", "duration"},
		{"@every -5m", "", "schedule", "duration"},
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", "", "schedule", "timezone field"},
		{"0 9 * * *", "Mars/Olympus_Mons", "timezone", "not a known IANA time zone"},
		{"0 9 * * *", "+25:00", "timezone", "out of range"},
		{"0 9 * * *", "Local", "timezone", "each node"},
	}
	for _, c := range cases {
		_, err := Parse(c.spec, c.tz)
		var se *ScheduleError
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(err.Error(), c.contains) {
			t.Errorf("Parse(%q, %q) = %v; want a %s error containing %q", c.spec, c.tz, err, c.field, c.contains)
		}
	}
	// These are fine.
	for _, spec := range []string{"0 0 29 2 *", "@hourly", "@yearly", "*/5 * * * * *", "0 12 * * MON-FRI", "@every 1h30m"} {
		if _, err := Parse(spec, "Australia/Lord_Howe"); err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
		}
	}
}

var fuzzZones = []string{"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago", "Pacific/Chatham", "+05:45"}
var fuzzSpecs = []string{"* * * * *", "0 * * * *", "30 2 * * *", "30 1 * * *", "0 0 * * 0", "15,45 1-3 * * *", "*/7 * * * * *", "0 0 29 2 *", "@daily", "@every 17m", "0 30 2 * * *", "59 23 31 12 *", "0 2 8-14 3 0"}

// The next fire time always increases, wherever it starts.
func FuzzNextIncreases(f *testing.F) {
	f.Add(uint8(0), uint8(1), int64(1772953200)) // NY spring forward day
	f.Add(uint8(2), uint8(1), int64(1793509200)) // NY fall back day
	f.Add(uint8(3), uint8(3), int64(1775343600))
	f.Fuzz(func(t *testing.T, specIdx, zoneIdx uint8, unix int64) {
		spec := fuzzSpecs[int(specIdx)%len(fuzzSpecs)]
		tz := fuzzZones[int(zoneIdx)%len(fuzzZones)]
		start := time.Unix(unix%(4102444800)+946684800, 0).UTC() // 2000-2130
		s, err := Parse(spec, tz)
		if err != nil {
			t.Fatal(err)
		}
		prev := start
		for range 50 {
			next := s.Next(prev)
			if next.IsZero() && spec == "0 0 29 2 *" && prev.Year() >= 2095 {
				return // 2100 is not a leap year: nothing within the five-year horizon
			}
			if next.IsZero() {
				t.Fatalf("%s %s: no fire after %s", spec, tz, prev)
			}
			if !next.After(prev) {
				t.Fatalf("%s %s: Next(%s) = %s, not after", spec, tz, prev, next)
			}
			prev = next
		}
	})
}

// robfig/cron evaluated directly in the zone breaks the rule at both
// transitions; that is why Parse matches on civil time and places the
// match itself. If this test starts failing, robfig changed: look again.
func TestRobfigInZoneBreaksTheRule(t *testing.T) {
	t.Parallel()
	ny, _ := LoadLocation("America/New_York")
	native := func(spec, after string) string {
		s, _ := parser.Parse(spec)
		s.(*robfig.SpecSchedule).Location = ny
		at := utc(after)
		var got []time.Time
		for range 2 {
			at = s.Next(at)
			got = append(got, at)
		}
		return fmtAll(got)
	}
	// Spring forward: robfig skips 02:30 altogether; the rule fires it at 07:00Z.
	if got := native("30 2 * * *", "2026-03-07T12:00:00Z"); got != "2026-03-09T06:30:00Z 2026-03-10T06:30:00Z" {
		t.Errorf("robfig spring: %s", got)
	}
	// Fall back: robfig fires 01:30 twice; the rule fires it once.
	if got := native("30 1 * * *", "2026-10-31T12:00:00Z"); got != "2026-11-01T05:30:00Z 2026-11-01T06:30:00Z" {
		t.Errorf("robfig fall: %s", got)
	}
}
