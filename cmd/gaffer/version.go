package main

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/gafferhq/gaffer/internal/tzdata"
)

// Version is the release this binary reports, set at build time with
// -ldflags "-X main.Version=…". Left empty, version() reads the build
// information Go stamps into every binary.
var Version = ""

// version is what `gaffer version` prints and a node reports to the
// cluster: Version, else the module version from the build info (a
// tagged `go install …@v1.2.0`, or the pseudo-version go build derives
// from the checkout), else the VCS revision, else "dev".
func version() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return versionFrom(bi)
}

func versionFrom(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return "dev-" + rev
}

func (m *Main) runVersion(_ context.Context, args []string) error {
	fs := m.newFlagSet("version", "version: print the version and the time zone rules built in")
	asJSON := fs.Bool("json", "-", false, `print {"version": …, "tzdata": …}`)
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := needArgs(fs, 0, "no arguments"); err != nil {
		return err
	}
	if *asJSON {
		b, err := jsonLine(map[string]string{"version": version(), "tzdata": tzdata.Version})
		if err != nil {
			return err
		}
		return m.output(true, b, nil)
	}
	fmt.Fprintln(m.Stdout, "gaffer", version())
	fmt.Fprintln(m.Stdout, "time zone rules: tzdata", tzdata.Version)
	return nil
}
