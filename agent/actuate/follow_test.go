package actuate

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/shadowtune/shadowtune/internal/sched"
)

// recordFollower records the read-ahead changes it is told of.
type recordFollower struct{ calls []string }

func (r *recordFollower) FollowReadAhead(disk string, fromKiB, toKiB int) {
	r.calls = append(r.calls, fmt.Sprintf("%s %d->%d", disk, fromKiB, toKiB))
}

// TestReadAheadFollowed: every write of read_ahead_kb that reads back as
// written, and only such writes, is handed to the follower with the value
// before it, by Apply and by Revert, so that the files brought to a new
// value are brought back to the recorded one.
func TestReadAheadFollowed(t *testing.T) {
	e := newEnv(t)
	f := &recordFollower{}
	e.a.SetReadAheadFollower(f)
	orig := e.read(t, "sda", AttrReadAhead)
	steps := []Setting{
		{ReadAheadKiB: 16},
		{ReadAheadKiB: 16}, // no write: not followed
		{Scheduler: "bfq", Tunables: sched.Tunables{"slice_idle": 0}}, // no read-ahead
		{Scheduler: "mq-deadline", ReadAheadKiB: 512},
	}
	for _, s := range steps {
		if _, err := e.a.Apply("sda", s); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.a.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	want := []string{"sda " + orig + "->16", "sda 16->512", "sda 512->" + orig}
	if !slices.Equal(f.calls, want) {
		t.Errorf("followed %q, want %q", f.calls, want)
	}
	e.assertPristine(t, "sda")
}

// TestRevertFollowsWhatSysfsAlreadyHolds (issue 44, F1): a revert that
// finds read_ahead_kb already back at the original (an earlier revert
// wrote it and was killed before its open files followed) still brings
// the files at shadowtune's depth back, from the depth the record says
// shadowtune applied.
func TestRevertFollowsWhatSysfsAlreadyHolds(t *testing.T) {
	e := newEnv(t)
	orig := e.read(t, "sda", AttrReadAhead)
	if _, err := e.a.Apply("sda", Setting{ReadAheadKiB: 16}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.fake.Path("sda", AttrReadAhead), []byte(orig+"\n"), 0o644); err != nil { // the killed revert's write
		t.Fatal(err)
	}
	f := &recordFollower{}
	e.a.SetReadAheadFollower(f)
	if err := e.a.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sda 16->" + orig}; !slices.Equal(f.calls, want) {
		t.Errorf("followed %q, want %q", f.calls, want)
	}
	e.assertPristine(t, "sda")
}
