package catalog

import (
	"fmt"
	"sort"
	"strings"
)

// How much of an object a Diff shows: a whole object (one side only) up
// to wholeLines lines, a changed one's line diff up to diffLines lines,
// with contextLines lines of context around each change.
const (
	wholeLines   = 30
	diffLines    = 200
	contextLines = 2
)

// Diff describes how catalog b differs from catalog a, object by object
// in kind and name order, "-" marking a's side and "+" b's: an object on
// one side only is shown whole (its first lines), a changed one as a line
// diff of its definition. It is empty when the catalogs are equal.
func Diff(a, b Catalog) string {
	var out strings.Builder
	seen := map[string]bool{}
	var all []Object
	for _, c := range []Catalog{a, b} {
		for _, o := range c.Sorted() {
			if !seen[o.Key()] {
				seen[o.Key()] = true
				all = append(all, o)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return less(all[i], all[j]) })
	for _, o := range all {
		x, inA := a.Objects[o.Key()]
		y, inB := b.Objects[o.Key()]
		switch {
		case inA && !inB:
			fmt.Fprintf(&out, "- %s (only in -)\n", o.Key())
			writeWhole(&out, "-", x.Def)
		case inB && !inA:
			fmt.Fprintf(&out, "+ %s (only in +)\n", o.Key())
			writeWhole(&out, "+", y.Def)
		case x.Def != y.Def:
			fmt.Fprintf(&out, "~ %s (differs)\n", o.Key())
			for i, line := range lineDiff(x.Def, y.Def) {
				if i == diffLines {
					out.WriteString("    … (diff cut short)\n")
					break
				}
				out.WriteString("    " + line + "\n")
			}
		}
	}
	return out.String()
}

func writeWhole(out *strings.Builder, mark, def string) {
	lines := strings.Split(def, "\n")
	for i, line := range lines {
		if i == wholeLines {
			fmt.Fprintf(out, "    %s … (%d more lines)\n", mark, len(lines)-i)
			return
		}
		out.WriteString("    " + mark + " " + line + "\n")
	}
}

// lineDiff returns the lines of a unified diff from a to b, with context
// lines around each change and an "@@ line N @@" header (N counting a's
// lines) before each run of them. Lines are matched by a longest common
// subsequence: definitions are at most a few hundred lines.
func lineDiff(a, b string) []string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(x), len(y)
	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		mark byte
		text string
		line int // in a, 1-based: the line at or after this op
	}
	var ops []op
	for i, j := 0, 0; i < n || j < m; {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, op{' ', x[i], i + 1})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', x[i], i + 1})
			i++
		default:
			ops = append(ops, op{'+', y[j], i + 1})
			j++
		}
	}
	show := make([]bool, len(ops))
	for k, o := range ops {
		if o.mark == ' ' {
			continue
		}
		for d := max(0, k-contextLines); d <= min(len(ops)-1, k+contextLines); d++ {
			show[d] = true
		}
	}
	var out []string
	for k, o := range ops {
		if !show[k] {
			continue
		}
		if k == 0 || !show[k-1] {
			out = append(out, fmt.Sprintf("@@ line %d @@", o.line))
		}
		out = append(out, string(o.mark)+" "+o.text)
	}
	return out
}
