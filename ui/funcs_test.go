package ui

import (
	"testing"
	"time"
)

// A cron entry's times are shown on its own zone's wall clock: an IANA
// zone from the binary's rules, or a fixed offset (which time.LoadLocation
// does not know, so the page used to show such an entry's times in UTC).
func TestInZone(t *testing.T) {
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	for tz, want := range map[string]string{
		"America/New_York": "2026-07-01 08:00:00 EDT",
		"+05:30":           "2026-07-01 17:30:00 +05:30",
		"":                 "2026-07-01 12:00:00 UTC",
		"Mars/Olympus":     "2026-07-01 12:00:00 UTC",
	} {
		if got := inZone(at, tz); got != want {
			t.Errorf("inZone(%s, %q) = %q, want %q", at, tz, got, want)
		}
	}
}

// Durations for people, at every unit's edge: a zero in the last place is
// kept (3m50s read "3m5" when a trailing "0s" was cut from every string).
func TestDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:                "850ms",
		12 * time.Second:                      "12s",
		50 * time.Second:                      "50s",
		3 * time.Minute:                       "3m",
		3*time.Minute + 50*time.Second:        "3m50s",
		3*time.Minute + 5*time.Second:         "3m5s",
		10*time.Minute + 10*time.Second:       "10m10s",
		59*time.Minute + 59*time.Second:       "59m59s",
		time.Hour:                             "1h0m",
		5*time.Hour + 20*time.Minute:          "5h20m",
		5*time.Hour + 2*time.Minute:           "5h2m",
		47*time.Hour + 30*time.Minute:         "47h30m",
		3*24*time.Hour + 4*time.Hour:          "3d4h",
		3*24*time.Hour + 40*time.Minute:       "3d0h",
		10*time.Minute + 400*time.Millisecond: "10m",
	} {
		if got := dur(d); got != want {
			t.Errorf("dur(%s) = %q, want %q", d, got, want)
		}
	}
}
