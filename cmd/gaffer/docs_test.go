package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

// docs/configuration.md lists every `gaffer server` flag with its
// environment variable (a secret read only from the environment, by its
// variable).
func TestConfigurationDocumentsEveryServerFlag(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := NewMain().serverFlagSet()
	fs.VisitAll(func(f *flag.Flag) {
		if !fs.envOnly[f.Name] && !strings.Contains(string(doc), "`--"+f.Name+"`") {
			t.Errorf("--%s is not in docs/configuration.md", f.Name)
		}
		if env := fs.env[f.Name]; env != "" && !strings.Contains(string(doc), "`"+env+"`") {
			t.Errorf("$%s (--%s) is not in docs/configuration.md", env, f.Name)
		}
	})
}
