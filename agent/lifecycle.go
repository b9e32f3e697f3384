package agent

// Devices that vanish or are replaced while the agent runs. Before every
// window each device is looked up again in sysfs: a device that is gone
// or has no medium any more (size 0: a detached loop device), or whose name now belongs to another device (a new major:minor or
// diskseq: a loop device detached and attached again is a new device), is
// no longer traced or evaluated and is reported as gone (status, table,
// log, and its metrics removed). Its record of original settings is
// dropped, after its original is put back where the kernel keeps the
// queue (a detached loop device keeps its queue settings for the next
// device attached under the name): nothing the agent set is ever carried
// over to the device that takes the name. A disk that comes
// back as the same disk after a reboot is restored at the next start
// (agent/actuate's identity rule). A disk that appears while the agent runs
// (a new name in /sys/block, or a name on another device) has the policies
// taken again at the end of the window, so that one they select is
// governed as if it had been there at the start.

import (
	"errors"
	"fmt"

	"github.com/shadowtune/shadowtune/agent/actuate"
	"github.com/shadowtune/shadowtune/agent/sysfs"
)

// dropRecord drops the record of a device that is gone. A queue the
// kernel keeps (a detached loop device keeps its settings for the next
// device attached under the name) gets its original back first, so that
// nothing the agent set is carried over.
func (a *Agent) dropRecord(dev string) {
	err := a.act.RevertDetached(dev)
	var left *actuate.LeftError
	var rerr *actuate.RecordError
	if errors.As(err, &left) && !errors.As(err, &rerr) {
		a.opt.Log.Info("restored the original settings of a device's queue left behind, except what another writer changed", "device", dev, "left", left.Error())
		return
	}
	if err == nil {
		a.opt.Log.Info("restored the original settings of a device's queue left behind", "device", dev)
		return
	}
	if err := a.act.Forget(dev); err != nil {
		a.opt.Log.Error(err, "drop the record of a device that is gone", "device", dev)
	}
}

// dropGone stops tracing the devices that are gone or replaced, reports
// them and drops their records; it returns whether any was.
func (a *Agent) dropGone() bool {
	var gone bool
	for _, d := range a.devs {
		if d.status.Gone != "" {
			continue
		}
		why := presence(a.opt.HostRoot, d.sys)
		if why == "" {
			continue
		}
		gone = true
		d.status.Gone = why
		a.opt.Log.Info("a governed device is gone: no longer traced; its record is dropped", "device", d.sys.Name, "why", why)
		if _, ok := a.act.Original(d.sys.Name); ok {
			a.dropRecord(d.sys.Name)
		}
		if a.opt.Metrics != nil {
			a.opt.Metrics.ForgetDevice(d.sys.Name)
		}
	}
	if gone {
		a.mu.Lock()
		for dev, d := range a.byDev {
			if d.status.Gone != "" {
				delete(a.byDev, dev)
			}
		}
		a.mu.Unlock()
		if err := a.tr.SetDevices(a.devNumbers()); err != nil {
			a.opt.Log.Error(err, "stop tracing the devices that are gone")
		}
		a.trackPageCache()
	}
	return gone
}

// disksAppeared reports whether a disk appeared in the host's
// /sys/block since the last call: a new name, or a name now on another
// device (Disks' identity). The first call only records. A disk that
// appears after the policies were taken (hot-plugged, attached for a new
// volume) is selected only when they are taken again (requeue).
func (a *Agent) disksAppeared() bool {
	now, err := sysfs.Disks(a.opt.HostRoot)
	if err != nil {
		a.opt.Log.Error(err, "look for new disks")
		return false
	}
	first := a.disks == nil
	appeared := false
	for name, id := range now {
		if a.disks[name] != id {
			appeared = true
		}
	}
	a.disks = now
	if appeared && !first {
		a.opt.Log.Info("a disk appeared: the policies are taken again")
	}
	return appeared && !first
}

// requeue has the loop take the current policies again (reconfigure),
// unless newer ones already wait.
func (a *Agent) requeue() {
	a.mu.Lock()
	if a.update == nil {
		cur := a.policies
		a.update = &cur
	}
	a.mu.Unlock()
	select {
	case a.poke <- struct{}{}:
	default:
	}
}

// presence says whether disk was is still the disk the agent governs
// under its name: "" when it is, else why not.
func presence(hostRoot string, was sysfs.Device) string {
	now, err := sysfs.Read(hostRoot, was.Name)
	switch {
	case err != nil:
		return "removed"
	case now.SizeBytes == 0:
		return "removed (no medium: size 0; a detached loop device)"
	case now.MajorMinor != was.MajorMinor || now.DiskSeq != was.DiskSeq:
		return fmt.Sprintf("replaced by another device (dev %s diskseq %d; was dev %s diskseq %d)",
			now.MajorMinor, now.DiskSeq, was.MajorMinor, was.DiskSeq)
	}
	return ""
}
