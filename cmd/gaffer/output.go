package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gafferhq/gaffer/job"
)

// output prints raw as indented JSON (--json), or calls table.
func (m *Main) output(asJSON bool, raw json.RawMessage, table func(tw *tabwriter.Writer)) error {
	if asJSON {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := m.Stdout.Write(buf.Bytes())
		return err
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// call sends a request and decodes its answer into a T. It returns the
// answer as sent too, for --json: the API's JSON, not a re-encoding.
func call[T any](ctx context.Context, c *apiClient, method, path string, body any, headers ...string) (T, json.RawMessage, error) {
	var v T
	var raw json.RawMessage
	if err := c.do(ctx, method, path, body, &raw, headers...); err != nil {
		return v, nil, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, raw, fmt.Errorf("%s %s: cannot read the answer from %s: %w", method, strings.SplitN(path, "?", 2)[0], c.base, err)
	}
	return v, raw, nil
}

// show sends a request and prints its answer: as JSON with --json,
// otherwise as print renders it.
func show[T any](m *Main, ctx context.Context, cf *clientFlags, c *apiClient, method, path string, body any, print func(tw *tabwriter.Writer, v T), headers ...string) error {
	v, raw, err := call[T](ctx, c, method, path, body, headers...)
	if err != nil {
		return err
	}
	return m.output(*cf.json, raw, func(tw *tabwriter.Writer) { print(tw, v) })
}

// listPage is a list as the API answers it.
type listPage[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
	// SearchWindowCut: the list's args search looked only through the
	// newest 10,000 jobs of the rest of the filter (jobs list --arg).
	SearchWindowCut bool `json:"search_window_cut,omitempty"`
}

// table is how a list prints without --json.
type table[T any] struct {
	// header names the columns, tab-separated.
	header string
	// row gives one row's cells, one per column.
	row func(T) []any
	// footer, when set, is a line printed after the rows (none if "").
	footer func([]T) string
	// columns, when set, may change the columns for the rows at hand:
	// a header and row other than "" and nil replace the table's.
	columns func([]T) (header string, row func(T) []any)
}

// print writes p as a table: the header, a line per row, the footer, and
// the flag that fetches the next page.
func (t table[T]) print(tw *tabwriter.Writer, p listPage[T]) {
	if t.columns != nil {
		if h, row := t.columns(p.Data); row != nil {
			t.header, t.row = h, row
		}
	}
	fmt.Fprintln(tw, t.header)
	for _, r := range p.Data {
		cells := t.row(r)
		for i, c := range cells {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	if t.footer != nil {
		if s := t.footer(p.Data); s != "" {
			fmt.Fprintln(tw, s)
		}
	}
	if p.SearchWindowCut {
		fmt.Fprintln(tw, "(the search looked through the newest 10,000 jobs of the filter; older ones may match: go on with --cursor)")
	}
	if p.NextCursor != "" {
		fmt.Fprintf(tw, "(more: --cursor %s)\n", p.NextCursor)
	}
}

// pageFlags are a paged list's --limit and --cursor.
type pageFlags struct {
	limit  *int
	cursor *string
}

func addPageFlags(fs *flagSet, limit int) *pageFlags {
	return &pageFlags{
		limit:  fs.Int("limit", "-", limit, "rows per page"),
		cursor: fs.String("cursor", "-", "", "next_cursor of the previous page"),
	}
}

// query adds the page's limit and cursor to q (nil: a new one).
func (f *pageFlags) query(q url.Values) url.Values {
	if q == nil {
		q = url.Values{}
	}
	q.Set("limit", strconv.Itoa(*f.limit))
	if *f.cursor != "" {
		q.Set("cursor", *f.cursor)
	}
	return q
}

// list GETs a list from the API and prints it: as JSON with --json,
// otherwise as t. A page may end before its limit, at the API's response
// byte budget, with a next_cursor: list follows the cursors until it has
// the rows path's limit asks for, or the list ends, and prints them as
// one page (with the last next_cursor).
func list[T any](m *Main, ctx context.Context, cf *clientFlags, c *apiClient, path string, t table[T]) error {
	u, err := url.Parse(path)
	if err != nil {
		return err
	}
	q := u.Query()
	want, _ := strconv.Atoi(q.Get("limit"))
	first, raw, err := call[listPage[json.RawMessage]](ctx, c, "GET", path, nil)
	if err != nil {
		return err
	}
	if first.NextCursor == "" || len(first.Data) == 0 || len(first.Data) >= want {
		// One page: printed as the API sent it.
		var page listPage[T]
		if err := json.Unmarshal(raw, &page); err != nil {
			return fmt.Errorf("GET %s: cannot read the answer: %w", u.Path, err)
		}
		return m.output(*cf.json, raw, func(tw *tabwriter.Writer) { t.print(tw, page) })
	}
	all := first
	for p := first; p.NextCursor != "" && len(p.Data) > 0 && len(all.Data) < want; {
		q.Set("limit", strconv.Itoa(want-len(all.Data)))
		q.Set("cursor", p.NextCursor)
		u.RawQuery = q.Encode()
		if p, _, err = call[listPage[json.RawMessage]](ctx, c, "GET", u.String(), nil); err != nil {
			return err
		}
		all.Data = append(all.Data, p.Data...)
		all.NextCursor, all.SearchWindowCut = p.NextCursor, p.SearchWindowCut
	}
	if all.Data == nil {
		all.Data = []json.RawMessage{}
	}
	var joined bytes.Buffer
	enc := json.NewEncoder(&joined)
	enc.SetEscapeHTML(false) // the rows as the API sent them
	if err := enc.Encode(all); err != nil {
		return err
	}
	var page listPage[T]
	if err := json.Unmarshal(joined.Bytes(), &page); err != nil {
		return fmt.Errorf("GET %s: cannot read the answer: %w", u.Path, err)
	}
	return m.output(*cf.json, joined.Bytes(), func(tw *tabwriter.Writer) { t.print(tw, page) })
}

// printRows prints rows this command read itself (not from the API): as
// {"data": [...]} with --json, the shape of the API's lists, otherwise as t.
func printRows[T any](m *Main, asJSON bool, rows []T, t table[T]) error {
	if rows == nil {
		rows = []T{}
	}
	p := listPage[T]{Data: rows}
	raw, err := job.EncodeJSON(p)
	if err != nil {
		return err
	}
	return m.output(asJSON, raw, func(tw *tabwriter.Writer) { t.print(tw, p) })
}
