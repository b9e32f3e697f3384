package knob

import (
	"slices"
	"testing"
)

// TestTableWellFormed: every row names a known scheduler (or none, for a
// queue attribute), a unit of the documented set and a role, and no
// knob appears twice.
func TestTableWellFormed(t *testing.T) {
	units := []string{"ms", "µs", "ns", "KiB", "sectors", "requests", "count", "0/1"}
	seen := map[[2]string]bool{}
	for _, k := range All() {
		if k.Scheduler != "" && (!slices.Contains(schedulers, k.Scheduler) || k.Scheduler == "none") {
			t.Errorf("%+v: scheduler not one with tunables of %v", k, schedulers)
		}
		if !slices.Contains(units, k.Unit) {
			t.Errorf("%+v: unit not one of %v", k, units)
		}
		if k.Role != Tuned && k.Role != Restored && k.Role != OwnPolicy {
			t.Errorf("%+v: role %q", k, k.Role)
		}
		if k.Min > k.Max || k.Min < 0 {
			t.Errorf("%+v: bounds [%d, %d]", k, k.Min, k.Max)
		}
		if key := [2]string{k.Scheduler, k.Name}; seen[key] {
			t.Errorf("%+v: twice", k)
		} else {
			seen[key] = true
		}
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"none's tunables", Tunables("none"), nil},
		{"no scheduler", Tunables(""), nil},
		{"kyber's", Tunables("kyber"), []string{"read_lat_nsec", "write_lat_nsec"}},
		{"mq-deadline's tuned", Tunables("mq-deadline"), []string{"read_expire", "write_expire", "fifo_batch", "writes_starved", "front_merges"}},
		{"mq-deadline's recorded", Recorded("mq-deadline"),
			[]string{"read_expire", "write_expire", "fifo_batch", "writes_starved", "front_merges", "async_depth", "prio_aging_expire"}},
		{"tuned queue attributes", Queue(Tuned), []string{"nr_requests"}},
		{"own-policy queue attributes", Queue(OwnPolicy), []string{"read_ahead_kb"}},
		{"kyber's ranged", Ranged("kyber"), []string{"read_lat_nsec", "write_lat_nsec", "nr_requests"}},
		{"none's ranged", Ranged("none"), nil},
		{"changed by a switch", SwitchChanged(), []string{"nr_requests", "wbt_lat_usec"}},
		{"restored queue attributes", Queue(Restored), []string{"wbt_lat_usec"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if k, ok := Lookup("bfq", "low_latency"); !ok || !k.Boolean() {
		t.Errorf("Lookup(bfq, low_latency) = %+v, %v; want a boolean row", k, ok)
	}
	if k, _ := Lookup("", "nr_requests"); !k.Within(4) || !k.Within(2048) || k.Within(3) || k.Within(2049) {
		t.Errorf("nr_requests %+v: want [4, 2048] within, 3 and 2049 not", k)
	}
	if k, _ := Lookup("kyber", "read_lat_nsec"); !k.Within(1 << 40) {
		t.Errorf("read_lat_nsec %+v: an unbounded knob takes any value", k)
	}
	if _, ok := Lookup("", "low_latency"); ok {
		t.Error("Lookup(\"\", low_latency) found a queue attribute")
	}
}
