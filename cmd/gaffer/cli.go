package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gafferhq/gaffer/internal/tzdata"
)

// The command line is parsed by cobra (help, suggestions, completion).
// Each command still declares its flags where it reads them, on a
// flagSet (flags.go) that adds environment variables: the tree cobra
// runs is built from those declarations (commandTree), and when cobra
// has parsed a command line, flagSet.parse takes the values from it.

// globalFlags are accepted anywhere on the command line, before the
// command too (gaffer --json jobs list). The client flags among them are
// declared by each API command too (addClientFlags), with their
// environment variables; cobra parses them here.
func globalFlags(fs *pflag.FlagSet) {
	fs.String("url", "http://127.0.0.1:8080", "the Gaffer API [$GAFFER_URL]")
	fs.String("token", "", "API token [$GAFFER_TOKEN]")
	fs.Bool("json", false, "print JSON instead of a table: -o json [$GAFFER_JSON]")
	fs.StringP("output", "o", "", "how to print: table or json (errors too, as {\"error\": {...}} on stderr) [$GAFFER_OUTPUT]")
	fs.Bool("utc", false, "print times in UTC instead of the local time zone [$GAFFER_UTC]")
}

// inherited are the client flags a command takes from the root's global
// flags instead of declaring its own (dev's --token is its own).
var inherited = map[string]string{"url": "GAFFER_URL", "token": "GAFFER_TOKEN", "json": "GAFFER_JSON"}

// rootCommand builds the cobra tree whose commands run on m.
func (m *Main) rootCommand(ctx context.Context) (*cobra.Command, error) {
	tree, err := commandTree(ctx)
	if err != nil {
		return nil, err
	}
	root := &cobra.Command{
		Use:           "gaffer",
		Short:         "Gaffer runs jobs, cron entries and workflows on PostgreSQL",
		Long:          "gaffer runs Gaffer nodes and talks to a Gaffer cluster.",
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          m.groupRun("no command given"),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return m.readGlobalFlags(cmd)
		},
	}
	root.SetVersionTemplate("gaffer {{.Version}}\ntime zone rules: tzdata " + tzdata.Version + "\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(m.Stdin)
	root.SetOut(m.Stdout)
	root.SetErr(m.Stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError(flagError(cmd, err))
	})
	globalFlags(root.PersistentFlags())
	for _, spec := range tree.subs {
		root.AddCommand(m.cobraCommand(spec, "gaffer"))
	}
	m.registerCompletions(root)
	return root, nil
}

// readGlobalFlags reads -o and --utc (or their variables) into m.
func (m *Main) readGlobalFlags(cmd *cobra.Command) error {
	out := cmd.Flags().Lookup("output")
	m.format = out.Value.String()
	if !out.Changed {
		m.format = m.Getenv("GAFFER_OUTPUT")
	}
	switch m.format {
	case "", "table":
	case "json":
		m.jsonErrors = true
	default:
		return usageError(fmt.Sprintf("-o %q: the formats are table and json", m.format))
	}
	utc := cmd.Flags().Lookup("utc")
	on := utc.Changed && utc.Value.String() == "true"
	if !utc.Changed && m.Getenv("GAFFER_UTC") != "" {
		var err error
		if on, err = strconv.ParseBool(m.Getenv("GAFFER_UTC")); err != nil {
			return usageError(fmt.Sprintf("$GAFFER_UTC: %v", err))
		}
	}
	if on {
		m.Location = time.UTC
	}
	return nil
}

// cobraCommand is spec as a cobra command under parent (its path).
func (m *Main) cobraCommand(spec *cmdSpec, parent string) *cobra.Command {
	path := parent + " " + spec.name
	if len(spec.subs) > 0 {
		cmd := &cobra.Command{
			Use:   spec.name + " <command> [flags]",
			Short: spec.summary,
			Args:  cobra.ArbitraryArgs,
			RunE:  m.groupRun(spec.name + " needs a command"),
		}
		for _, sub := range spec.subs {
			cmd.AddCommand(m.cobraCommand(sub, path))
		}
		return cmd
	}
	use, long := splitUsage(spec.fs.usage, strings.TrimPrefix(path, "gaffer "))
	cmd := &cobra.Command{
		Use:       spec.name + use,
		Short:     spec.summary,
		Long:      long,
		Args:      cobra.ArbitraryArgs,
		ValidArgs: spec.fs.choices,
		RunE: func(cmd *cobra.Command, args []string) error {
			m.cmd, m.args = cmd, args
			return spec.run(m, cmd.Context(), args)
		},
	}
	if cmd.Short == "" {
		cmd.Short = strings.SplitN(long, "\n", 2)[0]
	}
	cmd.Hidden = spec.hidden
	var envOnly []string
	spec.fs.VisitAll(func(f *flag.Flag) {
		env := spec.fs.env[f.Name]
		if inherited[f.Name] != "" && inherited[f.Name] == env {
			return
		}
		pf := pflag.PFlagFromGoFlag(f)
		if env != "" {
			pf.Usage += " [$" + env + "]"
		}
		if spec.fs.envOnly[f.Name] {
			pf.Hidden = true // given on the command line it is refused
			envOnly = append(envOnly, fmt.Sprintf("  $%s\t%s", env, f.Usage))
		}
		cmd.Flags().AddFlag(pf)
	})
	if len(envOnly) > 0 {
		cmd.Long += "\n\nRead only from the environment:\n" + strings.Join(envOnly, "\n")
	}
	return cmd
}

// splitUsage turns a flagSet's usage ("jobs get ID [flags]", then a
// blank line and what the command does; or "cluster [flags]: what it
// does") into cobra's Use after the command's name and its Long text.
func splitUsage(usage, path string) (use, long string) {
	synopsis, long, _ := strings.Cut(usage, "\n\n")
	synopsis, rest, _ := strings.Cut(synopsis, "\n")
	if s, what, ok := strings.Cut(synopsis, ": "); ok {
		synopsis, long = s, strings.TrimSpace(what+"\n\n"+long)
	}
	if rest != "" {
		long = strings.TrimSpace(rest + "\n\n" + long)
	}
	synopsis = strings.TrimSuffix(synopsis, ":")
	use = strings.TrimPrefix(synopsis, path)
	if use == synopsis { // a synopsis that does not start with the command
		use = " [flags]"
	}
	return use, long
}

// groupRun runs a command that only groups others: without one it prints
// the group's help and the error missing; with an unknown one it
// suggests the nearest.
func (m *Main) groupRun(missing string) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			fmt.Fprint(m.Stderr, cmd.UsageString())
			var names []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() && c.Name() != "help" {
					names = append(names, c.Name())
				}
			}
			if cmd.HasParent() {
				missing += ": " + strings.Join(names, ", ")
			}
			return usageError(missing)
		}
		if args[0] == "help" && len(args) == 1 { // gaffer jobs help, as before cobra
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := nearest(cmd, args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return usageError(msg + "\n\nRun '" + cmd.CommandPath() + " --help' for its commands.")
	}
}

// nearest are the commands under cmd nearest to typed (at most two
// edits away, or starting with it): only the nearest, so lst suggests
// list and not get as well.
func nearest(cmd *cobra.Command, typed string) []string {
	cmd.SuggestionsMinimumDistance = 2
	best, out := -1, []string(nil)
	for _, s := range cmd.SuggestionsFor(typed) {
		d := editDistance(strings.ToLower(typed), s)
		switch {
		case best < 0 || d < best:
			best, out = d, []string{s}
		case d == best:
			out = append(out, s)
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

var shorthandError = regexp.MustCompile(`unknown shorthand flag: '.' in (-[^=]*)`)

// flagError words a flag error once, with the flag as it is spelled.
func flagError(cmd *cobra.Command, err error) string {
	msg := err.Error()
	if sub := shorthandError.FindStringSubmatch(msg); sub != nil {
		msg = "unknown flag: " + sub[1]
	}
	return msg + "\nRun '" + cmd.CommandPath() + " --help' for its flags."
}

var singleDash = regexp.MustCompile(`^-([a-zA-Z][a-zA-Z0-9-]+)(=.*)?$`)

// normalizeArgs spells a long flag given with one dash (-json, as Go's
// flag package took it and scripts may still say) with two, so cobra
// reads it. Only names some command takes as a long flag are touched.
func normalizeArgs(root *cobra.Command, args []string) []string {
	long := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { long[f.Name] = len(f.Name) > 1 })
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, len(args))
	for i, a := range args {
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if sub := singleDash.FindStringSubmatch(a); sub != nil && long[sub[1]] {
			a = "-" + a
		}
		out[i] = a
	}
	return out
}

// jsonLine encodes v as one line of JSON, < > & as typed.
func jsonLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// The command tree cobra runs is built from the commands themselves:
// commandTree runs every command and action in a mode where parsing its
// flags describes them instead (Main.collect), so a new flag or action is
// parsed, helped and completed without touching this file.

// errCollected ends a command run only to describe it.
var errCollected = errors.New("command described, not run")

// cmdSpec is a command as it described itself.
type cmdSpec struct {
	name    string
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
	// fs is a command's flag set, with its usage and positional choices
	// (migrate up…); nil for a group.
	fs *flagSet
	// subs are a group's actions (jobs list…).
	subs []*cmdSpec
	// hidden commands are left out of help and completion (dev-node,
	// which gaffer dev starts).
	hidden bool
}

// collectActions describes each of a group's actions into m.collect.
func (m *Main) collectActions(ctx context.Context, group string, actions []action) error {
	spec := m.collect
	defer func() { m.collect = spec }()
	for _, a := range actions {
		sub := &cmdSpec{name: a.name, summary: a.summary, run: a.run}
		m.collect = sub
		if err := a.run(m, ctx, nil); !errors.Is(err, errCollected) {
			return fmt.Errorf("%s %s did not describe itself: %v", group, a.name, err)
		}
		spec.subs = append(spec.subs, sub)
	}
	return errCollected
}

// commandTree describes every command, its actions and their flags.
func commandTree(ctx context.Context) (*cmdSpec, error) {
	root := &cmdSpec{name: "gaffer"}
	for _, c := range commands() {
		spec := &cmdSpec{name: c.name, summary: c.summary, run: c.run, hidden: hiddenCommands[c.name]}
		m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }, collect: spec}
		if err := c.run(m, ctx, nil); !errors.Is(err, errCollected) {
			return nil, fmt.Errorf("%s did not describe itself: %v", c.name, err)
		}
		root.subs = append(root.subs, spec)
	}
	return root, nil
}
