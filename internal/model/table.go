package model

// cell is one table cell: a ring buffer of the last RingSize observed
// service times (ns) and their running sum (KDSim §3.1.1). The ring is
// allocated on the first sample, so untouched cells cost 24 bytes.
type cell struct {
	sum  int64 // sum of the n stored samples, ns
	n    uint8 // number of stored samples, 0…RingSize
	head uint8 // index the next sample is written to
	ring *[RingSize]int64
}

// mean returns the rounded mean of the stored samples; n must be > 0.
func (c *cell) mean() int64 {
	n := int64(c.n)
	return (c.sum + n/2) / n
}

// add stores v, evicting the oldest sample once the ring is full.
func (c *cell) add(v int64) {
	if c.ring == nil {
		c.ring = new([RingSize]int64)
	}
	if c.n < RingSize {
		c.n++
	} else {
		c.sum -= c.ring[c.head]
	}
	c.ring[c.head] = v
	c.sum += v
	c.head = uint8((int(c.head) + 1) % RingSize)
}

// logical returns the i-th stored sample in age order (0 = oldest).
func (c *cell) logical(i int) int64 {
	return c.ring[(int(c.head)-int(c.n)+i+2*RingSize)%RingSize]
}

// table is one service-time table, stored column-major so that a column's
// cells are contiguous. Per column it keeps the sum of the means of its
// non-empty cells and their count, so the cold-cell value (the column
// mean) is O(1); and per column the nearest column that has data, which is
// recomputed only when a column receives its first sample (at most once
// per column over the table's life), so lookups never write.
type table struct {
	cells   []cell  // cells[col*NumRows+row]
	colSum  []int64 // Σ mean over the non-empty cells of the column, ns
	colN    []int32 // number of non-empty cells in the column
	nearest []int32 // nearest column with data (itself if it has data), −1 if the table is empty
	// win is, per cell, what it learned since Model.StartWindow; nil
	// until then, and in a clone.
	win []windowCell
}

func (t *table) init(cols int) {
	t.cells = make([]cell, cols*NumRows)
	t.colSum = make([]int64, cols)
	t.colN = make([]int32, cols)
	t.nearest = make([]int32, cols)
	for i := range t.nearest {
		t.nearest[i] = -1
	}
}

func (t *table) clone() table {
	c := table{
		cells:   make([]cell, len(t.cells)),
		colSum:  append([]int64(nil), t.colSum...),
		colN:    append([]int32(nil), t.colN...),
		nearest: append([]int32(nil), t.nearest...),
	}
	// One backing array for all rings of the copy.
	used := 0
	for i := range t.cells {
		if t.cells[i].ring != nil {
			used++
		}
	}
	rings := make([][RingSize]int64, used)
	k := 0
	for i, src := range t.cells {
		c.cells[i] = src
		if src.ring != nil {
			rings[k] = *src.ring
			c.cells[i].ring = &rings[k]
			k++
		}
	}
	return c
}

// update adds one sample v (ns) to cell (row, col).
func (t *table) update(row, col int, v int64) {
	c := &t.cells[col*NumRows+row]
	if t.win != nil {
		w := &t.win[col*NumRows+row]
		w.sum, w.n = w.sum+v, w.n+1
	}
	var old int64
	fresh := c.n == 0
	if !fresh {
		old = c.mean()
	}
	c.add(v)
	t.colSum[col] += c.mean() - old
	if fresh {
		t.colN[col]++
		if t.colN[col] == 1 {
			t.relink()
		}
	}
}

// relink recomputes nearest[] after a column became non-empty.
func (t *table) relink() {
	n := len(t.colN)
	last := -1
	for i := 0; i < n; i++ { // nearest non-empty column at or left of i
		if t.colN[i] > 0 {
			last = i
		}
		t.nearest[i] = int32(last)
	}
	next := -1
	for i := n - 1; i >= 0; i-- { // compare with the nearest at or right of i
		if t.colN[i] > 0 {
			next = i
		}
		l := int(t.nearest[i])
		switch {
		case next < 0:
		case l < 0 || next-i <= i-l: // ties go to the larger distance
			t.nearest[i] = int32(next)
		}
	}
}

// lookup returns the cell mean, or the cold-cell value; ok is false when
// the table is empty.
func (t *table) lookup(row, col int) (int64, bool) {
	c := &t.cells[col*NumRows+row]
	if c.n > 0 {
		return c.mean(), true
	}
	nc := t.nearest[col]
	if nc < 0 {
		return 0, false
	}
	return colMean(t.colSum[nc], t.colN[nc]), true
}

func colMean(sum int64, n int32) int64 {
	return (sum + int64(n)/2) / int64(n)
}
