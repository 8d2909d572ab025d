package pgserver

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the kernel's clock tick for the times in /proc/<pid>/stat
// (USER_HZ: 100 on every Linux this runs on).
const userHZ = 100

// CPU is the processor time a local PostgreSQL instance has used since
// it started: its postmaster's own, that of its children that have
// exited (the kernel adds a reaped child's time to its parent's), and
// that of its live children. A short-lived backend — one connection of a
// benchmark's pool, an autovacuum worker — counts too, which a sum over
// the live processes misses; another instance on the machine does not.
// The instance is named by its postmaster's pid (PostmasterOf finds it
// from one of its backends'). Linux only: it reads /proc.
func CPU(postmaster int) (time.Duration, error) {
	pm, err := readStat(postmaster)
	if err != nil {
		return 0, fmt.Errorf("postgres cpu: %w", err)
	}
	ticks := pm.utime + pm.stime + pm.cutime + pm.cstime
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("postgres cpu: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue
		}
		s, err := readStat(pid)
		if err != nil || s.ppid != postmaster {
			continue // gone meanwhile, or not the instance's
		}
		ticks += s.utime + s.stime
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// PostmasterOf is the pid of the postmaster whose child backend is: what
// SELECT pg_backend_pid() answers on a connection to a local server.
func PostmasterOf(backend int) (int, error) {
	s, err := readStat(backend)
	if err != nil {
		return 0, fmt.Errorf("postmaster of backend %d: %w", backend, err)
	}
	return s.ppid, nil
}

type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// readStat reads the fields of /proc/<pid>/stat this needs. The command
// name (field 2) is in parentheses and may hold spaces: the fields after
// it are counted from its closing parenthesis.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 || end+2 > len(s) {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[end+2:]) // f[0] is field 3, the state
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var st procStat
	var errs [5]error
	st.ppid, errs[0] = strconv.Atoi(f[1])
	st.utime, errs[1] = strconv.ParseInt(f[11], 10, 64)
	st.stime, errs[2] = strconv.ParseInt(f[12], 10, 64)
	st.cutime, errs[3] = strconv.ParseInt(f[13], 10, 64)
	st.cstime, errs[4] = strconv.ParseInt(f[14], 10, 64)
	for _, err := range errs {
		if err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return st, nil
}
