package v1alpha1

import (
	"cmp"
	"slices"
)

// ComparePrecedence orders policies for overlap resolution: higher
// spec.priority first, then metadata.name ascending. It returns a negative
// number when a takes precedence over b. Names are unique for a
// cluster-scoped kind, so the order is total.
func ComparePrecedence(a, b *StorageTuning) int {
	if c := cmp.Compare(b.Spec.Priority, a.Spec.Priority); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// Active reports whether a policy governs anything: it exists and is not
// being deleted. A paused policy is still active (it reports, and its
// devices keep their settings); only its roll-out stops.
func (st *StorageTuning) Active() bool { return st.DeletionTimestamp == nil }

// SelectingPolicies returns the active policies that select device dev of a
// node with the given labels, in precedence order (ComparePrecedence): the
// first one governs the device, the others are in conflict with it. A policy
// whose node selector is malformed (Validate and the CRD reject those)
// selects nothing. The input slice is not modified.
func SelectingPolicies(policies []*StorageTuning, nodeLabels map[string]string, dev DeviceInfo) []*StorageTuning {
	return DevicePolicies(NodePolicies(policies, nodeLabels), dev)
}

// NodePolicies returns the active policies whose node selector selects a
// node with the given labels, in precedence order. With DevicePolicies it
// splits SelectingPolicies for callers that look at many devices of one
// node (selectors are parsed once per node).
func NodePolicies(policies []*StorageTuning, nodeLabels map[string]string) []*StorageTuning {
	var out []*StorageTuning
	for _, p := range policies {
		if !p.Active() {
			continue
		}
		if ok, err := p.Spec.MatchesNode(nodeLabels); err != nil || !ok {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, ComparePrecedence)
	return out
}

// DevicePolicies returns those of a node's policies (NodePolicies) that
// select dev, in the same order.
func DevicePolicies(nodePolicies []*StorageTuning, dev DeviceInfo) []*StorageTuning {
	var out []*StorageTuning
	for _, p := range nodePolicies {
		if p.Spec.Matches(dev) {
			out = append(out, p)
		}
	}
	return out
}

// Governing returns the policy that governs dev (the first of
// SelectingPolicies), or nil when none selects it.
func Governing(policies []*StorageTuning, nodeLabels map[string]string, dev DeviceInfo) *StorageTuning {
	if sel := SelectingPolicies(policies, nodeLabels, dev); len(sel) > 0 {
		return sel[0]
	}
	return nil
}

// Pending reports whether the device's last recommendation differs from
// its current setting: another scheduler, a tunable with another value, or
// a read-ahead depth (when recommended, non-zero) other than the current
// one. A device without a recommendation is not pending. The agent counts
// these in status.pendingDevices and the operator grants changes for them.
func (d *DeviceState) Pending() bool {
	r := d.Recommendation
	if r == nil {
		return false
	}
	if r.Scheduler != "" && r.Scheduler != d.Current.Scheduler {
		return true
	}
	for k, v := range r.Tunables {
		if d.Current.Tunables[k] != v {
			return true
		}
	}
	return r.ReadAheadKiB != 0 && r.ReadAheadKiB != d.Current.ReadAheadKiB
}

// Info returns what device selection needs to know about the device.
func (d *DeviceState) Info() DeviceInfo {
	return DeviceInfo{Name: d.Name, Rotational: d.Rotational, SizeBytes: d.SizeBytes}
}
