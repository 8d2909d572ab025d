package tzdata

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

//go:embed zoneinfo.zip
var zoneinfoZip []byte

var (
	indexOnce sync.Once
	index     map[string]*zip.File
	indexErr  error

	// cache holds each zone loaded once. It is bounded by the zones the
	// zip holds (about 600): names that are not in it are never cached.
	cacheMu sync.Mutex
	cache   = map[string]*time.Location{}
)

func readIndex() {
	r, err := zip.NewReader(bytes.NewReader(zoneinfoZip), int64(len(zoneinfoZip)))
	if err != nil {
		indexErr = fmt.Errorf("tzdata: the embedded zoneinfo.zip: %w", err)
		return
	}
	index = make(map[string]*zip.File, len(r.File))
	for _, f := range r.File {
		index[f.Name] = f
	}
}

// LoadLocation returns the zone named name ("America/New_York") from the
// embedded rules, never from $ZONEINFO or the OS. "" and "UTC" are UTC.
// An unknown name ("Local" included: it differs from node to node) is an
// error. Locations are cached, so repeated calls are cheap; it is safe
// for concurrent use.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	cacheMu.Lock()
	loc, ok := cache[name]
	cacheMu.Unlock()
	if ok {
		return loc, nil
	}
	indexOnce.Do(readIndex)
	if indexErr != nil {
		return nil, indexErr
	}
	f, ok := index[name]
	if !ok {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("tzdata: open %s: %w", name, err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("tzdata: read %s: %w", name, err)
	}
	loc, err = time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, fmt.Errorf("tzdata: %s: %w", name, err)
	}
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if cached, ok := cache[name]; ok {
		return cached, nil
	}
	cache[name] = loc
	return loc, nil
}

// Disagreement says, in a sentence for operators, which zone rules the
// live nodes use when they do not all use the same, and "" when they do.
// describe gives a node's id, the tzdata version it reports ("" for a
// node too old to report one), and whether it is live: a node that has
// left fires nothing, so only live ones count.
func Disagreement[N any](nodes []N, describe func(N) (id, version string, live bool)) string {
	byVersion := map[string][]string{}
	for _, n := range nodes {
		if id, v, live := describe(n); live {
			byVersion[v] = append(byVersion[v], id)
		}
	}
	if len(byVersion) < 2 {
		return ""
	}
	keys := make([]string, 0, len(byVersion))
	for v := range byVersion {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, v := range keys {
		nodes := byVersion[v]
		sort.Strings(nodes)
		label := "tzdata " + v
		if v == "" {
			label = "unknown (an older gaffer: its OS's rules)"
		}
		parts = append(parts, label+" on "+strings.Join(nodes, ", "))
	}
	return "live nodes use different time zone rules (" + strings.Join(parts, "; ") +
		"): a cron entry may fire at another instant after a leader change; run one gaffer build on every node"
}
