package model

// windowCell is what one cell learned since Model.StartWindow: the sum of
// the samples, ns, and their count.
type windowCell struct {
	sum int64
	n   int64
}

// StartWindow starts a window: from now on the model also keeps, per
// cell, the sum and count of every sample it learns, for WindowModel. It
// allocates on its first call only (16 bytes per cell).
func (m *Model) StartWindow() {
	for t := range m.tables {
		tb := &m.tables[t]
		if len(tb.win) != len(tb.cells) {
			tb.win = make([]windowCell, len(tb.cells))
			continue
		}
		clear(tb.win)
	}
}

// WindowModel returns a copy of m to simulate the window started by
// StartWindow with. A cell keeps only its newest RingSize samples, so
// after a busy window its mean is that of the window's last moments: a
// window whose first seconds read 4 KiB at 50 µs (net of the wait inside
// the device) and whose last half second read them at 190 µs, beside
// another stream's 1,280 KiB requests, left a model that predicted the
// whole window's small reads at 272 µs against the 72 µs measured, and
// its simulation of the setting in effect 2.4 times the device's busy
// time. In the copy, each cell that learned more samples in the window
// than its ring holds predicts the mean of all of them; the others, and
// every cell of a model with no window started, are as in m. The copy
// does not track a window.
func (m *Model) WindowModel() *Model {
	c := m.Clone()
	for t := range m.tables {
		src, dst := &m.tables[t], &c.tables[t]
		for i, w := range src.win {
			if w.n <= RingSize {
				continue
			}
			cl := &dst.cells[i]
			old := cl.mean()
			mean := (w.sum + w.n/2) / w.n
			for j := range int(cl.n) {
				cl.ring[j] = mean
			}
			cl.sum = mean * int64(cl.n)
			dst.colSum[i/NumRows] += cl.mean() - old
		}
	}
	return c
}
