package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// withoutBFQ rewrites every queue/scheduler of the fake host at root as a
// kernel built without bfq lists it (this project's 6.18 test machines:
// "[none] mq-deadline kyber"), the current scheduler kept selected (a
// device on bfq moves to mq-deadline).
func withoutBFQ(t *testing.T, root string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "sys/block/*/queue/scheduler"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schedulers in %s: %v", root, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		list, cur, err := sysfs.ParseScheduler(string(b))
		if err != nil || len(list) <= 1 {
			continue // "none" alone (dm-0): nothing to take away
		}
		if cur == "bfq" {
			cur = "mq-deadline"
		}
		var out []string
		for _, s := range []string{"none", "mq-deadline", "kyber"} {
			if s == cur {
				s = "[" + s + "]"
			}
			out = append(out, s)
		}
		if err := os.WriteFile(f, []byte(strings.Join(out, " ")+" \n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKernelWithoutBFQ (issue 44): on a host whose kernel offers no bfq,
// with a policy that puts bfq first and makes it the default, discovery
// lists what the kernel offers; the policy's candidates are those the
// device offers and its default falls back to the device's own scheduler;
// in Apply mode the agent switches to an offered scheduler and never
// writes bfq; and the actuator refuses bfq, naming what is offered.
func TestKernelWithoutBFQ(t *testing.T) {
	root := fakeHost(t)
	withoutBFQ(t, root)
	devs, err := sysfs.Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if slices.Contains(d.Schedulers, "bfq") {
			t.Errorf("%s: offers %v, want no bfq", d.Name, d.Schedulers)
		}
	}
	p := testTuning("fleet", 3, v1alpha1.ModeApply, func(s *v1alpha1.StorageTuningSpec) {
		s.Devices.Include = []string{"sda"}
		s.Schedulers.Candidates = []v1alpha1.SchedulerName{"bfq", "mq-deadline", "kyber", "none"}
		s.Schedulers.Default = "bfq"
	})
	sd, err := sysfs.Read(root, "sda")
	if err != nil {
		t.Fatal(err)
	}
	pol := policyFor(&p.Spec, sd)
	var names []string
	for _, c := range pol.Candidates {
		names = append(names, c.Name())
		if c.Scheduler == "bfq" {
			t.Errorf("candidate %s: the kernel offers no bfq", c.Name())
		}
	}
	if pol.Decide.Default != sd.Scheduler {
		t.Errorf("default %q, want the device's own %q when the policy's (bfq) is not offered", pol.Decide.Default, sd.Scheduler)
	}
	t.Logf("sda offers %v; candidates %v, default %s", sd.Schedulers, names, pol.Decide.Default)

	e := newGateEnvOn(t, root, "sda", p)
	e.allow = true
	st := e.confirmed(t, 1)
	if st.Window.ApplyError != "" || !slices.Contains(sd.Schedulers, st.Current.Scheduler) || st.Current.Scheduler == "none" {
		t.Errorf("after a granted switch: current %q, apply error %q; want an offered scheduler other than none",
			st.Current.Scheduler, st.Window.ApplyError)
	}
	for _, w := range e.fake.Writes() {
		if strings.Contains(w, "bfq") {
			t.Errorf("wrote %q on a kernel without bfq", w)
		}
	}
	t.Logf("writes: %v", e.fake.Writes())

	_, err = e.act.Apply("sda", actuate.Setting{Scheduler: "bfq"})
	if !errors.Is(err, actuate.ErrNotAllowed) || !strings.Contains(err.Error(), "none, mq-deadline, kyber") {
		t.Errorf("Apply(bfq): %v, want ErrNotAllowed naming the offered schedulers", err)
	}
}
