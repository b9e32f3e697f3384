package benchorder

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// rows runs williams_order for n treatments, rows 0..count-1.
func rows(t *testing.T, n, count int) [][]int {
	t.Helper()
	script := fmt.Sprintf(`. ../lib/williams.sh; for ((r = 0; r < %d; r++)); do williams_order %d $r; done`, count, n)
	out, err := exec.Command("bash", "-c", script).Output()
	if err != nil {
		t.Fatalf("williams_order %d: %v", n, err)
	}
	var rs [][]int
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var row []int
		for _, f := range strings.Fields(l) {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("williams_order %d printed %q", n, l)
			}
			row = append(row, v)
		}
		rs = append(rs, row)
	}
	return rs
}

// TestWilliamsOrder: over one period (n rows, 2n for an odd n) of
// williams_order, every row is a permutation of 0..n-1, every treatment
// runs equally often in every position, and every ordered pair of
// treatments is adjacent equally often; the next period repeats the
// first. The rotation the benchmark used before fails the pair balance:
// each treatment always followed the same one.
func TestWilliamsOrder(t *testing.T) {
	for n := 1; n <= 14; n++ {
		period := n
		if n%2 == 1 {
			period = 2 * n
		}
		rs := rows(t, n, 2*period)
		pos := make(map[[2]int]int)  // (position, treatment) -> runs
		pair := make(map[[2]int]int) // (before, after) -> runs
		for i, row := range rs[:period] {
			if len(row) != n {
				t.Fatalf("n %d row %d = %v: want %d treatments", n, i, row, n)
			}
			seen := make(map[int]bool)
			for j, v := range row {
				if v < 0 || v >= n || seen[v] {
					t.Fatalf("n %d row %d = %v: not a permutation of 0..%d", n, i, row, n-1)
				}
				seen[v] = true
				pos[[2]int{j, v}]++
				if j > 0 {
					pair[[2]int{row[j-1], v}]++
				}
			}
			if got := fmt.Sprint(rs[i+period]); got != fmt.Sprint(row) {
				t.Errorf("n %d: row %d = %s, want row %d = %v again", n, i+period, got, i, row)
			}
		}
		for j := range n {
			for v := range n {
				if got, want := pos[[2]int{j, v}], period/n; got != want {
					t.Errorf("n %d: treatment %d in position %d %d times in a period, want %d", n, v, j, got, want)
				}
			}
		}
		for a := range n {
			for b := range n {
				if a == b {
					continue
				}
				if got, want := pair[[2]int{a, b}], period/n; got != want {
					t.Errorf("n %d: %d right after %d %d times in a period, want %d", n, b, a, got, want)
				}
			}
		}
	}
}
