package actuate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shadowtune/shadowtune/agent/actuate/actuatetest"
	"github.com/shadowtune/shadowtune/internal/sched"
)

type sysWriteOp struct{ attr, value string }

// TestRevertLeavesOtherWriters: a revert (by a new Actuator, as `run
// --revert` after the agent was killed) restores each knob that holds a
// value of shadowtune's (the original, the last applied, the target of a
// change in progress) and leaves one another writer changed since, saying
// so, with the scheduler's tunables when the scheduler is the writer's.
func TestRevertLeavesOtherWriters(t *testing.T) {
	kyber := Setting{Scheduler: "kyber", ReadAheadKiB: 1024}
	tests := []struct {
		name     string
		settings []Setting // applied cleanly
		crash    *Setting  // then applied by a child killed at point
		point    string
		old      bool         // the record is stripped of "applied" (an older agent's)
		writer   []sysWriteOp // another writer, after the agent
		want     map[string]string
		left     []string
	}{
		{name: "writer changed the scheduler: left, read-ahead restored", settings: []Setting{kyber},
			writer: []sysWriteOp{{AttrScheduler, "bfq"}},
			want:   map[string]string{AttrScheduler: "[bfq]", AttrReadAhead: "128"},
			left:   []string{"scheduler left at bfq: changed by another writer since shadowtune set kyber"}},
		{name: "writer changed read-ahead only: scheduler restored, read-ahead left", settings: []Setting{kyber},
			writer: []sysWriteOp{{AttrReadAhead, "256"}},
			want:   map[string]string{AttrScheduler: "[mq-deadline]", AttrReadAhead: "256", "queue/iosched/read_expire": "500"},
			left:   []string{"read_ahead_kb left at 256: changed by another writer since shadowtune set 1024"}},
		{name: "writer changed a tunable of the original scheduler: left", settings: []Setting{{ReadAheadKiB: 1024}},
			writer: []sysWriteOp{{"queue/iosched/read_expire", "248"}},
			want:   map[string]string{AttrScheduler: "[mq-deadline]", AttrReadAhead: "128", "queue/iosched/read_expire": "248", "queue/iosched/fifo_batch": "16"},
			left:   []string{"queue/iosched/read_expire left at 248: changed by another writer since shadowtune left it at its original 500"}},
		{name: "writer set shadowtune's own tunable value back: restored", settings: []Setting{{Tunables: sched.Tunables{"fifo_batch": 32}}},
			writer: []sysWriteOp{{"queue/iosched/fifo_batch", "16"}}},
		{name: "crash after the record write, before any sysfs write: restored", settings: []Setting{kyber},
			crash: &Setting{Scheduler: "none", ReadAheadKiB: 512}, point: "journaled"},
		{name: "crash after the sysfs write, before the record update: restored", settings: []Setting{kyber},
			crash: &Setting{Scheduler: "none", ReadAheadKiB: 512}, point: "wrote " + AttrReadAhead},
		{name: "first change crashed after the sysfs write: restored",
			crash: &kyber, point: "wrote " + AttrScheduler},
		{name: "crash mid-change, then a writer: left", settings: []Setting{kyber},
			crash: &Setting{Scheduler: "none", ReadAheadKiB: 512}, point: "wrote " + AttrScheduler,
			writer: []sysWriteOp{{AttrScheduler, "bfq"}},
			want:   map[string]string{AttrScheduler: "[bfq]", AttrReadAhead: "128"},
			left:   []string{"scheduler left at bfq: changed by another writer since shadowtune set kyber (or was setting none)"}},
		{name: "record of an older agent: every knob restored, as before", settings: []Setting{kyber}, old: true,
			writer: []sysWriteOp{{AttrScheduler, "bfq"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			for _, s := range tc.settings {
				if _, err := e.a.Apply("sda", s); err != nil {
					t.Fatal(err)
				}
			}
			e.a.Close()
			if tc.crash != nil {
				runCrashChild(t, envCrashRoot+"="+e.root, envCrashState+"="+e.stateDir, envCrashPoint+"="+tc.point,
					envCrashDev+"=sda", envCrashSet+"="+settingsJSON(t, *tc.crash))
			}
			if tc.old {
				stripApplied(t, filepath.Join(e.stateDir, "sda.json"))
			}
			for _, w := range tc.writer {
				if err := e.fake.Write("sda", w.attr, w.value); err != nil {
					t.Fatal(err)
				}
			}
			// `state list` reads the record.
			if l, err := List(Options{Store: e.fake, StateDir: e.stateDir}); err != nil || len(l) != 1 || l[0].Status != StatusPresent {
				t.Fatalf("List = %+v, %v", l, err)
			}
			a := e.open(t)
			done, err := a.RevertAll()
			var re *RevertError
			var left []string
			if errors.As(err, &re) {
				if !re.AllRestored() || len(re.Gone)+len(re.RecordKept) > 0 {
					t.Fatalf("RevertAll: %v", err)
				}
				for _, d := range re.Left {
					var le *LeftError
					if !errors.As(d.Err, &le) || !errors.Is(d.Err, ErrOtherWriter) || le.Device != "sda" {
						t.Errorf("Left entry %v", d.Err)
					}
					left = append(left, le.Left...)
				}
			} else if err != nil {
				t.Fatalf("RevertAll: %v", err)
			}
			if !slices.Equal(done, []string{"sda"}) || !slices.Equal(left, tc.left) {
				t.Errorf("RevertAll = %v, left %q; want [sda], left %q", done, left, tc.left)
			}
			if tc.want == nil {
				e.assertPristine(t, "sda")
			}
			for attr, v := range tc.want {
				if got := e.read(t, "sda", attr); !strings.Contains(got, v) {
					t.Errorf("%s = %q, want %q", attr, got, v)
				}
			}
			if len(a.Originals()) != 0 {
				t.Errorf("record kept: %+v", a.Originals())
			}
		})
	}
}

// stripApplied removes "applied" from a state file, as an older agent
// wrote it.
func stripApplied(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["applied"]; !ok {
		t.Fatalf("no applied in %s", b)
	}
	delete(m, "applied")
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFullStateDirRefusesUnrecordedChange: when the journal of a change
// cannot be written (ENOSPC), a change to values the record does not hold
// is refused: the device and the record on disk stay as they were (else a
// crash would leave a value a revert takes for another writer's). A change
// back to recorded values is made (TestFullStateDirChangeBack).
func TestFullStateDirRefusesUnrecordedChange(t *testing.T) {
	e := newEnv(t)
	mnt := mountFS(t, "tmpfs", "size=64k")
	stateDir := filepath.Join(mnt, "state")
	a, err := NewWithStore(e.fake, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Apply("sda", Setting{Scheduler: "kyber", ReadAheadKiB: 1024}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(stateDir, "sda.json")
	rec, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fill := filepath.Join(mnt, "fill")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Close()
	n := len(e.fake.Writes())
	_, err = a.Apply("sda", Setting{Scheduler: "none", ReadAheadKiB: 512})
	var rerr *RecordError
	if !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &rerr) || !rerr.NotChanged || !strings.Contains(err.Error(), "not changed") {
		t.Fatalf("Apply on a full state fs = %v, want a refusal (ENOSPC)", err)
	}
	if w := e.fake.Writes()[n:]; len(w) != 0 {
		t.Errorf("the device was written: %v", w)
	}
	if got := e.read(t, "sda", AttrScheduler); !strings.Contains(got, "[kyber]") || e.read(t, "sda", AttrReadAhead) != "1024" {
		t.Errorf("device changed: %s, read_ahead_kb %s", got, e.read(t, "sda", AttrReadAhead))
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(rec) {
		t.Errorf("record changed (%v):\n%s\nwas\n%s", err, got, rec)
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if err := a.Revert("sda"); err != nil {
		t.Fatal(err)
	}
	e.assertPristine(t, "sda")
}

// Issue 16's race: another writer changes the device between the agent's
// check and its Apply. With Expect, the Apply writes nothing and says so;
// without a difference it applies as usual.
func TestApplyExpectRefusesOtherWritersChange(t *testing.T) {
	e := newEnv(t)
	// The agent last saw mq-deadline; another writer set bfq since.
	if err := e.fake.Write("sda", AttrScheduler, "bfq"); err != nil {
		t.Fatal(err)
	}
	e.fake = actuatetest.New(e.root) // forget that write
	a, err := NewWithStore(e.fake, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	e.a.Close()
	_, err = a.Apply("sda", Setting{Scheduler: "kyber", Expect: &Expected{Scheduler: "mq-deadline"}})
	if !errors.Is(err, ErrOtherWriter) || !strings.Contains(err.Error(), "scheduler bfq (expected mq-deadline)") {
		t.Fatalf("Apply = %v, want ErrOtherWriter naming bfq", err)
	}
	if w := e.fake.Writes(); len(w) != 0 {
		t.Errorf("wrote %v", w)
	}
	if len(a.Originals()) != 0 {
		t.Errorf("recorded %v", a.Originals())
	}
	if _, err := a.Apply("sda", Setting{Scheduler: "kyber", Expect: &Expected{Scheduler: "bfq", ReadAheadKiB: 0}}); err != nil {
		t.Fatalf("Apply with the right expectation: %v", err)
	}
}
