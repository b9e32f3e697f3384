package cluster

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shadowtune/shadowtune/agent"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

func TestEventsBetween(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	orig := &v1alpha1.DeviceSettings{Scheduler: "mq-deadline", ReadAheadKiB: 128}
	dev := func(mut ...func(*v1alpha1.DeviceState)) v1alpha1.DeviceState {
		d := v1alpha1.DeviceState{Name: "sda", Current: v1alpha1.DeviceSettings{Scheduler: "mq-deadline"}}
		for _, m := range mut {
			m(&d)
		}
		return d
	}
	changed := func(n int32, text string) func(*v1alpha1.DeviceState) {
		return func(d *v1alpha1.DeviceState) { d.Changes, d.LastChange, d.Original = n, text, orig }
	}
	reverted := func(n int32, text string) func(*v1alpha1.DeviceState) {
		return func(d *v1alpha1.DeviceState) { d.Reverts, d.LastChange = n, text }
	}
	other := func(at metav1.Time, change, writer string, yielded bool) func(*v1alpha1.DeviceState) {
		return func(d *v1alpha1.DeviceState) {
			d.OtherWriter = &v1alpha1.OtherWriterState{Time: at, Change: change, Writer: writer, Yielded: yielded}
		}
	}
	defaults := func(since metav1.Time) func(*v1alpha1.DeviceState) {
		return func(d *v1alpha1.DeviceState) {
			d.DefaultsChanged = &v1alpha1.DefaultsChange{Knobs: []v1alpha1.KnobChange{{Knob: "read_ahead_kb", Old: "128", New: "4096"}},
				With: "kernel 6.16.1 → 6.17.2", Since: since, DetectedTime: metav1.NewTime(since.Add(time.Hour))}
		}
	}
	judged := func(v v1alpha1.KnobVerdict) func(*v1alpha1.DeviceState) {
		return func(d *v1alpha1.DeviceState) {
			d.DefaultsChanged.Knobs[0].Verdict, d.DefaultsChanged.Knobs[0].ChangePercent = v, "+312.5"
		}
	}
	status := func(tracer string, devs ...v1alpha1.DeviceState) agent.Status {
		return agent.Status{Tracer: tracer, Windows: 1, Devices: devs}
	}
	type ev struct{ typ, reason, action, contains string }
	warn, normal := corev1.EventTypeWarning, corev1.EventTypeNormal
	cases := []struct {
		name       string
		prev, next agent.Status
		tracer     string
		want       []ev
	}{
		{name: "first status, nothing happened", next: status("ebpf", dev())},
		{name: "no change", prev: status("ebpf", dev(changed(1, "x"))), next: status("ebpf", dev(changed(1, "x")))},
		{name: "applied", prev: status("ebpf", dev()), next: status("ebpf", dev(changed(1, "mq-deadline -> bfq"))),
			want: []ev{{normal, EventApplied, "Apply sda", "sda: mq-deadline -> bfq"}}},
		{name: "three changes between two statuses", prev: status("ebpf", dev(changed(1, "a"))),
			next: status("ebpf", dev(changed(4, "bfq -> kyber"))),
			want: []ev{{normal, EventApplied, "Apply sda", "sda: bfq -> kyber (and 2 earlier changes)"}}},
		{name: "regression reverted", prev: status("ebpf", dev(changed(1, "mq-deadline -> bfq"))),
			next: status("ebpf", dev(changed(1, ""), reverted(1, "reverted bfq -> mq-deadline: measured 30% slower"))),
			want: []ev{{warn, EventRegressionReverted, "Revert sda", "sda: reverted bfq -> mq-deadline: measured 30% slower"}}},
		{name: "change and regression revert in one interval", prev: status("ebpf", dev()),
			next: status("ebpf", dev(changed(1, ""), reverted(1, "reverted bfq -> mq-deadline: slower"))),
			want: []ev{{warn, EventRegressionReverted, "Revert sda", "reverted bfq -> mq-deadline"},
				{normal, EventApplied, "Apply sda", "sda: setting changed"}}},
		{name: "original put back (Observe)", prev: status("ebpf", dev(changed(2, "x"))),
			next: status("ebpf", dev(func(d *v1alpha1.DeviceState) { d.Changes = 2 })),
			want: []ev{{normal, EventReverted, "Restore sda", "sda: original setting put back (mq-deadline, read_ahead_kb 128)"}}},
		{name: "original put back, device no longer governed", prev: status("ebpf", dev(changed(2, "x"))),
			next: agent.Status{Tracer: "ebpf", Ungoverned: []v1alpha1.DeviceState{dev()}},
			want: []ev{{normal, EventReverted, "Restore sda", "original setting put back"}}},
		{name: "original put back, virtual device no longer listed", prev: status("ebpf", dev(changed(2, "x"))),
			next: agent.Status{Tracer: "ebpf"},
			want: []ev{{normal, EventReverted, "Restore sda", "sda: no longer governed, original setting put back"}}},
		{name: "device gone, then dropped: nothing", prev: status("ebpf", dev(changed(2, "x"), func(d *v1alpha1.DeviceState) { d.Gone = "removed" })),
			next: agent.Status{Tracer: "ebpf"}},
		{name: "device gone: nothing", prev: status("ebpf", dev(changed(2, "x"))),
			next: status("ebpf", dev(func(d *v1alpha1.DeviceState) { d.Gone = "removed" }))},
		{name: "counters reset by a restarted loop: nothing", prev: status("ebpf", dev(changed(3, "x"), reverted(1, "r"))),
			next: status("ebpf", dev(changed(0, ""), reverted(0, "")))},
		{name: "other writer, yielded", prev: status("ebpf", dev()),
			next: status("ebpf", dev(other(t0, "scheduler kyber -> bfq", "bash (pid 4242)", true))),
			want: []ev{{warn, EventOtherWriter, "Detect sda", "sda: scheduler kyber -> bfq by bash (pid 4242); the agent stops changing"}}},
		{name: "other writer unchanged: nothing", prev: status("ebpf", dev(other(t0, "c", "", false))),
			next: status("ebpf", dev(other(t0, "c", "", false)))},
		{name: "other writer again, reclaimed", prev: status("ebpf", dev(other(t0, "c", "", false))),
			next: status("ebpf", dev(other(metav1.NewTime(t0.Add(time.Minute)), "scheduler bfq -> none", "", false))),
			want: []ev{{warn, EventOtherWriter, "Detect sda", "sda: scheduler bfq -> none; the agent keeps governing"}}},
		{name: "defaults changed, found at start", next: status("ebpf", dev(defaults(t0))),
			want: []ev{{warn, EventDefaultsChanged, "Compare sda", "sda: read_ahead_kb 128 → 4096 since the agent's start at 2026-11-21T12:00:00Z; kernel 6.16.1 → 6.17.2"}}},
		{name: "defaults changed, reported before: nothing", prev: status("ebpf", dev(defaults(t0))), next: status("ebpf", dev(defaults(t0)))},
		{name: "a changed default judged slower", prev: status("ebpf", dev(defaults(t0))), next: status("ebpf", dev(defaults(t0), judged(v1alpha1.VerdictSlower))),
			want: []ev{{warn, EventDefaultsSlower, "Judge sda", "sda: read_ahead_kb 128 → 4096 predicted slower (+312.5 %)"}}},
		{name: "judged slower before: nothing", prev: status("ebpf", dev(defaults(t0), judged(v1alpha1.VerdictSlower))),
			next: status("ebpf", dev(defaults(t0), judged(v1alpha1.VerdictSlower)))},
		{name: "judged not slower: nothing", prev: status("ebpf", dev(defaults(t0))), next: status("ebpf", dev(defaults(t0), judged(v1alpha1.VerdictNotSlower)))},
		{name: "tracer falls back to tracefs", next: status("tracefs", dev()),
			want: []ev{{warn, EventTracerFallback, "Trace", "tracefs"}}},
		{name: "fallback with auto", tracer: "auto", prev: status("ebpf"), next: status("tracefs"),
			want: []ev{{warn, EventTracerFallback, "Trace", "eBPF tracing is not available"}}},
		{name: "tracefs asked for: no fallback", tracer: "tracefs", next: status("tracefs", dev())},
		{name: "tracefs still: nothing", prev: status("tracefs"), next: status("tracefs")},
		{name: "two devices, in order", prev: status("ebpf", dev(), dev(func(d *v1alpha1.DeviceState) { d.Name = "sdb" })),
			next: status("ebpf", dev(changed(1, "a -> b")), dev(func(d *v1alpha1.DeviceState) { d.Name = "sdb" }, changed(1, "c -> d"))),
			want: []ev{{normal, EventApplied, "Apply sda", "sda: a -> b"}, {normal, EventApplied, "Apply sdb", "sdb: c -> d"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := eventsBetween(c.prev, c.next, c.tracer)
			if len(got) != len(c.want) {
				t.Fatalf("events = %+v, want %d", got, len(c.want))
			}
			for i, w := range c.want {
				g := got[i]
				if g.Type != w.typ || g.Reason != w.reason || g.Action != w.action || !strings.Contains(g.Message, w.contains) {
					t.Errorf("event %d = %+v, want %s %s %q containing %q", i, g, w.typ, w.reason, w.action, w.contains)
				}
			}
		})
	}
}

// The pending events are bounded, newest kept.
func TestAddEventsBounded(t *testing.T) {
	a := &Agent{}
	for i := range maxPendingEvents + 5 {
		a.addEvents([]event{{Reason: EventApplied, Message: strings.Repeat("x", i)}})
	}
	if len(a.events) != maxPendingEvents || len(a.events[0].Message) != 5 {
		t.Errorf("%d events, the oldest %d long", len(a.events), len(a.events[0].Message))
	}
	if !reflect.DeepEqual(eventsBetween(agent.Status{}, agent.Status{}, ""), []event(nil)) {
		t.Error("events from two empty statuses")
	}
}
