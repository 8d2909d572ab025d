// Package tzdata holds the IANA time zone rules every Gaffer node uses,
// embedded in the binary, and the one loader that reads them.
//
// A cron entry's fire times depend on its zone's rules. If each node took
// them from its own $ZONEINFO or operating system, two nodes on different
// images could disagree about when an entry fires, and a leader failover
// could move a schedule. So zones are never loaded with time.LoadLocation
// (which prefers $ZONEINFO and the OS): LoadLocation here reads only the
// embedded zoneinfo.zip, whatever the machine holds.
//
// The data is the zoneinfo.zip that ships with the Go toolchain
// ($GOROOT/lib/time, public domain), and Version is its IANA release.
// `go generate ./internal/tzdata` copies both from the toolchain that runs
// it (gen.go); rules change only when a new gaffer binary is built from
// refreshed data. Each node reports Version in the nodes table, and
// Disagreement words it when live nodes differ.
//
// This package must never consult $ZONEINFO, $TZ or the OS zone files.
package tzdata

//go:generate go run gen.go
