package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The image's build context leaves out history, dev data and build
// outputs, and keeps everything the build reads: go.mod, go.sum and
// every package with the files it embeds.
func TestDockerignore(t *testing.T) {
	f, err := os.Open("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var patterns []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimPrefix(line, "/"))
		}
	}
	ignored := func(path string) bool {
		for _, p := range patterns {
			for q := path; q != "."; q = filepath.Dir(q) {
				if ok, _ := filepath.Match(p, q); ok {
					return true
				}
				if rest, ok := strings.CutPrefix(p, "**/"); ok {
					if ok, _ := filepath.Match(rest, filepath.Base(q)); ok {
						return true
					}
				}
			}
		}
		return false
	}
	for _, out := range []string{".git/HEAD", ".data/postgres/PG_VERSION", ".data/etcd/member/snap/db", "bin/gaffer", "cmd/gaffer/gaffer", "cmd/gaffer/gaffer.test"} {
		if !ignored(out) {
			t.Errorf(".dockerignore lets %s into the build context", out)
		}
	}
	for _, in := range []string{"go.mod", "go.sum", "node.go", "cmd/gaffer/main.go", "api/openapi.json", "store/migrations/0001_jobs.up.sql", "store/schema/tables.sql",
		"store/queries/jobs.sql", "ui/templates/layout.html", "ui/static/gaffer.css", "internal/tzdata/zoneinfo.zip"} {
		if ignored(in) {
			t.Errorf(".dockerignore keeps %s, which the build needs, out of the context", in)
		}
	}
}
