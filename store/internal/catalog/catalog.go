// Package catalog takes a snapshot of what PostgreSQL's catalog says about
// the gaffer schema — tables and their columns, constraints, indexes,
// sequences, views, types, routines, triggers, and the rows the tables
// hold — and tells two snapshots apart, readably.
//
// It is how the schema's one current text (store/schema) is checked
// against the migrations that reach it: the catalog tests compare a
// database the migrations built with one built from store/schema, and
// each migration's down file against the state before its up file;
// migrategen writes a routine migration from the difference between the
// two, and checks what it wrote the same way.
//
// Each object is compared as PostgreSQL prints it back (pg_get_functiondef,
// pg_get_indexdef, pg_get_constraintdef, format_type, pg_get_expr …), so
// two spellings of one definition compare equal, and a routine's body
// compares byte for byte (PostgreSQL keeps it as written, comments
// included). Owners, privileges and comments (COMMENT ON) are left out.
package catalog

import (
	"sort"
	"strings"
)

// Schema is the schema a snapshot covers.
const Schema = "gaffer"

// Excluded are the tables of Schema a snapshot leaves out, with everything
// on them: schema_migrations is the migration runner's own record
// (store/migrate.go creates it), not part of the schema it migrates.
var Excluded = []string{"schema_migrations"}

// Kind is what sort of object an Object is. Kinds sort in the order
// below, which is the order a Diff reports them in.
type Kind string

// The kinds of object a snapshot holds.
const (
	Table      Kind = "table" // with its options and columns, in order
	Sequence   Kind = "sequence"
	Constraint Kind = "constraint"
	Index      Kind = "index"
	View       Kind = "view"
	Type       Kind = "type"
	Function   Kind = "function" // any routine: function, procedure, aggregate
	Trigger    Kind = "trigger"
	Rows       Kind = "rows" // the rows a table holds, for seed data
)

var kindOrder = map[Kind]int{Table: 0, Sequence: 1, Constraint: 2, Index: 3, View: 4, Type: 5, Function: 6, Trigger: 7, Rows: 8}

// Routines are the kinds a routine migration changes (migrategen); the
// rest are the tables and what hangs on them, changed by hand.
var Routines = []Kind{Function, Trigger}

// Object is one thing in the schema. Def is what is compared; the other
// fields are read from it, for whoever writes DDL from a difference.
type Object struct {
	Kind Kind
	// Name is schema-qualified, and names a routine with its argument
	// types: "gaffer.jobs", "gaffer.jobs.jobs_pkey" (a constraint or a
	// trigger, after its table), "gaffer.claim_pick(text, integer)".
	Name string
	// Def is the object's definition as PostgreSQL prints it: a routine's
	// is pg_get_functiondef's CREATE OR REPLACE statement, a trigger's
	// pg_get_triggerdef's CREATE TRIGGER (and, for one not enabled as
	// usual, the ALTER TABLE that sets it: SQL to run either way), an
	// index's pg_get_indexdef's CREATE INDEX; a table's lists its options
	// and columns, one a line.
	Def string

	// Routines only: what DROP takes ("FUNCTION gaffer.f(text)"), and the
	// parts of the definition CREATE OR REPLACE cannot change (the kind
	// of routine, argument names, modes and defaults, and the result).
	Drop      string
	Signature string
	// Source is a routine's body as written (prosrc).
	Source string

	// Triggers only: the table (schema-qualified) and the Name of the
	// routine the trigger executes.
	Table    string
	Executes string
}

// Key identifies an object within a Catalog: its kind and name.
func (o Object) Key() string { return string(o.Kind) + " " + o.Name }

// Catalog is a snapshot of one schema: its objects by Key.
type Catalog struct {
	Objects map[string]Object
}

func (c *Catalog) add(o Object) {
	if c.Objects == nil {
		c.Objects = map[string]Object{}
	}
	c.Objects[o.Key()] = o
}

// Sorted returns the objects by kind, then name.
func (c Catalog) Sorted() []Object {
	out := make([]Object, 0, len(c.Objects))
	for _, o := range c.Objects {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}

func less(a, b Object) bool {
	if a.Kind != b.Kind {
		return kindOrder[a.Kind] < kindOrder[b.Kind]
	}
	return a.Name < b.Name
}

// Only returns the objects of the given kinds.
func (c Catalog) Only(kinds ...Kind) Catalog { return c.filter(kinds, true) }

// Without returns the objects of every kind but the given ones.
func (c Catalog) Without(kinds ...Kind) Catalog { return c.filter(kinds, false) }

func (c Catalog) filter(kinds []Kind, keep bool) Catalog {
	out := Catalog{Objects: map[string]Object{}}
	for k, o := range c.Objects {
		in := false
		for _, kind := range kinds {
			in = in || o.Kind == kind
		}
		if in == keep {
			out.Objects[k] = o
		}
	}
	return out
}

// Of returns the objects of one kind by Name.
func (c Catalog) Of(kind Kind) map[string]Object {
	out := map[string]Object{}
	for _, o := range c.Objects {
		if o.Kind == kind {
			out[o.Name] = o
		}
	}
	return out
}

// String lists the catalog, one object after the other.
func (c Catalog) String() string {
	var b strings.Builder
	for _, o := range c.Sorted() {
		b.WriteString(o.Key())
		b.WriteString("\n")
		for _, line := range strings.Split(o.Def, "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	return b.String()
}
