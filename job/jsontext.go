package job

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

// CheckJSONText reports why b, a valid JSON text, cannot be stored as
// PostgreSQL jsonb and handed to a handler unchanged: bytes that are not
// UTF-8, a NUL character (raw or \u0000), or a \u escape naming half of a
// surrogate pair without its other half. Go's decoder would silently turn
// such text into U+FFFD, and jsonb refuses it, so every JSON body a tenant
// sends is checked once, where it enters.
func CheckJSONText(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("the JSON is not valid UTF-8")
	}
	if bytes.IndexByte(b, 0) >= 0 {
		return errors.New("the JSON must not contain NUL characters")
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		i++ // the escaped character: a \\ never starts another escape
		if b[i] != 'u' {
			continue
		}
		r, ok := hex4(b[i+1:])
		switch {
		case !ok:
			continue // not valid JSON; the decoder says so
		case r == 0:
			return errors.New(`the JSON must not contain NUL characters (\u0000)`)
		case r >= 0xDC00 && r <= 0xDFFF:
			return errors.New("the JSON has a \\u escape of a low surrogate without its high surrogate")
		case r >= 0xD800 && r <= 0xDBFF:
			rest := b[i+5:]
			if len(rest) < 6 || rest[0] != '\\' || rest[1] != 'u' {
				return errors.New("the JSON has a \\u escape of a high surrogate without its low surrogate")
			}
			if lo, ok := hex4(rest[2:]); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return errors.New("the JSON has a \\u escape of a high surrogate without its low surrogate")
			}
			i += 4 + 6 // the low surrogate is checked here, not again
		}
	}
	return nil
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
