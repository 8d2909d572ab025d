package api

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
)

// DefaultMaxResponseBytes is Config.MaxResponseBytes' default;
// MinMaxResponseBytes the least it may be.
const (
	DefaultMaxResponseBytes = 8 << 20
	MinMaxResponseBytes     = 16 << 10
)

// pageTailBytes is kept free of items at the end of a page's budget for
// the envelope's close and its next_cursor.
const pageTailBytes = 128

// streamer is an answer that writes itself, item by item, rather than
// being encoded whole: respond hands it the writer and the response
// budget.
type streamer interface {
	stream(w io.Writer, maxBytes int) error
}

// page is a list answer (the list envelope on the wire) under the
// response budget: its items are encoded one at a time, each straight to
// the writer, and the page ends before the item that would take it past
// the budget (the first item is always sent, whatever its size). Its
// next_cursor then names the last item sent, so that the next page starts
// right after it: nothing is lost or repeated.
type page[T any] struct {
	items []T
	// more: rows follow the items (the store's count or its own byte
	// budget ended the read).
	more bool
	// id is an item's position: the next page holds the items with
	// smaller ids.
	id func(T) int64
	// lastRead, when set, is the position of the last row the store read
	// for the page, past its last item (rows left out of the page, such
	// as workflow timers): when every item is sent, the next page starts
	// after it, so that those rows are not read again — and a page all
	// of whose rows were left out still says where to go on.
	lastRead int64
	// windowCut: the search window cut the list's args filters short
	// (searchList); lastRead is then where it ended.
	windowCut bool
}

// stream writes the page as list[T] would encode.
func (p page[T]) stream(w io.Writer, maxBytes int) error {
	var item bytes.Buffer
	enc := json.NewEncoder(&item)
	// Not HTML-escaped: args and results are returned as they were sent.
	enc.SetEscapeHTML(false)
	if _, err := io.WriteString(w, `{"data":[`); err != nil {
		return err
	}
	written, sent, more := len(`{"data":[`), 0, p.more
	for i, it := range p.items {
		item.Reset()
		if i > 0 {
			item.WriteByte(',')
		}
		if err := enc.Encode(it); err != nil {
			return err
		}
		item.Truncate(item.Len() - 1) // Encode's newline
		if sent > 0 && written+item.Len()+pageTailBytes > maxBytes {
			more = true
			break
		}
		if _, err := w.Write(item.Bytes()); err != nil {
			return err
		}
		written += item.Len()
		sent++
	}
	tail := "]"
	switch {
	case more && sent == len(p.items) && p.lastRead != 0:
		tail += `,"next_cursor":"` + encodeCursor(strconv.FormatInt(p.lastRead, 10)) + `"`
	case more && sent > 0:
		tail += `,"next_cursor":"` + encodeCursor(strconv.FormatInt(p.id(p.items[sent-1]), 10)) + `"`
	}
	if p.windowCut {
		tail += `,"search_window_cut":true`
	}
	_, err := io.WriteString(w, tail+"}\n")
	return err
}
