package catalog

import (
	"strings"
	"testing"
)

// A Diff names each object that differs, marks each side, and shows a
// changed definition as the lines that changed, with context.
func TestDiff(t *testing.T) {
	body := func(mid string) string {
		return "CREATE FUNCTION f()\nAS $$\nBEGIN\n    a;\n    b;\n    " + mid + ";\n    d;\n    e;\n    f;\nEND\n$$"
	}
	a, b := Catalog{}, Catalog{}
	a.add(Object{Kind: Function, Name: "gaffer.f()", Def: body("c")})
	b.add(Object{Kind: Function, Name: "gaffer.f()", Def: body("changed")})
	a.add(Object{Kind: Index, Name: "gaffer.gone_idx", Def: "CREATE INDEX gone_idx ON gaffer.t USING btree (v)"})
	b.add(Object{Kind: Table, Name: "gaffer.t", Def: "table\n    v integer"})
	a.add(Object{Kind: Table, Name: "gaffer.t", Def: "table\n    v integer"})
	b.add(Object{Kind: Trigger, Name: "gaffer.t.new", Def: "CREATE TRIGGER new …"})

	if d := Diff(a, a); d != "" {
		t.Fatalf("a catalog differs from itself:\n%s", d)
	}
	want := `- index gaffer.gone_idx (only in -)
    - CREATE INDEX gone_idx ON gaffer.t USING btree (v)
~ function gaffer.f() (differs)
    @@ line 4 @@
          a;
          b;
    -     c;
    +     changed;
          d;
          e;
+ trigger gaffer.t.new (only in +)
    + CREATE TRIGGER new …
`
	if d := Diff(a, b); d != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", d, want)
	}
	if d := Diff(a.Only(Routines...), b.Only(Routines...)); strings.Contains(d, "index") {
		t.Fatalf("routines only, yet:\n%s", d)
	}
}
