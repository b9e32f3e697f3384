package loopdev

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResetScheduler: a loop device that comes with a scheduler an
// earlier user left (here set by the test on its own device) is given
// back none, the loop driver's own start, and one already at none is
// left alone.
func TestResetScheduler(t *testing.T) {
	name := New(t, 16<<20)
	p := filepath.Join("/sys/block", name, "queue", "scheduler")
	read := func() string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read(); Current(got) != "none" {
		t.Fatalf("a fresh attachment: %q, want none active", got)
	}
	if !slices.Contains(Offered(read()), "mq-deadline") {
		t.Fatalf("%s offers no mq-deadline (%q): nothing to leave behind", name, read())
	}
	if err := os.WriteFile(p, []byte("mq-deadline"), 0); err != nil {
		t.Fatal(err)
	}
	resetScheduler(t, name)
	if got := read(); Current(got) != "none" {
		t.Errorf("after the reset: %q, want none active", got)
	}
	resetScheduler(t, name)
	if got := read(); Current(got) != "none" {
		t.Errorf("a second reset: %q, want none active", got)
	}
}
