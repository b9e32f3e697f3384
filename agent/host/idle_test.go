package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIdleMeter(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stat")
	write := func(line string) {
		if err := os.WriteFile(p, []byte(line+"\ncpu0 1 2 3 4\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := IdleMeter{path: p}
	write("cpu  100 0 100 700 100 0 0 0 0 0")
	if s := m.Share(); s != -1 {
		t.Errorf("first read: %v, want -1", s)
	}
	// 400 more ticks, 300 of them idle or iowait.
	write("cpu  150 0 150 950 150 0 0 0 0 0")
	if s := m.Share(); s != 0.75 {
		t.Errorf("idle share %v, want 0.75", s)
	}
	if s := m.Share(); s != -1 {
		t.Errorf("counters that did not move: %v, want -1", s)
	}
	write("intr 1 2 3")
	if s := m.Share(); s != -1 {
		t.Errorf("no cpu line: %v, want -1", s)
	}
	if _, _, err := readCPUTicks(p); err == nil || !strings.Contains(err.Error(), p+":1:") {
		t.Errorf("no cpu line: %v, want an error naming %s:1", err, p)
	}
	write("cpu  1 2 x 4")
	if _, _, err := readCPUTicks(p); err == nil || !strings.Contains(err.Error(), "counter 3") {
		t.Errorf("a bad counter: %v, want an error naming it", err)
	}
}
