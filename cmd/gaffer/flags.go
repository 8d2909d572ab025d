package main

import (
	"flag"
	"fmt"
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
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), m: m, env: map[string]string{}, envOnly: map[string]bool{}}
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(m.Stderr, "Usage: gaffer %s\n\n", usage)
		fs.VisitAll(func(f *flag.Flag) {
			name, help := flag.UnquoteUsage(f)
			fmt.Fprintf(m.Stderr, "  --%s %s\n    \t%s", f.Name, name, help)
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
				fmt.Fprintf(m.Stderr, " (default %s)", f.DefValue)
			}
			if v := fs.env[f.Name]; v != "" {
				fmt.Fprintf(m.Stderr, " [$%s]", v)
			}
			fmt.Fprintln(m.Stderr)
		})
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

// parse reads the command line (flags and positional arguments in any
// order), then fills flags not given there from their environment
// variables. A bad variable value is an error naming it. Positional
// arguments are in fs.args.
func (fs *flagSet) parse(args []string) error {
	if fs.m.collect != nil {
		fs.describe(fs.m.collect)
		return errCollected
	}
	fs.args = nil
	for {
		if err := fs.FlagSet.Parse(args); err != nil {
			return err
		}
		rest := fs.FlagSet.Args()
		if len(rest) == 0 {
			break
		}
		if rest[0] == "--" {
			fs.args = append(fs.args, rest[1:]...)
			break
		}
		fs.args = append(fs.args, rest[0])
		args = rest[1:]
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
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
