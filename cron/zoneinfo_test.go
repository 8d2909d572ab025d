package cron

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fixedTZif is a version 1 tzfile (RFC 8536) for a zone that is always
// offset seconds east of UTC, named abbr.
func fixedTZif(offset int32, abbr string) []byte {
	var b bytes.Buffer
	b.WriteString("TZif")
	b.Write(make([]byte, 16)) // version 1, reserved
	// isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
	for _, n := range []uint32{0, 0, 0, 0, 1, uint32(len(abbr) + 1)} {
		binary.Write(&b, binary.BigEndian, n)
	}
	binary.Write(&b, binary.BigEndian, offset) // the one local time type
	b.Write([]byte{0, 0})                      // not DST; its name at 0
	b.WriteString(abbr + "\x00")
	return b.Bytes()
}

// Zone rules come from the binary, never from $ZONEINFO or the OS: with
// ZONEINFO holding a New York that is always UTC+5, "30 2 * * *" in
// America/New_York still previews 07:30Z (02:30 EST), as on every other
// node. $ZONEINFO is read once per process, so the check runs in a child
// process started with it.
func TestZoneRulesIgnoreZONEINFO(t *testing.T) {
	if os.Getenv("GAFFER_TEST_ALTERED_ZONEINFO") != "" {
		zoneRulesChild(t)
		return
	}
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "America"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "America", "New_York"), fixedTZif(5*3600, "BAD"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestZoneRulesIgnoreZONEINFO$", "-test.v")
	cmd.Env = append(os.Environ(), "GAFFER_TEST_ALTERED_ZONEINFO=1", "ZONEINFO="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with ZONEINFO=%s: %v\n%s", dir, err, out)
	}
	if !strings.Contains(string(out), "zone rules checked") {
		t.Fatalf("the child did not run the check:\n%s", out)
	}
}

func zoneRulesChild(t *testing.T) {
	// The environment is hostile: the standard library takes the altered rules.
	std, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	if _, off := time.Date(2026, 1, 15, 12, 0, 0, 0, std).Zone(); off != 5*3600 {
		t.Fatalf("time.LoadLocation ignored ZONEINFO (offset %d): this test checks nothing", off)
	}
	s, err := Parse("30 2 * * *", "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	got := fmtAll(NextN(s, utc("2026-01-14T12:00:00Z"), 2))
	if want := "2026-01-15T07:30:00Z 2026-01-16T07:30:00Z"; got != want {
		t.Fatalf("30 2 * * * in America/New_York previews %s, want %s", got, want)
	}
	loc, err := LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	if name, off := time.Date(2026, 7, 1, 12, 0, 0, 0, loc).Zone(); name != "EDT" || off != -4*3600 {
		t.Fatalf("LoadLocation: July in New York is %s %d, want EDT -14400", name, off)
	}
	t.Log("zone rules checked")
}
