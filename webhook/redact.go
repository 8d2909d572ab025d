package webhook

import (
	"net/url"
	"strings"
)

// redact writes u for an error message that is stored with the job and
// shown to whoever can read it: a password (or a user name standing alone,
// often a token) becomes ***, every query value becomes ***, and the
// fragment is left out. The path is kept.
func redact(u *url.URL) string {
	var b strings.Builder
	b.WriteString(u.Scheme)
	b.WriteString("://")
	if u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword {
			b.WriteString(url.PathEscape(u.User.Username()))
			b.WriteString(":***@")
		} else {
			b.WriteString("***@")
		}
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteByte('?')
		for i, part := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			key, value, hasValue := strings.Cut(part, "=")
			b.WriteString(key)
			if hasValue {
				b.WriteByte('=')
				if value != "" {
					b.WriteString("***")
				}
			}
		}
	}
	return b.String()
}

// redactRaw is redact for a URL string; one that does not parse is not
// repeated at all.
func redactRaw(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	return redact(u)
}
