package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// CheckJSONText reports why b, a JSON text, cannot be stored and handed to
// a handler exactly as sent: bytes that are not UTF-8, a NUL character
// (raw or \u0000), a \u escape naming half of a surrogate pair without its
// other half, or an object naming the same member twice. Go's decoder
// would silently turn the first three into U+FFFD, and PostgreSQL refuses
// them; a duplicate name is read differently by different parsers (Go and
// jsonb keep the last, others the first), so a receiver could act on a
// value the sender's checks never saw. Every JSON body a tenant sends is
// checked once, where it enters; syntax is checked separately (json.Valid
// or the decoder), and text that is not JSON gets no error here.
func CheckJSONText(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("the JSON is not valid UTF-8")
	}
	if bytes.IndexByte(b, 0) >= 0 {
		return errors.New("the JSON must not contain NUL characters")
	}
	var open []members // the containers around i, innermost last
	wantName := false  // the next string is a member name
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{':
			open = append(open, members{object: true})
			wantName = true
		case '[':
			open = append(open, members{})
			wantName = false
		case '}', ']':
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
			wantName = false
		case ',':
			wantName = len(open) > 0 && open[len(open)-1].object
		case '"':
			end, escaped, err := scanString(b, i)
			if err != nil {
				return err
			}
			if wantName && len(open) > 0 {
				name := b[i+1 : end]
				if escaped {
					var s string
					if json.Unmarshal(b[i:end+1], &s) == nil {
						name = []byte(s)
					}
				}
				top := &open[len(open)-1]
				if top.has(name) {
					return fmt.Errorf("the JSON has an object naming %q twice", clip(name, 64))
				}
				top.add(name)
			}
			wantName = false
			i = end
		}
	}
	return nil
}

// members are the names an object has named so far: compared one by one
// while there are few (args usually hold a handful), through a map once
// there are many, so a body of a million one-letter names is not
// quadratic.
type members struct {
	object bool
	names  [][]byte
	set    map[string]struct{}
}

func (m *members) has(name []byte) bool {
	if m.set != nil {
		_, ok := m.set[string(name)]
		return ok
	}
	for _, n := range m.names {
		if bytes.Equal(n, name) {
			return true
		}
	}
	return false
}

func (m *members) add(name []byte) {
	switch {
	case m.set != nil:
		m.set[string(name)] = struct{}{}
	case len(m.names) == 16:
		m.set = make(map[string]struct{}, 64)
		for _, n := range m.names {
			m.set[string(n)] = struct{}{}
		}
		m.set[string(name)] = struct{}{}
		m.names = nil
	default:
		m.names = append(m.names, name)
	}
}

// scanString finds the closing quote of the string starting at b[i]: its
// index (len(b) if there is none) and whether the string holds an escape.
// Escapes of NUL and of unpaired surrogates are errors.
func scanString(b []byte, i int) (end int, escaped bool, err error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return j, escaped, nil
		case '\\':
			escaped = true
			if j+1 >= len(b) {
				return len(b), escaped, nil
			}
			j++ // the escaped character: a \\ never starts another escape
			if b[j] != 'u' {
				continue
			}
			r, ok := hex4(b[j+1:])
			switch {
			case !ok:
				continue // not valid JSON; the decoder says so
			case r == 0:
				return 0, false, errors.New(`the JSON must not contain NUL characters (\u0000)`)
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, false, errors.New("the JSON has a \\u escape of a low surrogate without its high surrogate")
			case r >= 0xD800 && r <= 0xDBFF:
				rest := b[j+5:]
				if len(rest) < 6 || rest[0] != '\\' || rest[1] != 'u' {
					return 0, false, errors.New("the JSON has a \\u escape of a high surrogate without its low surrogate")
				}
				if lo, ok := hex4(rest[2:]); !ok || lo < 0xDC00 || lo > 0xDFFF {
					return 0, false, errors.New("the JSON has a \\u escape of a high surrogate without its low surrogate")
				}
				j += 4 + 6 // the low surrogate is checked here, not again
			}
		}
	}
	return len(b), escaped, nil
}

// clip shortens b to at most n bytes, on a character boundary.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// EncodeJSON is json.Marshal without HTML escaping: <, > and & stay as
// they are. Payloads are kept as encoded and are not HTML; escaping them
// would change the bytes a receiver signs or hashes.
func EncodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// trimSpace drops the whitespace around a JSON text: it is not part of
// the value, and PostgreSQL does not keep it either.
func trimSpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// checkPayload checks JSON text that is kept as sent: valid JSON, at most
// max bytes, and text CheckJSONText accepts. field names it in errors.
func checkPayload(field string, b []byte, max int) error {
	if len(b) > max {
		return &ValidationError{Field: field, Message: fmt.Sprintf("must be at most %d bytes of JSON, got %d", max, len(b))}
	}
	if !json.Valid(b) {
		return &ValidationError{Field: field, Message: "is not valid JSON"}
	}
	if err := CheckJSONText(b); err != nil {
		return &ValidationError{Field: field, Message: err.Error()}
	}
	return nil
}

// CheckPayload checks JSON text that is kept as sent (a signal's payload,
// say) as args are checked: valid JSON, at most MaxArgsBytes, and text
// CheckJSONText accepts.
func CheckPayload(field string, b []byte) error { return checkPayload(field, b, MaxArgsBytes) }
