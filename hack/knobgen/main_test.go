package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "types.go")
	src := "// doc\n" + markerPrefix + `rule="self.scheduler == 'x'",message="old"` + "\n" +
		markerPrefix + `rule="self.min <= self.max"` + "\n" +
		markerPrefix + `rule="!(self.name in ['a']) || self.max <= 1"` + "\n" +
		markerPrefix + `rule="(self.name != 'a' || self.max <= 9)"` + "\ntype T struct{}\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewrite(f, []string{`rule="self.scheduler == 'y'"`, `rule="!(self.name in ['b'])"`, `rule="(self.name != 'b')"`}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f)
	for _, want := range []string{`'y'`, `['b']`, `(self.name != 'b')`, `self.min <= self.max`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("rewritten file lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), `'x'`) {
		t.Errorf("old rule left:\n%s", got)
	}
	// A file without the markers is an error and is left alone.
	if err := os.WriteFile(f, []byte("type T struct{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewrite(f, []string{"a", "b", "c"}); err == nil || !strings.Contains(err.Error(), "0 markers") {
		t.Errorf("rewrite of a file without markers: %v, want a 0 markers error", err)
	}
}
