package cron

import (
	"fmt"
	"strings"
	"time"
)

// at is a one-shot schedule, "@at <time>": it fires once, at one instant.
type at time.Time

func (a at) Next(t time.Time) time.Time {
	if time.Time(a).After(t) {
		return time.Time(a)
	}
	return time.Time{}
}

// oneShotAt returns a one-shot schedule's instant.
func oneShotAt(s Schedule) (time.Time, bool) {
	a, ok := s.(at)
	return time.Time(a), ok
}

// localLayouts are the wall-clock forms of "@at": read in the entry's zone.
var localLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04"}

// parseAt reads the time of "@at <time>": RFC 3339 with an offset
// (2027-01-01T09:00:00Z, an instant whatever the zone), or a wall-clock
// time without one (2027-01-01T09:00, in loc, placed on the timeline by
// the package's DST rule: a skipped time fires at the transition, a
// repeated time the first time). Whole seconds only.
func parseAt(v string, loc *time.Location) (Schedule, error) {
	if v == "" {
		return nil, &ScheduleError{"schedule", `@at needs a time: "@at 2027-01-01T09:00:00Z" (RFC 3339) or "@at 2027-01-01T09:00" (in the entry's time zone)`}
	}
	var t time.Time
	if abs, err := time.Parse(time.RFC3339Nano, v); err == nil {
		t = abs
	} else {
		for _, layout := range localLayouts {
			if c, err := time.Parse(layout, v); err == nil {
				t = resolve(c, loc)
				break
			}
		}
	}
	if t.IsZero() {
		return nil, &ScheduleError{"schedule", fmt.Sprintf("@at %q: want an RFC 3339 time such as 2027-01-01T09:00:00Z, or a local time such as 2027-01-01T09:00 (in the entry's time zone)", v)}
	}
	if t.Nanosecond() != 0 {
		return nil, &ScheduleError{"schedule", fmt.Sprintf("@at %q: whole seconds only", v)}
	}
	return at(t.UTC()), nil
}

// isAt reports whether spec is a one-shot "@at" schedule.
func isAt(spec string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "@at")
	return ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t')
}
