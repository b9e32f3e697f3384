package app

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestDocsCoverCommands: docs/cli.md names every visible command, and the
// README stays short, with the two set-up commands near its top (issue 17).
func TestDocsCoverCommands(t *testing.T) {
	cli, err := os.ReadFile("../../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	walk(NewRootCommand(), func(c *cobra.Command) {
		if c.Hidden || !c.Runnable() || c.Parent() == nil {
			return
		}
		name := strings.TrimPrefix(c.CommandPath(), "shadowtune ")
		if !strings.Contains(string(cli), "`"+name) {
			t.Errorf("docs/cli.md does not name %q", name)
		}
	})
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	if n := len(lines); n > 251 { // a final newline makes one empty element
		t.Errorf("README.md has %d lines, want at most 250", n-1)
	}
	top := strings.Join(lines[:min(60, len(lines))], "\n")
	for _, cmd := range []string{"make quickstart", "make test"} {
		if !strings.Contains(top, cmd) {
			t.Errorf("README.md's first 60 lines lack %q", cmd)
		}
	}
}
