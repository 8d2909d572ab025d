package store

import (
	"strconv"
	"strings"
)

// where builds the WHERE clause of a filtered list query. Each condition
// carries one "?" that becomes the next positional parameter.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, arg any) {
	w.args = append(w.args, arg)
	w.conds = append(w.conds, strings.Replace(cond, "?", "$"+strconv.Itoa(len(w.args)), 1))
}

// addLiteral adds a condition with no parameter. Only for text built
// from known, fixed values.
func (w *where) addLiteral(cond string) { w.conds = append(w.conds, cond) }

func (w *where) sql() string {
	if len(w.conds) == 0 {
		return "true"
	}
	return strings.Join(w.conds, " AND ")
}

// next is the placeholder for one more parameter after the conditions'.
func (w *where) next(arg any) string {
	w.args = append(w.args, arg)
	return "$" + strconv.Itoa(len(w.args))
}
