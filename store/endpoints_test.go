package store_test

import (
	"slices"
	"testing"

	"github.com/gafferhq/gaffer/store"
)

func TestEndpoints(t *testing.T) {
	t.Parallel()
	for url, want := range map[string][]string{
		"postgres://u:p@db.example:6432/gaffer?sslmode=disable":             {"db.example:6432"},
		"postgres://u@10.0.0.5/gaffer?sslmode=disable":                      {"10.0.0.5:5432"},
		"postgres://u@a.example:5433,b.example:5434/gaffer?sslmode=disable": {"a.example:5433", "b.example:5434"},
		"host=db.example port=7000 user=u dbname=gaffer sslmode=disable":    {"db.example:7000"},
		"host=/var/run/postgresql user=u dbname=gaffer":                     nil,
		"postgres://u@[2001:db8::5]:5432/gaffer?sslmode=disable":            {"[2001:db8::5]:5432"},
	} {
		got, err := store.Endpoints(url)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Endpoints(%q) = %q, %v; want %q", url, got, err, want)
		}
	}
	if _, err := store.Endpoints("postgres://%zz"); err == nil {
		t.Error("a malformed URL parsed")
	}
}
