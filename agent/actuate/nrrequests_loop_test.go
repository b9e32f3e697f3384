package actuate

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/sched"
	"github.com/shadowtune/shadowtune/internal/testutil/loopdev"
)

// TestLoopNrRequests sets nr_requests, a queue attribute of the knob
// table, with a scheduler on a real loop device: with a switch to
// mq-deadline, then alone, each read back; mq-deadline's async_depth
// follows it (block/mq-deadline.c dd_depth_updated). Revert puts every
// queue file back. nr_requests with none, and outside [4, 2048], is
// refused before anything is written.
func TestLoopNrRequests(t *testing.T) {
	name := loopdev.New(t, 64<<20)
	needSchedulers(t, name, "none", "mq-deadline")
	before := loopdev.SnapshotQueue(t, name)
	a := newLoopActuator(t)

	for _, bad := range []Setting{
		{Scheduler: "none", Tunables: sched.Tunables{"nr_requests": 16}},
		{Scheduler: "mq-deadline", Tunables: sched.Tunables{"nr_requests": 2}},
		{Scheduler: "mq-deadline", Tunables: sched.Tunables{"nr_requests": 4096}},
	} {
		_, err := a.Apply(name, bad)
		if err == nil || !(errors.Is(err, ErrInvalidSetting) || errors.Is(err, ErrNotAllowed)) {
			t.Errorf("Apply(%+v): %v, want ErrInvalidSetting or ErrNotAllowed", bad, err)
		}
	}
	assertSameQueue(t, name, before)

	for i, st := range []struct {
		s    Setting
		want string
	}{
		{Setting{Scheduler: "mq-deadline", Tunables: sched.Tunables{"nr_requests": 16, "fifo_batch": 8}}, "16"},
		{Setting{Tunables: sched.Tunables{"nr_requests": 64}}, "64"},
	} {
		res, err := a.Apply(name, st.s)
		if err != nil {
			t.Fatalf("step %d: Apply(%+v): %v", i, st.s, err)
		}
		if got := sysRead(t, name, "queue/nr_requests"); got != st.want {
			t.Errorf("step %d: nr_requests %s, want %s", i, got, st.want)
		}
		if got := sysRead(t, name, "queue/iosched/async_depth"); got != st.want {
			t.Errorf("step %d: async_depth %s, want %s (it follows nr_requests)", i, got, st.want)
		}
		if !strings.Contains(strings.Join(res.Written, " "), "queue/nr_requests") {
			t.Errorf("step %d: wrote %v, want queue/nr_requests among them", i, res.Written)
		}
		if res.After.Value("nr_requests") != st.want {
			t.Errorf("step %d: State.Value(nr_requests) = %q, want %s", i, res.After.Value("nr_requests"), st.want)
		}
	}
	if err := a.Revert(name); err != nil {
		t.Fatal(err)
	}
	assertSameQueue(t, name, before)
}

// TestLoopQueueDefaults: on a real loop device, QueueDefaults gives the
// nr_requests the kernel sets when it starts mq-deadline (block/
// blk-mq-sched.c), and an Apply of that value after another brings the
// device back to it: what a candidate that leaves nr_requests out means
// (window.Setting.Writes).
func TestLoopQueueDefaults(t *testing.T) {
	name := loopdev.New(t, 64<<20)
	needSchedulers(t, name, "none", "mq-deadline")
	a := newLoopActuator(t)
	if _, err := a.Apply(name, Setting{Scheduler: "mq-deadline"}); err != nil {
		t.Fatal(err)
	}
	kernel := sysRead(t, name, "queue/nr_requests")
	d, err := a.QueueDefaults(name)
	if err != nil {
		t.Fatal(err)
	}
	if got := strconv.FormatInt(d["nr_requests"], 10); got != kernel {
		t.Fatalf("QueueDefaults: nr_requests %s; the kernel set %s at the switch", got, kernel)
	}
	if _, err := a.Apply(name, Setting{Tunables: sched.Tunables{"nr_requests": 32}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(name, Setting{Scheduler: "mq-deadline", Tunables: d}); err != nil {
		t.Fatal(err)
	}
	if got := sysRead(t, name, "queue/nr_requests"); got != kernel {
		t.Errorf("nr_requests %s after writing the default back, want %s", got, kernel)
	}
	if err := a.Revert(name); err != nil {
		t.Fatal(err)
	}
}
