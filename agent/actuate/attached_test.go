package actuate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeVolumes is LVM as the agent's tool shows it: the state of each
// "VG/LV" and a log of the calls. onAttach, when set, runs before an
// Attach changes anything (to look at the state directory then).
type fakeVolumes struct {
	lv       map[string]VolumeState
	calls    []string
	failWith error
	onAttach func()
}

func (f *fakeVolumes) Volume(vg, lv string) (VolumeState, error) {
	s, ok := f.lv[vg+"/"+lv]
	if !ok {
		return s, fmt.Errorf("no LV %s/%s: %w", vg, lv, ErrDeviceGone)
	}
	return s, nil
}

func (f *fakeVolumes) Attach(vg, lv, fast string, size int64) error {
	f.calls = append(f.calls, fmt.Sprintf("attach %s/%s %s %d", vg, lv, fast, size))
	if f.onAttach != nil {
		f.onAttach()
	}
	if f.failWith != nil {
		return f.failWith
	}
	f.lv[vg+"/"+lv] = VolumeState{Cached: true, Ours: true, Active: true, Block: 512}
	return nil
}

func (f *fakeVolumes) Detach(vg, lv string) error {
	f.calls = append(f.calls, "detach "+vg+"/"+lv)
	f.lv[vg+"/"+lv] = VolumeState{Active: true, Block: 512}
	return nil
}

func (f *fakeVolumes) Recover(vg string) ([]string, error) {
	f.calls = append(f.calls, "recover "+vg)
	var out []string
	for k, s := range f.lv {
		if strings.HasPrefix(k, vg+"/") && s.Missing {
			f.lv[k] = VolumeState{Active: true, Block: 512}
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeVolumes) Tidy(vg, lv string) ([]string, error) {
	f.calls = append(f.calls, "tidy "+vg+"/"+lv)
	return nil, nil
}

func openWithVolumes(t *testing.T, e *env, fv *fakeVolumes) *Actuator {
	t.Helper()
	a, err := Open(Options{Store: e.fake, StateDir: e.stateDir, Volumes: fv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func setBoot(t *testing.T, e *env, id string) {
	t.Helper()
	p := filepath.Join(e.root, "proc/sys/kernel/random/boot_id")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The attach is recorded before the tool runs, survives a restart, and
// RevertAll detaches the cache and removes the record.
func TestAttachRecordedFirstAndReverted(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	setBoot(t, e, "boot-1")
	fv := &fakeVolumes{lv: map[string]VolumeState{"vg-a/da-ta": {Active: true, Block: 4096}}}
	rec := filepath.Join(e.stateDir, attachedDir, "vg--a-da--ta.json")
	fv.onAttach = func() {
		if _, err := os.Stat(rec); err != nil {
			t.Errorf("no record when the attach runs: %v", err)
		}
	}
	a := openWithVolumes(t, e, fv)
	if err := a.AttachCache("vg-a", "da-ta", FastZRAM, 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := a.AttachCache("vg-a", "da-ta", FastZRAM, 64<<20); err != nil || len(fv.calls) != 1 {
		t.Fatalf("second AttachCache: %v, calls %v (want none)", err, fv.calls)
	}
	a.Close()
	b := openWithVolumes(t, e, fv)
	got := b.AttachedCaches()["vg-a/da-ta"]
	if got.Fast != FastZRAM || got.SizeBytes != 64<<20 || got.BootID != "boot-1" {
		t.Fatalf("record after restart: %+v", got)
	}
	done, err := b.RevertAll()
	if err != nil || !slices.Contains(done, "dm-cache-attached/vg-a/da-ta") {
		t.Fatalf("RevertAll: %v, %v", done, err)
	}
	if want := []string{"attach vg-a/da-ta zram 67108864", "detach vg-a/da-ta"}; !slices.Equal(fv.calls, want) {
		t.Errorf("calls %v, want %v", fv.calls, want)
	}
	if _, err := os.Stat(rec); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record still there: %v", err)
	}
}

// A volume cached by another writer is refused; a failed attach leaves
// no record; bad names are refused before anything runs.
func TestAttachRefusals(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	fv := &fakeVolumes{lv: map[string]VolumeState{
		"vg/other": {Cached: true, Active: true, Block: 512}, "vg/ours": {Cached: true, Ours: true, Active: true, Block: 512},
		"vg/plain": {Active: true, Block: 512}}}
	a := openWithVolumes(t, e, fv)
	for _, lv := range []string{"other", "ours"} {
		if err := a.AttachCache("vg", lv, "/dev/ram0", 1<<20); !errors.Is(err, ErrCachedByOther) {
			t.Errorf("%s: %v, want ErrCachedByOther", lv, err)
		}
	}
	if err := a.AttachCache("vg", "../x", "/dev/ram0", 1<<20); !errors.Is(err, ErrInvalidSetting) {
		t.Errorf("bad name: %v", err)
	}
	if err := a.AttachCache("vg", "gone", "/dev/ram0", 1<<20); !errors.Is(err, ErrDeviceGone) {
		t.Errorf("missing LV: %v", err)
	}
	fv.failWith = errors.New("lvconvert failed; undone: lvremove")
	if err := a.AttachCache("vg", "plain", "/dev/ram0", 1<<20); err == nil || !strings.Contains(err.Error(), "lvconvert failed") {
		t.Errorf("failed attach: %v", err)
	}
	if n := len(a.AttachedCaches()); n != 0 {
		t.Errorf("%d records after refusals and a failure", n)
	}
	if len(fv.calls) != 1 {
		t.Errorf("calls %v, want only the failed attach", fv.calls)
	}
}

// After a reboot, Open drops a recorded cache whose device is missing at
// once (the volume is usable), reports it and removes the record; a
// record of this boot waits for the revert.
func TestAttachRecoveredAfterReboot(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	setBoot(t, e, "boot-1")
	fv := &fakeVolumes{lv: map[string]VolumeState{"vg0/data": {Active: true, Block: 512}}}
	a := openWithVolumes(t, e, fv)
	if err := a.AttachCache("vg0", "data", "/dev/ram0", 32<<20); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// The same boot: nothing recovered.
	a = openWithVolumes(t, e, fv)
	if rec, errs := a.Recovered(); len(rec)+len(errs) != 0 {
		t.Fatalf("recovered in the same boot: %v %v", rec, errs)
	}
	a.Close()
	// Power-off: the RAM disk is gone, the LV inactive.
	setBoot(t, e, "boot-2")
	fv.lv["vg0/data"] = VolumeState{Cached: true, Ours: true, Missing: true}
	b := openWithVolumes(t, e, fv)
	rec, errs := b.Recovered()
	if !slices.Equal(rec, []string{"vg0/data"}) || len(errs) != 0 {
		t.Fatalf("Recovered: %v %v", rec, errs)
	}
	if st := fv.lv["vg0/data"]; st.Cached || !st.Active {
		t.Errorf("after recovery: %+v", st)
	}
	if n := len(b.AttachedCaches()); n != 0 {
		t.Errorf("%d records after the recovery", n)
	}
	if done, err := b.RevertAll(); err != nil || len(done) != 0 {
		t.Errorf("RevertAll after the recovery: %v %v", done, err)
	}
}

// The revert of a cache on a missing device (same boot, or no boot id)
// recovers the VG; one whose attach never finished is tidied; a volume
// that is gone keeps its record and is reported gone; a cache another
// writer put in place of ours is left.
func TestAttachRevertCases(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	fv := &fakeVolumes{lv: map[string]VolumeState{}}
	for _, lv := range []string{"miss", "half", "gone", "swap"} {
		fv.lv["vg/"+lv] = VolumeState{Active: true, Block: 512}
	}
	a := openWithVolumes(t, e, fv)
	for _, lv := range []string{"miss", "half", "gone", "swap"} {
		if err := a.AttachCache("vg", lv, "/dev/ram0", 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	fv.lv["vg/miss"] = VolumeState{Cached: true, Ours: true, Missing: true}
	fv.lv["vg/half"] = VolumeState{Active: true, Block: 512}
	delete(fv.lv, "vg/gone")
	fv.lv["vg/swap"] = VolumeState{Cached: true, Active: true, Block: 512}
	fv.calls = nil
	done, err := a.RevertAll()
	var re *RevertError
	if !errors.As(err, &re) || len(re.Gone) != 1 || len(re.Left) != 1 || len(re.Failed) != 0 {
		t.Fatalf("RevertAll: %v %v", done, err)
	}
	if want := []string{"dm-cache-attached/vg/half", "dm-cache-attached/vg/miss"}; !slices.Equal(done, want) {
		t.Errorf("done %v, want %v", done, want)
	}
	if want := []string{"tidy vg/half", "recover vg"}; !slices.Equal(fv.calls, want) {
		t.Errorf("calls %v, want %v", fv.calls, want)
	}
	if got := slices.Sorted(func(y func(string) bool) {
		for k := range a.AttachedCaches() {
			y(k)
		}
	}); !slices.Equal(got, []string{"vg/gone"}) {
		t.Errorf("records kept %v, want the gone volume's", got)
	}
}

// A corrupt record is reported and forgotten; a present volume's record
// is forgotten only by force, a gone one's without.
func TestAttachBadRecordAndForget(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	dir := filepath.Join(e.stateDir, attachedDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vg-x.json"), []byte(`{"version": 1, "attached_cache": {"vg": "vg", "lv": "y", "fast": "/dev/ram0"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fv := &fakeVolumes{lv: map[string]VolumeState{"vg/a": {Active: true}, "vg/b": {Active: true}}}
	a := openWithVolumes(t, e, fv)
	if bad := a.BadRecords()["dm-cache-attached/vg-x"]; !errors.Is(bad, ErrCorruptState) {
		t.Fatalf("bad records: %v", a.BadRecords())
	}
	if _, err := Open(Options{Store: e.fake, StateDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewWithStore(e.fake, e.stateDir); err == nil {
		t.Errorf("New (strict) opened a state directory with a corrupt record")
	}
	for _, lv := range []string{"a", "b"} {
		if err := a.AttachCache("vg", lv, FastZRAM, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	delete(fv.lv, "vg/b")
	if err := a.Forget("dm-cache-attached/vg/a"); !errors.Is(err, ErrNotGone) {
		t.Errorf("Forget of a present volume: %v", err)
	}
	for _, k := range []string{"dm-cache-attached/vg/b", "dm-cache-attached/vg-x"} {
		if err := a.Forget(k); err != nil {
			t.Errorf("Forget %s: %v", k, err)
		}
	}
	if err := a.ForceForget("dm-cache-attached/vg/a"); err != nil {
		t.Fatal(err)
	}
	if n, b := len(a.AttachedCaches()), len(a.BadRecords()); n+b != 0 {
		t.Errorf("%d records and %d bad ones left", n, b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left: %v", ents)
	}
}
