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
