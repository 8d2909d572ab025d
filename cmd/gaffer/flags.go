package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// flagSet is a flag.FlagSet whose flags also read an environment
// variable: the command line wins, then the variable, then the default.
type flagSet struct {
	*flag.FlagSet
	m       *Main
	env     map[string]string // flag name → variable
	envOnly map[string]bool   // secrets: refused on the command line
	args    []string          // positional arguments
	// choices are the values the first positional argument may take, for
	// shell completion; nil when it is free (or there is none).
	choices []string
	// usage is the synopsis, then (after a blank line) what the command
	// does: the help cobra prints.
	usage string
}

// NArg and Arg read the positional arguments, wherever they stood.
func (fs *flagSet) NArg() int { return len(fs.args) }

// Arg returns the i'th positional argument, or "".
func (fs *flagSet) Arg(i int) string {
	if i < len(fs.args) {
		return fs.args[i]
	}
	return ""
}

// Args returns the positional arguments.
func (fs *flagSet) Args() []string { return fs.args }

func (m *Main) newFlagSet(name, usage string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), m: m, usage: usage, env: map[string]string{}, envOnly: map[string]bool{}}
	fs.SetOutput(io.Discard) // cobra parses the command line and prints help
	fs.Usage = func() {
		if m.cmd != nil && !m.jsonErrors {
			fmt.Fprintf(m.Stderr, "Usage: %s\nRun '%s --help' for its flags.\n", m.cmd.UseLine(), m.cmd.CommandPath())
		}
	}
	return fs
}

// envVar names the variable for a flag: GAFFER_ + upper snake case.
func envVar(flagName string) string {
	return "GAFFER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// bind ties a flag to a variable: env, or GAFFER_<FLAG> when env is "",
// or none when env is "-".
func (fs *flagSet) bind(name, env string) {
	switch env {
	case "-":
		return
	case "":
		env = envVar(name)
	}
	fs.env[name] = env
}

func (fs *flagSet) String(name, env, def, usage string) *string {
	fs.bind(name, env)
	return fs.FlagSet.String(name, def, usage)
}

// Secret is a string read only from its environment variable
// (GAFFER_<FLAG>): a command line is visible to every local user in ps,
// so giving it there is an error.
func (fs *flagSet) Secret(name, usage string) *string {
	fs.bind(name, "")
	fs.envOnly[name] = true
	return fs.FlagSet.String(name, "", usage+" (environment only: a command line is visible to every user in ps)")
}

func (fs *flagSet) Int(name, env string, def int, usage string) *int {
	fs.bind(name, env)
	return fs.FlagSet.Int(name, def, usage)
}

func (fs *flagSet) Int64(name, env string, def int64, usage string) *int64 {
	fs.bind(name, env)
	return fs.FlagSet.Int64(name, def, usage)
}

func (fs *flagSet) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	fs.bind(name, env)
	return fs.FlagSet.Duration(name, def, usage)
}

func (fs *flagSet) Bool(name, env string, def bool, usage string) *bool {
	fs.bind(name, env)
	return fs.FlagSet.Bool(name, def, usage)
}

// parse takes the values cobra parsed from the command line (flags and
// positional arguments in any order, global flags anywhere), then fills
// flags not given there from their environment variables. A bad variable
// value is an error naming it. Positional arguments are in fs.args.
//
// While the command tree is being built (Main.collect), parse records the
// flag set instead and returns errCollected: every command declares its
// flags once, where it reads them.
func (fs *flagSet) parse(args []string) error {
	if fs.m.collect != nil {
		fs.m.collect.fs = fs
		return errCollected
	}
	fs.args = args
	given := map[string]bool{}
	if cmd := fs.m.cmd; cmd != nil {
		fs.args = fs.m.args
		var err error
		fs.VisitAll(func(f *flag.Flag) {
			pf := cmd.Flags().Lookup(f.Name)
			if err != nil || pf == nil || !pf.Changed {
				return
			}
			given[f.Name] = true
			if e := fs.Set(f.Name, pf.Value.String()); e != nil {
				err = usageError(fmt.Sprintf("--%s: %v", f.Name, e))
			}
		})
		if err != nil {
			return err
		}
		if fs.Lookup("json") != nil && fs.m.format != "" {
			if given["json"] && fs.m.format != "json" {
				return usageError("--json is -o json: give one or the other")
			}
			given["json"] = true
			fs.Set("json", strconv.FormatBool(fs.m.format == "json"))
		}
		if v := fs.Lookup("json"); v != nil && given["json"] && v.Value.String() == "true" {
			fs.m.jsonErrors = true
		}
	}
	for name := range fs.envOnly {
		if given[name] {
			return usageError(fmt.Sprintf("--%s is read only from $%s, never from the command line, where ps shows it to every user", name, fs.env[name]))
		}
	}
	names := make([]string, 0, len(fs.env))
	for n := range fs.env {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		env := fs.env[name]
		v := fs.m.Getenv(env)
		if given[name] || v == "" {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return usageError(fmt.Sprintf("$%s: %v", env, err))
		}
	}
	return nil
}

// parseQueues reads "default=10,mail=5" (a bare name means concurrency 10).
func parseQueues(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, n, found := strings.Cut(part, "=")
		conc := 10
		if found {
			var err error
			if conc, err = strconv.Atoi(n); err != nil || conc < 1 {
				return nil, fmt.Errorf("queue %q: concurrency must be a positive integer, got %q", name, n)
			}
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("queue %q listed twice", name)
		}
		out[name] = conc
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no queues given")
	}
	return out, nil
}

// Strings is a flag that may be given many times (--tag a --tag b), in
// order; no environment variable.
func (fs *flagSet) Strings(name, usage string) *[]string {
	v := &stringsValue{}
	fs.FlagSet.Var(v, name, usage+" (repeat the flag for several)")
	return &v.values
}

// stringsValue is a repeatable flag's values. Its text is the values as
// a JSON array, which Set takes back whole: parse copies a flag's value
// from cobra's parse of the command line as text.
type stringsValue struct{ values []string }

func (v *stringsValue) String() string {
	if v == nil || len(v.values) == 0 {
		return ""
	}
	b, _ := json.Marshal(v.values)
	return string(b)
}

func (v *stringsValue) Set(s string) error {
	var all []string
	if strings.HasPrefix(s, `["`) && json.Unmarshal([]byte(s), &all) == nil {
		v.values = append(v.values, all...)
		return nil
	}
	v.values = append(v.values, s)
	return nil
}
