package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gafferhq/gaffer/store/internal/catalog"
)

// change is what a script does to one routine or trigger.
type change struct {
	what   string // "new", "changed", "recreated" (dropped and created again), "dropped"
	object catalog.Object
}

func (c change) String() string {
	return fmt.Sprintf("%-9s %s %s", c.what, c.object.Kind, c.object.Name)
}

// plan is the DDL that takes the routines of one catalog (from) to those
// of another (to).
type plan struct {
	dropTriggers   []catalog.Object // from's
	dropRoutines   []catalog.Object // from's
	makeRoutines   []change         // to's
	makeTriggers   []change         // to's
	droppedForGood []catalog.Object // from's routines to does not have
	changes        []change
}

// planRoutines compares the routines and triggers of from and to. A
// routine whose kind, arguments (names, modes, defaults) or result change
// is dropped and created again: CREATE OR REPLACE refuses those changes.
// Triggers are dropped before the routines (a routine a trigger executes
// cannot be dropped under it), and made after them.
func planRoutines(from, to catalog.Catalog) plan {
	var p plan
	fromFns, toFns := from.Of(catalog.Function), to.Of(catalog.Function)
	fromTgs, toTgs := from.Of(catalog.Trigger), to.Of(catalog.Trigger)
	dropped := map[string]bool{} // routine names dropped in from
	for _, name := range sortedNames(fromFns) {
		o := fromFns[name]
		n, ok := toFns[name]
		switch {
		case !ok:
			p.dropRoutines = append(p.dropRoutines, o)
			p.droppedForGood = append(p.droppedForGood, o)
			p.changes = append(p.changes, change{"dropped", o})
			dropped[name] = true
		case n.Signature != o.Signature:
			p.dropRoutines = append(p.dropRoutines, o)
			dropped[name] = true
		}
	}
	for _, name := range sortedNames(toFns) {
		n := toFns[name]
		o, ok := fromFns[name]
		var c change
		switch {
		case !ok:
			c = change{"new", n}
		case dropped[name]:
			c = change{"recreated", n}
		case o.Def != n.Def:
			c = change{"changed", n}
		default:
			continue
		}
		p.makeRoutines = append(p.makeRoutines, c)
		p.changes = append(p.changes, c)
	}
	remade := map[string]bool{} // triggers dropped and made again
	for _, name := range sortedNames(fromTgs) {
		o := fromTgs[name]
		n, ok := toTgs[name]
		switch {
		case !ok:
			p.dropTriggers = append(p.dropTriggers, o)
			p.changes = append(p.changes, change{"dropped", o})
		case n.Def != o.Def || dropped[o.Executes]:
			p.dropTriggers = append(p.dropTriggers, o)
			remade[name] = true
		}
	}
	for _, name := range sortedNames(toTgs) {
		n := toTgs[name]
		o, ok := fromTgs[name]
		var c change
		switch {
		case !ok:
			c = change{"new", n}
		case o.Def != n.Def:
			c = change{"changed", n}
		case remade[name]:
			c = change{"recreated", n}
		default:
			continue
		}
		p.makeTriggers = append(p.makeTriggers, c)
		p.changes = append(p.changes, c)
	}
	return p
}

func sortedNames(m map[string]catalog.Object) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// recreated says what "recreated" means, for a script's header.
const recreated = "recreated: dropped and created again (CREATE OR REPLACE cannot change a routine's arguments or\n--   result; a trigger goes with the routine it executes)"

// script writes the plan's DDL, after header (comment lines, each ending
// in a newline). label is the comment line above the statement that
// makes a routine or trigger.
func (p plan) script(header string, label func(change) string) string {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("SET LOCAL check_function_bodies = off;\n")
	if len(p.dropTriggers)+len(p.dropRoutines) > 0 {
		b.WriteString("\n")
	}
	for _, o := range p.dropTriggers {
		fmt.Fprintf(&b, "DROP TRIGGER %s ON %s;\n", strings.TrimPrefix(o.Name, o.Table+"."), o.Table)
	}
	for _, o := range p.dropRoutines {
		fmt.Fprintf(&b, "DROP %s;\n", o.Drop)
	}
	for _, c := range append(append([]change{}, p.makeRoutines...), p.makeTriggers...) {
		b.WriteString("\n-- " + label(c) + "\n")
		b.WriteString(strings.TrimRight(c.object.Def, "\n") + ";\n")
	}
	return b.String()
}

// recreates says whether the plan drops and creates again any routine or
// trigger.
func (p plan) recreates() bool {
	for _, c := range p.changes {
		if c.what == "recreated" {
			return true
		}
	}
	return false
}
