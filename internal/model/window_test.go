package model

import (
	"testing"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// WindowModel predicts, in a cell that learned more samples in the window
// than its ring holds, the mean of all of them; other cells, and a model
// with no window started, predict as Clone does.
func TestWindowModel(t *testing.T) {
	m := Default(SSD, 1<<30)
	const far = 1 << 20 // sectors: the distance of every sample
	learn := func(n int, ns int64) {
		for range n {
			m.Learn(trace.Read, 8, far, ns)
		}
	}
	predict := func(m *Model) int64 { return m.Predict(trace.Read, 8, far, false) }
	learn(RingSize, 100_000)
	if got, want := predict(m.WindowModel()), predict(m.Clone()); got != want || got != 100_000 {
		t.Fatalf("no window started: %d ns, Clone %d, want 100000", got, want)
	}
	m.StartWindow()
	learn(3*RingSize, 50_000) // the window's first phase
	learn(RingSize, 190_000)  // and its last moments: all the ring holds
	if got := predict(m.Clone()); got != 190_000 {
		t.Fatalf("Clone: %d ns, want the ring's 190000", got)
	}
	if got := predict(m.WindowModel()); got != 85_000 {
		t.Fatalf("WindowModel: %d ns, want the window's mean 85000 ((3×50 + 190) ÷ 4 µs)", got)
	}
	// The column's cold-cell value (its mean over non-empty cells) moves
	// with the cell: a 16-sector read, never learned, in the same column.
	if got := m.WindowModel().Predict(trace.Read, 16, far, false); got != 85_000 {
		t.Fatalf("a cold cell of the column: %d ns, want 85000", got)
	}
	// The window's model is a copy: m itself still holds its ring.
	if got := predict(m); got != 190_000 {
		t.Fatalf("m after WindowModel: %d ns, want 190000", got)
	}
	// A new window forgets the old one; RingSize samples or fewer leave
	// the ring's mean.
	m.StartWindow()
	learn(RingSize, 70_000)
	if got := predict(m.WindowModel()); got != 70_000 {
		t.Fatalf("a window of %d samples: %d ns, want the ring's 70000", RingSize, got)
	}
}
