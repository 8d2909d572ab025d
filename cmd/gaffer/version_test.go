package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/tzdata"
)

// A binary built without -X main.Version (go install, go build) reports
// what its build info says, not "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go install …@v1.4.0", debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"go build in a checkout", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101120000-2292b36abcde+dirty"}, Settings: vcs("2292b36abcdef0123456789", "true")},
			"v0.0.0-20260101120000-2292b36abcde+dirty"},
		{"a revision, no module version", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("2292b36abcdef0123456789", "false")}, "dev-2292b36abcde"},
		{"a modified checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("2292b36abcdef0123456789", "true")}, "dev-2292b36abcde-dirty"},
		{"nothing known", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	} {
		if got := versionFrom(&c.bi); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	// Not parallel: it sets Version, as -ldflags would.
	old := Version
	defer func() { Version = old }()
	Version = "v9.9.9"
	out, _, err := run(t, nil, "version")
	if err != nil || !strings.HasPrefix(out, "gaffer v9.9.9\n") || !strings.Contains(out, "tzdata "+tzdata.Version) {
		t.Fatalf("version with -X main.Version=v9.9.9: %q, %v", out, err)
	}
	Version = ""
	bi, _ := debug.ReadBuildInfo()
	if out, _, _ := run(t, nil, "version"); !strings.HasPrefix(out, "gaffer "+versionFrom(bi)+"\n") {
		t.Fatalf("version from the build info: %q, want %q", out, versionFrom(bi))
	}
}
