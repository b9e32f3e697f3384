package agent

// The agent's devices under a set of policies: chosen at start and again
// whenever the policies change (SetPolicies), without stopping the loop.
// The policies select the devices and the agent claims them
// (agent/selection); each device is adopted (a new one reads its memo and
// its queue defaults, memo.go) and the caches the policies ask for are
// provisioned (agent/dmcache).

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shadowtune/shadowtune/agent/dmcache"
	"github.com/shadowtune/shadowtune/agent/explain"
	"github.com/shadowtune/shadowtune/agent/host"
	"github.com/shadowtune/shadowtune/agent/selection"
	"github.com/shadowtune/shadowtune/agent/sentinel"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

// configure selects the devices the policies govern, restores the devices
// no policy governs in Apply mode, and builds or keeps each device's
// controller (adopt). It returns ErrNoDevice for `shadowtune run` when
// its policy selects no device, and the errors of discovery, of a restore
// (`shadowtune run` only; the cluster agent notes it) and of the tracer's
// device set.
func (a *Agent) configure(ps policySet) error {
	pols := make([]*v1alpha1.StorageTuning, len(ps.policies))
	for i, p := range ps.policies {
		pols[i] = p.DeepCopy()
		pols[i].Default() // the API's one layer of defaults
	}
	sel, others, err := selection.Select(a.opt.HostRoot, pols, ps.labels)
	if err != nil {
		return err
	}
	restored, err := selection.RestoreUngoverned(a.act, sel, a.opt.Metrics, a.opt.Log)
	a.st.Notes = slices.Clone(a.notes)
	if err != nil {
		if !a.cluster {
			return fmt.Errorf("restore devices changed by an earlier run: %w", err)
		}
		a.st.Notes = append(a.st.Notes, "restore at start: "+err.Error())
	}
	if len(restored) > 0 {
		// Read the restored disks again: a device's controller starts
		// from the setting it has now, not the one it had before the
		// restore, which it would take for another writer's change.
		if sel, others, err = selection.Select(a.opt.HostRoot, pols, ps.labels); err != nil {
			return err
		}
	}
	if len(sel) == 0 && !a.cluster {
		return ErrNoDevice
	}
	sel, owned := selection.Claim(a.act, sel, a.opt.Log)
	if len(owned) > 0 {
		if !a.cluster {
			return errors.Join(owned...)
		}
		for _, err := range owned {
			a.st.Notes = append(a.st.Notes, "not governed: "+err.Error())
		}
	}
	devs, err := a.adopt(sel, restored)
	if err != nil {
		return err
	}
	a.release(devs)
	a.forgetDropped(devs)
	a.fitMemory(devs)
	a.chargeDispatch(devs)
	a.mu.Lock()
	a.devs = devs
	clear(a.byDev)
	for _, d := range devs {
		a.byDev[d.sys.Dev] = d
	}
	a.mu.Unlock()
	a.st.Mode = selection.Mode(pols, sel, a.cluster)
	a.policies = ps
	if a.cluster {
		a.others = others
	}
	a.window = selection.MinWindow(sel)
	a.budget = host.NewCPUBudget(a.window, selection.CPUBudgetPct(sel))
	a.trackPageCache()
	a.provision(pols, ps.labels)
	if a.tr != nil {
		return a.tr.SetDevices(a.devNumbers())
	}
	return nil
}

// reconfigure takes the newest policies given to SetPolicies, if any, and
// reports whether it did; an error is logged and the devices stay as they
// were.
func (a *Agent) reconfigure() bool {
	a.mu.Lock()
	ps := a.update
	a.update = nil
	a.mu.Unlock()
	if ps == nil {
		return false
	}
	if err := a.configure(*ps); err != nil {
		a.opt.Log.Error(err, "take the new policies")
		return false
	}
	a.opt.Log.Info("the policies taken", "devices", a.names(), "mode", a.st.Mode, "window", a.window)
	return true
}

// adopt returns a device per selected disk. A device that is the same
// disk as before (MAJOR:MINOR and diskseq), governed by the same policy
// (name, UID and generation), not restored just now and whose scheduler
// and read-ahead are still the ones its controller set keeps its whole
// controller (learned model, thrash guard, a verification in progress,
// regression back-off) and status. Any other device that was governed
// before as the same disk keeps what was learned about it (carry).
func (a *Agent) adopt(sel []selection.Governed, restored []string) ([]*device, error) {
	old := map[string]*device{}
	for _, d := range a.devs {
		old[d.sys.Name] = d
	}
	out := make([]*device, 0, len(sel))
	for _, s := range sel {
		p := old[s.Device.Name]
		if p != nil && (p.sys.MajorMinor != s.Device.MajorMinor || p.sys.DiskSeq != s.Device.DiskSeq) {
			p = nil // another disk under the same name
		}
		if p != nil && p.key == selection.PolicyKey(s.Policy) && !slices.Contains(restored, s.Device.Name) && p.holds(s.Device) {
			p.sys, p.policy = s.Device, s.Policy
			p.setIdentity()
			out = append(out, p)
			continue
		}
		d, err := newDevice(s, a.opt.StateDir)
		if err != nil {
			return nil, err
		}
		d.ctrl.SetExplain(explain.Writer{Dir: a.opt.ExplainDir, Log: a.opt.Log}.Hook(s.Device.Name))
		if p != nil {
			d.carry(p)
		} else {
			cur := d.readDefaults(a.act, a.host(), time.Now())
			d.remember(a.act, &cur, a.opt.Log)
			if m := a.opt.Metrics; m != nil && d.status.DefaultsChanged != nil {
				m.SetDefaultsChanged(d.sys.Name, sentinel.KnobNames(d.status.DefaultsChanged))
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// forgetDropped removes the metrics of the devices no longer governed.
func (a *Agent) forgetDropped(devs []*device) {
	if a.opt.Metrics == nil {
		return
	}
	for _, d := range a.devs {
		if !slices.ContainsFunc(devs, func(n *device) bool { return n.sys.Name == d.sys.Name }) {
			a.opt.Metrics.ForgetDevice(d.sys.Name)
		}
	}
}

// release gives up the claims of the devices no longer governed (a claim
// stays while the actuator has a record of the device).
func (a *Agent) release(devs []*device) {
	for _, d := range a.devs {
		if slices.ContainsFunc(devs, func(n *device) bool { return n.sys.Name == d.sys.Name }) {
			continue
		}
		if err := a.act.Release(d.sys.Name); err != nil {
			a.opt.Log.Error(err, "release the claim of a device no longer governed", "device", d.sys.Name)
		}
	}
}

// fitMemory sizes every device's window to Options.MemoryLimit
// (host.PlanMemory) and notes it in the status when it is below the default.
func (a *Agent) fitMemory(devs []*device) {
	plan := host.PlanMemory(a.opt.MemoryLimit, len(devs))
	for _, d := range devs {
		p := &d.ctrl.Policy
		p.MaxSimulated = plan.MaxSimulated
		if p.ScreenRequests > 0 {
			p.ScreenRequests = min(p.ScreenRequests, plan.MaxSimulated/4)
		}
	}
	if plan.Note != "" && !slices.Contains(a.st.Notes, plan.Note) {
		a.st.Notes = append(a.st.Notes, plan.Note)
	}
}

// host is the kernel release and image of the node this run started on,
// read once (the loop's goroutine only).
func (a *Agent) host() sentinel.Host {
	if a.hostSeen == nil {
		h := sentinel.ReadHost(a.opt.HostRoot)
		a.hostSeen = &h
	}
	return *a.hostSeen
}

// provision attaches and detaches the caches the policies ask for
// (dmcache.Provision), notes each step in the status and logs it. Called
// by configure, at start and whenever the policies change.
func (a *Agent) provision(pols []*v1alpha1.StorageTuning, labels map[string]string) {
	dmcache.Provision(dmcache.Wanted(pols, labels), a.act, a.volumes, a.opt.HostRoot, a.provisionNote)
}

// provisionNote puts what was done (or its error) in the status notes
// and the log.
func (a *Agent) provisionNote(msg string, err error) {
	if err != nil {
		a.opt.Log.Error(err, msg)
		a.st.Notes = append(a.st.Notes, msg+": failed: "+err.Error())
		return
	}
	a.opt.Log.Info(msg)
	a.st.Notes = append(a.st.Notes, msg)
}
