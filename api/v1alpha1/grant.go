package v1alpha1

// The one rule for a roll-out grant (NodeStorageState spec.grant): the
// operator uses it to tell the grants in force from those to revoke, the
// node agent to decide whether it may change a device.

import (
	"errors"
	"slices"
	"time"
)

// Why a grant does not allow a change (CheckGrant, CheckGrantPolicy).
var (
	ErrNoGrant          = errors.New("no grant")
	ErrGrantOtherPolicy = errors.New("the grant is for another policy")
	ErrGrantGeneration  = errors.New("the grant is for another generation of the policy")
	ErrGrantExpired     = errors.New("the grant has expired")
	ErrGrantDevice      = errors.New("the grant does not list the device")
)

// CheckGrantPolicy returns nil when grant g is in force for policy p at
// time now, whatever devices it lists: g is set, names p and p's current
// metadata.generation, and has not expired (now is before g.Until).
// Otherwise it returns why not: ErrNoGrant, ErrGrantOtherPolicy (also when
// p is nil), ErrGrantGeneration or ErrGrantExpired, checked in that order.
func CheckGrantPolicy(g *RolloutGrant, p *StorageTuning, now time.Time) error {
	switch {
	case g == nil:
		return ErrNoGrant
	case p == nil || g.Policy != p.Name:
		return ErrGrantOtherPolicy
	case g.Generation != p.Generation:
		return ErrGrantGeneration
	case !now.Before(g.Until.Time):
		return ErrGrantExpired
	}
	return nil
}

// CheckGrant returns nil when grant g allows changing device dev (a kernel
// name, e.g. "sda"), governed by policy p, at time now: CheckGrantPolicy
// allows it and g lists dev. Otherwise it returns why not: the error of
// CheckGrantPolicy, or ErrGrantDevice.
func CheckGrant(g *RolloutGrant, p *StorageTuning, dev string, now time.Time) error {
	if err := CheckGrantPolicy(g, p, now); err != nil {
		return err
	}
	if !slices.Contains(g.Devices, dev) {
		return ErrGrantDevice
	}
	return nil
}

// ValidGrant reports whether CheckGrant allows the change.
func ValidGrant(g *RolloutGrant, p *StorageTuning, dev string, now time.Time) bool {
	return CheckGrant(g, p, dev, now) == nil
}
