package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
)

var funcs = template.FuncMap{
	"utc":    utc,
	"rel":    rel,
	"inZone": inZone,
	"num":    num,
	"capped": capped,
	"pretty": pretty,
	"dur":    dur,
	"link":   link,
	"join":   strings.Join,
	"list":   func(s ...string) []string { return s },
	"int64":  func(n int) int64 { return int64(n) },
	// timersParam is the jobs page's timers parameter: "1" shows them.
	"timersParam": func(show bool) string {
		if show {
			return "1"
		}
		return ""
	},
	"lastError": func(errs []job.AttemptError) string {
		if len(errs) == 0 {
			return ""
		}
		return errs[len(errs)-1].Error
	},
	"deref": func(t *time.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return *t
	},
}

// utc formats an instant for tables: UTC, to the second.
func utc(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// rel says how far t is from now: "3s ago", "in 2m".
func rel(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Until(t)
	if d < 0 {
		return dur(-d) + " ago"
	}
	return "in " + dur(d)
}

// inZone formats t on the wall clock of zone tz (an IANA name or an
// offset, as a cron entry gives it), with the zone's abbreviation. The
// rules are the binary's own, as the scheduler's are.
func inZone(t time.Time, tz string) string {
	loc, err := cron.LoadLocation(tz)
	if err != nil {
		loc = time.UTC
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

// dur rounds a duration for people: 850ms, 12s, 3m10s, 5h2m, 3d4h.
func dur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		// 3m0s reads 3m; 3m50s stays as it is.
		s := d.Round(time.Second).String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		return s
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s") // 5h20m0s
	default:
		days := int(d / (24 * time.Hour))
		return fmt.Sprintf("%dd%dh", days, int((d-time.Duration(days)*24*time.Hour)/time.Hour))
	}
}

// num formats an integer with thousands separators.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// capped formats a count that stopped at depthCap.
func capped(n int64) string {
	if n >= depthCap {
		return num(depthCap) + "+"
	}
	return num(n)
}

// pretty indents JSON for reading.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// link builds path?k=v&… from pairs, leaving out empty values.
func link(path string, kv ...any) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v := fmt.Sprint(kv[i+1])
		if v != "" && v != "0" {
			q.Set(fmt.Sprint(kv[i]), v)
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
