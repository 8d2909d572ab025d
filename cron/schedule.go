package cron

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"

	"github.com/gafferhq/gaffer/internal/tzdata"
)

// Schedule computes fire times.
type Schedule interface {
	// Next returns the first fire time strictly after t, or the zero time
	// if there is none within five years (a one-shot "@at": none after
	// its instant, ever).
	Next(t time.Time) time.Time
}

var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// ScheduleError says what is wrong with a schedule or time zone.
type ScheduleError struct {
	Field   string // "schedule" or "timezone"
	Message string
}

func (e *ScheduleError) Error() string { return e.Field + ": " + e.Message }

// Parse reads a schedule — 5 fields (minute hour day-of-month month
// day-of-week), 6 with seconds first, a descriptor (@yearly, @monthly,
// @weekly, @daily, @hourly), "@every <duration>", or "@at <time>" (one
// instant: fires once; see parseAt) — in the time zone tz (an IANA name
// such as "Europe/London", a fixed offset such as "+05:30", or "" for
// UTC). It rejects a schedule that never fires. A one-shot in the past
// parses (a done entry keeps its schedule); Client refuses to arm one.
//
// Wall-clock schedules follow one DST rule: a local time skipped by a
// spring-forward transition fires once, at the transition instant; a
// local time repeated by a fall-back transition fires once, the first
// time. "@every" schedules count elapsed time and ignore the zone.
func Parse(spec, tz string) (Schedule, error) {
	loc, err := LoadLocation(tz)
	if err != nil {
		return nil, err
	}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, &ScheduleError{"schedule", "is required"}
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, &ScheduleError{"schedule", "give the time zone in the timezone field, not as a TZ= prefix"}
	}
	if rest, ok := strings.CutPrefix(spec, "@every"); ok {
		return parseEvery(strings.TrimSpace(rest))
	}
	if isAt(spec) {
		return parseAt(strings.TrimSpace(strings.TrimPrefix(spec, "@at")), loc)
	}
	if !strings.HasPrefix(spec, "@") {
		if n := len(strings.Fields(spec)); n != 5 && n != 6 {
			return nil, &ScheduleError{"schedule", fmt.Sprintf("%q has %d fields; want 5 (minute hour day month weekday), 6 (with seconds first), or a descriptor such as @daily", spec, n)}
		}
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, &ScheduleError{"schedule", fmt.Sprintf("%q: %v", spec, err)}
	}
	spec6, ok := s.(*robfig.SpecSchedule)
	if !ok {
		return nil, &ScheduleError{"schedule", fmt.Sprintf("%q: unsupported schedule", spec)}
	}
	civil := *spec6
	civil.Location = time.UTC
	w := &wallClock{civil: &civil, loc: loc}
	// Never firing (30 February, 31 April…): no fire time in five years.
	if w.civil.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, &ScheduleError{"schedule", fmt.Sprintf("%q never fires", spec)}
	}
	return w, nil
}

var everyUnits = regexp.MustCompile(`^[0-9]+(h|m|s)([0-9]+(m|s))?([0-9]+s)?$`)

func parseEvery(d string) (Schedule, error) {
	dur, err := time.ParseDuration(d)
	if err != nil || !everyUnits.MatchString(d) {
		return nil, &ScheduleError{"schedule", fmt.Sprintf("@every %q: want a duration in whole seconds such as 30s, 5m or 1h30m", d)}
	}
	if dur < time.Second || dur%time.Second != 0 {
		return nil, &ScheduleError{"schedule", fmt.Sprintf("@every %s: must be whole seconds, at least 1s", d)}
	}
	if dur > 366*24*time.Hour {
		return nil, &ScheduleError{"schedule", fmt.Sprintf("@every %s: at most 8784h (a year)", d)}
	}
	return every(dur), nil
}

// every fires at fixed intervals after the previous fire time.
type every time.Duration

func (e every) Next(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Duration(e))
}

// wallClock is a cron expression evaluated on the local wall clock of loc.
// The matching itself runs on "civil" times (wall-clock readings encoded
// as UTC, where no DST exists); each match is then placed on the timeline
// by resolve, which applies the DST rule.
type wallClock struct {
	civil *robfig.SpecSchedule
	loc   *time.Location
}

func (w *wallClock) Next(t time.Time) time.Time {
	c := toCivil(t.In(w.loc))
	for range 100 {
		c = w.civil.Next(c)
		if c.IsZero() {
			return time.Time{}
		}
		// A match that resolves to t or earlier is the repeat of a local
		// time already passed (fall-back) or a second name for an instant
		// already fired (spring-forward): skip it.
		if at := resolve(c, w.loc); at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// toCivil reads t's wall clock into a UTC-encoded time.
func toCivil(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

func sameCivil(t time.Time, c time.Time) bool { return toCivil(t).Equal(c) }

// resolve places the wall-clock reading c of zone loc on the timeline: the
// earliest instant that reads c; or, if a spring-forward gap skips c, the
// transition instant at the end of the gap.
func resolve(c time.Time, loc *time.Location) time.Time {
	guess := time.Date(c.Year(), c.Month(), c.Day(), c.Hour(), c.Minute(), c.Second(), 0, loc)
	start, end := guess.ZoneBounds()
	var offsets []int
	for _, probe := range []time.Time{guess, start.Add(-time.Nanosecond), end} {
		if probe.IsZero() {
			continue
		}
		_, off := probe.In(loc).Zone()
		offsets = append(offsets, off)
	}
	var best time.Time
	for _, off := range offsets {
		at := c.Add(-time.Duration(off) * time.Second).In(loc)
		if sameCivil(at, c) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	if !best.IsZero() {
		return best
	}
	// In a gap. Go placed guess within an hour of the transition, on one
	// side or the other: the transition is the bound of guess's zone that
	// lies next to it.
	if !start.IsZero() && guess.Sub(start) < 24*time.Hour {
		return start
	}
	return end
}

var offsetPattern = regexp.MustCompile(`^(?:UTC)?([+-])(\d{2}):?(\d{2})$`)

// LoadLocation reads a time zone: an IANA name ("America/New_York"),
// "UTC" or "" for UTC, or a fixed offset ("+05:30", "-0800", "UTC+01:00").
// Zones come only from the rules embedded in the binary (internal/tzdata),
// never from $ZONEINFO or the OS, so every node running the same build
// agrees on every fire time.
func LoadLocation(tz string) (*time.Location, error) {
	tz = strings.TrimSpace(tz)
	if tz == "" || tz == "UTC" || tz == "Etc/UTC" {
		return time.UTC, nil
	}
	if m := offsetPattern.FindStringSubmatch(tz); m != nil {
		h, _ := strconv.Atoi(m[2])
		mi, _ := strconv.Atoi(m[3])
		if h > 14 || mi > 59 {
			return nil, &ScheduleError{"timezone", fmt.Sprintf("offset %q is out of range (at most ±14:00)", tz)}
		}
		secs := h*3600 + mi*60
		if m[1] == "-" {
			secs = -secs
		}
		return time.FixedZone(tz, secs), nil
	}
	if strings.EqualFold(tz, "local") {
		return nil, &ScheduleError{"timezone", `"Local" depends on each node's configuration; name the zone, e.g. "Europe/Berlin"`}
	}
	loc, err := tzdata.LoadLocation(tz)
	if err != nil {
		return nil, &ScheduleError{"timezone", fmt.Sprintf("%q is not a known IANA time zone (e.g. \"America/New_York\") or offset (e.g. \"+05:30\")", tz)}
	}
	return loc, nil
}

// NextN returns the next n fire times after t.
func NextN(s Schedule, t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}
