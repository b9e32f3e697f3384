package dmcache

import (
	"strings"
	"testing"
	"time"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/internal/decide"
)

// A switch is verified by the application's mean read response time: the
// stat file's reads after it against the window before it; a regression
// returns the mode to switch back to and backs the new mode off.
func TestGovernedVerifyRevertsARegression(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := NewGoverned(CacheInfo{Name: "cached", Mode: decide.CacheOff, BlockSectors: 128, TotalBlocks: 960}, "dm-0")
	c.ObserveApp(sysfs.Stat{ReadIOs: 100, ReadTicksMs: 100}, true)
	c.ObserveApp(sysfs.Stat{ReadIOs: 1100, ReadTicksMs: 8100}, true) // 1000 reads of 8 ms
	if st := c.Status(); st.MeanReadMicroseconds != 8000 {
		t.Fatalf("mean read %d µs, want 8000", st.MeanReadMicroseconds)
	}
	text := c.Switched(decide.CacheOn, "predicted", t0, 1, 2)
	if text != "passthrough -> writethrough: predicted" || !c.Verifying() || c.Status().VerifyingWindows != 2 {
		t.Fatalf("switched: %q, status %+v", text, c.Status())
	}
	c.ObserveApp(sysfs.Stat{ReadIOs: 2100, ReadTicksMs: 18100}, true) // 10 ms
	if to, _ := c.Verify(t0.Add(time.Minute), 10, time.Hour); to != "" || !c.Verifying() {
		t.Fatalf("first window: revert to %q, verifying %v", to, c.Verifying())
	}
	c.ObserveApp(sysfs.Stat{ReadIOs: 3100, ReadTicksMs: 28100}, true)
	to, reason := c.Verify(t0.Add(2*time.Minute), 10, time.Hour)
	if to != decide.CacheOff || !strings.HasPrefix(reason, "regression: mean read response 10000 µs after, 8000 µs before") || c.Verifying() {
		t.Fatalf("revert to %q (%q), verifying %v", to, reason, c.Verifying())
	}
	c.dec = decide.CacheDecision{Mode: decide.CacheOn}
	c.info.Mode = decide.CacheOff
	if m := c.Wants(t0.Add(30 * time.Minute)); m != "" {
		t.Errorf("wants %q within the back-off", m)
	}
	if m := c.Wants(t0.Add(3 * time.Hour)); m != decide.CacheOn {
		t.Errorf("wants %q after the back-off, want %s", m, decide.CacheOn)
	}
}
