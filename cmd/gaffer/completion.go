package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gafferhq/gaffer/job"
)

func (m *Main) runCompletion(ctx context.Context, args []string) error {
	fs := m.newFlagSet("completion", `completion bash|zsh|fish

Prints a script that completes gaffer's commands, flags and their values
(job states; queues, cron entries and nodes as the API at $GAFFER_URL lists
them, with $GAFFER_TOKEN):
  bash: source <(gaffer completion bash)      (e.g. in ~/.bashrc)
  zsh:  source <(gaffer completion zsh)       (after compinit, e.g. in ~/.zshrc)
  fish: gaffer completion fish > ~/.config/fish/completions/gaffer.fish`)
	fs.choices = []string{"bash", "fish", "zsh"}
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || !slices.Contains(fs.choices, fs.Arg(0)) {
		fs.Usage()
		return usageError("completion needs a shell: bash, zsh or fish")
	}
	root := m.cmd.Root()
	switch fs.Arg(0) {
	case "bash":
		fmt.Fprint(m.Stdout, bashWordsFallback)
		return root.GenBashCompletionV2(m.Stdout, true)
	case "zsh":
		return root.GenZshCompletion(m.Stdout)
	default:
		return root.GenFishCompletion(m.Stdout, true)
	}
}

// bashWordsFallback stands in for the bash-completion package's
// _get_comp_words_by_ref, which cobra's bash script calls, where that
// package is not installed: the script then still works (words split as
// bash splits them, at = and : too).
const bashWordsFallback = `# Where the bash-completion package is not loaded, a minimal stand-in
# for its _get_comp_words_by_ref.
if ! declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
_get_comp_words_by_ref() {
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
}
fi

`

// Values completed from the API: which commands' flags and arguments.
var (
	queueFlagCommands = []string{"jobs enqueue", "jobs list", "dlq list", "dlq replay", "dlq purge", "cron add", "cron update", "limits set"}
	stateFlagCommands = []string{"jobs list"}
	cronArgCommands   = []string{"cron get", "cron pause", "cron resume", "cron trigger", "cron history", "cron next", "cron delete", "cron update"}
	nodeArgCommands   = []string{"nodes drain", "nodes undrain"}
	queueArgCommands  = []string{"queues pause", "queues resume"}
)

// registerCompletions adds value completion to the tree under root.
func (m *Main) registerCompletions(root *cobra.Command) {
	find := func(path string) *cobra.Command {
		c, _, err := root.Find(strings.Fields(path))
		if err != nil || c == root {
			return nil
		}
		return c
	}
	states := make([]string, len(job.States))
	for i, s := range job.States {
		states[i] = string(s)
	}
	for _, p := range stateFlagCommands {
		if c := find(p); c != nil && c.Flags().Lookup("state") != nil {
			c.RegisterFlagCompletionFunc("state", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				// --state takes a comma-separated list: complete its last item.
				done := toComplete[:strings.LastIndex(toComplete, ",")+1]
				var out []string
				for _, s := range states {
					if !slices.Contains(strings.Split(done, ","), s) {
						out = append(out, done+s)
					}
				}
				return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
			})
		}
	}
	for _, p := range queueFlagCommands {
		if c := find(p); c != nil && c.Flags().Lookup("queue") != nil {
			c.RegisterFlagCompletionFunc("queue", m.completeFromAPI("/v1/queues", "name"))
		}
	}
	positional := func(paths []string, fn cobra.CompletionFunc) {
		for _, p := range paths {
			if c := find(p); c != nil {
				c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
					if len(args) > 0 {
						return nil, cobra.ShellCompDirectiveNoFileComp
					}
					return fn(cmd, args, toComplete)
				}
			}
		}
	}
	positional(cronArgCommands, m.completeFromAPI("/v1/cron", "name"))
	positional(nodeArgCommands, m.completeFromAPI("/v1/nodes", "id"))
	positional(queueArgCommands, m.completeFromAPI("/v1/queues", "name"))
}

// completeFromAPI completes from the field key of the list at path, read
// from the API the command would talk to (--url/--token, else
// $GAFFER_URL/$GAFFER_TOKEN). An API it cannot reach, or a refusal, gives
// no suggestions and no error: completion must not get in the way.
func (m *Main) completeFromAPI(path, key string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		setting := func(flag, env, def string) string {
			if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
				return f.Value.String()
			}
			if v := m.Getenv(env); v != "" {
				return v
			}
			return def
		}
		base := setting("url", "GAFFER_URL", "http://127.0.0.1:8080")
		if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c := &apiClient{base: strings.TrimRight(base, "/"), token: setting("token", "GAFFER_TOKEN", ""), http: &http.Client{Timeout: 2 * time.Second}}
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
		defer cancel()
		var page listPage[map[string]any]
		if err := c.do(ctx, "GET", path+"?limit=500", nil, &page); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, row := range page.Data {
			if s, ok := row[key].(string); ok && strings.HasPrefix(s, toComplete) {
				out = append(out, s)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
