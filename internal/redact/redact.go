// Package redact removes secrets from text that Gaffer stores or logs:
// the userinfo and query values of URLs inside error messages. A failed
// call's error (Go's *url.Error, a handler's own message) often quotes the
// whole URL, password and tokens included; the job's error history is
// readable by anyone with the tenant's read scope, and logs by operators.
package redact

import (
	"bytes"
	"io"
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a secret.
const Mask = "***"

// urlPattern finds absolute URLs with an authority in free text. It stops
// at white space and at quotes and parentheses or braces that commonly wrap a URL.
var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s"'<>(){}]+`)

// URLs returns s with every URL's password (or, without one, its user)
// and every query value replaced by Mask. Text that only looks like a URL
// is masked from its "@" or "?" on, conservatively.
func URLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlPattern.ReplaceAllStringFunc(s, URL)
}

// URL redacts one URL (see URLs). A string that does not parse keeps only
// its scheme and host-looking part.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return roughly(raw)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mask)
		} else {
			u.User = url.User(Mask)
		}
	}
	if u.RawQuery != "" {
		u.RawQuery = query(u.RawQuery)
	}
	if u.Fragment != "" {
		u.Fragment = Mask
	}
	out := u.String()
	// url.String escapes the mask in userinfo; show it plainly.
	return strings.ReplaceAll(out, "%2A%2A%2A", Mask)
}

// query keeps the names of a query's parameters and masks their values.
func query(raw string) string {
	parts := strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' })
	for i, p := range parts {
		name, _, _ := strings.Cut(p, "=")
		parts[i] = name + "=" + Mask
	}
	return strings.Join(parts, "&")
}

func roughly(raw string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = Mask + rest[i:]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i+1] + Mask
	}
	return scheme + "://" + rest
}

// Writer returns a writer that redacts URLs (see URLs) in what it passes
// on to w. Each Write should carry whole lines, as loggers write them.
func Writer(w io.Writer) io.Writer { return writer{w} }

type writer struct{ w io.Writer }

func (r writer) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("://")) {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, URLs(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
