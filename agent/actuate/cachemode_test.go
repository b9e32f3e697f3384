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

// fakeCaches is dm-cache as dmsetup shows it: a mode and dirty blocks per
// device-mapper name. calls logs every SetMode.
type fakeCaches struct {
	mode  map[string]string
	dirty map[string]uint64
	fail  error
	calls []string
}

func (f *fakeCaches) Mode(name string) (string, uint64, error) {
	m, ok := f.mode[name]
	if !ok {
		return "", 0, fmt.Errorf("no device %s: %w", name, ErrDeviceGone)
	}
	return m, f.dirty[name], nil
}

func (f *fakeCaches) SetMode(name, mode string) error {
	f.calls = append(f.calls, name+"="+mode)
	if f.fail != nil {
		return f.fail
	}
	f.mode[name] = mode
	return nil
}

func openWithCaches(t *testing.T, e *env, fc *fakeCaches) *Actuator {
	t.Helper()
	a, err := Open(Options{Store: e.fake, StateDir: e.stateDir, Caches: fc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// The original mode is recorded before the first switch and survives a
// restart; RevertAll puts it back and drops the record.
func TestCacheModeRecordedAndReverted(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	fc := &fakeCaches{mode: map[string]string{"cached": CachePassthrough}}
	a := openWithCaches(t, e, fc)
	if err := a.SetCacheMode("cached", "vda", CacheWritethrough); err != nil {
		t.Fatal(err)
	}
	if err := a.SetCacheMode("cached", "vda", CacheWritethrough); err != nil || len(fc.calls) != 1 {
		t.Fatalf("second SetCacheMode to the same mode: %v, calls %v (want no call)", err, fc.calls)
	}
	a.Close()
	// A new process (after a crash) finds the record.
	b := openWithCaches(t, e, fc)
	got := b.CacheOriginals()["cached"]
	if got.Mode != CachePassthrough || got.Applied != CacheWritethrough || got.Origin != "vda" {
		t.Fatalf("record after restart: %+v", got)
	}
	done, err := b.RevertAll()
	if err != nil || !slices.Contains(done, "dm-cache/cached") {
		t.Fatalf("RevertAll: %v, %v", done, err)
	}
	if fc.mode["cached"] != CachePassthrough {
		t.Errorf("mode after revert %s, want passthrough", fc.mode["cached"])
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, cacheDir, "cached.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record still there after revert: %v", err)
	}
}

func TestCacheModeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mode       string
		dirty      uint64
		want       string
		wantErr    error
		wantCalled bool
	}{
		{"writeback cache", CacheWriteback, 0, CachePassthrough, ErrCacheUnsafe, false},
		{"dirty to passthrough", CacheWritethrough, 7, CachePassthrough, ErrCacheUnsafe, false},
		{"writeback asked", CachePassthrough, 0, CacheWriteback, ErrInvalidSetting, false},
		{"clean to passthrough", CacheWritethrough, 0, CachePassthrough, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.a.Close()
			fc := &fakeCaches{mode: map[string]string{"c": tc.mode}, dirty: map[string]uint64{"c": tc.dirty}}
			a := openWithCaches(t, e, fc)
			err := a.SetCacheMode("c", "vda", tc.want)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("SetCacheMode: %v, want %v", err, tc.wantErr)
			}
			if called := len(fc.calls) > 0; called != tc.wantCalled {
				t.Errorf("SetMode calls %v", fc.calls)
			}
			if _, recorded := a.CacheOriginals()["c"]; recorded != tc.wantCalled {
				t.Errorf("recorded %v, want %v", recorded, tc.wantCalled)
			}
		})
	}
}

// A mode set by another writer after shadowtune's change is left at
// revert, and said so; a cache that is gone is reported apart.
func TestCacheModeRevertOtherWriterAndGone(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	fc := &fakeCaches{mode: map[string]string{"a": CachePassthrough, "b": CacheWritethrough}}
	a := openWithCaches(t, e, fc)
	if err := a.SetCacheMode("a", "vda", CacheWritethrough); err != nil {
		t.Fatal(err)
	}
	if err := a.SetCacheMode("b", "sda", CachePassthrough); err != nil {
		t.Fatal(err)
	}
	fc.mode["a"] = CacheWriteback // another writer
	delete(fc.mode, "b")          // removed
	_, err := a.RevertAll()
	var re *RevertError
	if !errors.As(err, &re) || len(re.Left) != 1 || len(re.Gone) != 1 || len(re.Failed) != 0 {
		t.Fatalf("RevertAll: %v", err)
	}
	if fc.mode["a"] != CacheWriteback || !strings.Contains(re.Left[0].Err.Error(), "another writer") {
		t.Errorf("other writer's mode not left, or not said: %s, %v", fc.mode["a"], re.Left[0].Err)
	}
	if _, kept := a.CacheOriginals()["b"]; !kept {
		t.Errorf("the gone cache's record was dropped")
	}
}

// A corrupt cache record is reported and does not block the others.
func TestCacheRecordCorrupt(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	dir := filepath.Join(e.stateDir, cacheDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.json"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	fc := &fakeCaches{mode: map[string]string{"y": CachePassthrough}}
	a := openWithCaches(t, e, fc)
	if bad := a.BadRecords()["dm-cache/x"]; !errors.Is(bad, ErrCorruptState) {
		t.Fatalf("bad records: %v", a.BadRecords())
	}
	if err := a.SetCacheMode("y", "vda", CacheWritethrough); err != nil {
		t.Fatal(err)
	}
	done, err := a.RevertAll()
	var re *RevertError
	if !errors.As(err, &re) || len(re.Failed) != 1 || !slices.Contains(done, "dm-cache/y") {
		t.Fatalf("RevertAll: %v %v", done, err)
	}
	if _, err := NewWithStore(e.fake, t.TempDir()); err != nil {
		t.Fatal(err) // another, clean state directory opens strictly
	}
}

// A gone cache's record is forgotten; a present one's only by force.
func TestCacheForget(t *testing.T) {
	e := newEnv(t)
	e.a.Close()
	fc := &fakeCaches{mode: map[string]string{"a": CachePassthrough, "b": CachePassthrough}}
	a := openWithCaches(t, e, fc)
	for _, n := range []string{"a", "b"} {
		if err := a.SetCacheMode(n, "vda", CacheWritethrough); err != nil {
			t.Fatal(err)
		}
	}
	delete(fc.mode, "b")
	if err := a.Forget("dm-cache/a"); !errors.Is(err, ErrNotGone) {
		t.Fatalf("Forget of a present cache: %v", err)
	}
	if err := a.Forget("dm-cache/b"); err != nil {
		t.Fatal(err)
	}
	if err := a.ForceForget("dm-cache/a"); err != nil {
		t.Fatal(err)
	}
	if n := len(a.CacheOriginals()); n != 0 {
		t.Errorf("%d records left", n)
	}
	if fc.mode["a"] != CacheWritethrough {
		t.Errorf("forget touched the cache: %s", fc.mode["a"])
	}
}
