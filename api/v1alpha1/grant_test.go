package v1alpha1

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCheckGrant(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := &StorageTuning{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Generation: 4}}
	p.Spec.Mode = ModeApply
	p.Default()
	grant := func(mut func(*RolloutGrant)) *RolloutGrant {
		g := &RolloutGrant{Devices: []string{"sda", "nvme0n1"}, Until: metav1.NewTime(now.Add(time.Minute)),
			Policy: "fleet", Generation: 4}
		if mut != nil {
			mut(g)
		}
		return g
	}
	for _, c := range []struct {
		name   string
		g      *RolloutGrant
		p      *StorageTuning
		dev    string
		want   error
		wantOK bool
		// wantPolicy is CheckGrantPolicy's answer: want, but for
		// ErrGrantDevice, which it does not check.
		wantPolicy error
	}{
		{"valid", grant(nil), p, "sda", nil, true, nil},
		{"valid second device", grant(nil), p, "nvme0n1", nil, true, nil},
		{"no grant", nil, p, "sda", ErrNoGrant, false, ErrNoGrant},
		{"no policy", grant(nil), nil, "sda", ErrGrantOtherPolicy, false, ErrGrantOtherPolicy},
		{"other policy", grant(func(g *RolloutGrant) { g.Policy = "other" }), p, "sda", ErrGrantOtherPolicy, false, ErrGrantOtherPolicy},
		{"older generation", grant(func(g *RolloutGrant) { g.Generation = 3 }), p, "sda", ErrGrantGeneration, false, ErrGrantGeneration},
		{"newer generation", grant(func(g *RolloutGrant) { g.Generation = 5 }), p, "sda", ErrGrantGeneration, false, ErrGrantGeneration},
		{"expires now", grant(func(g *RolloutGrant) { g.Until = metav1.NewTime(now) }), p, "sda", ErrGrantExpired, false, ErrGrantExpired},
		{"expired", grant(func(g *RolloutGrant) { g.Until = metav1.NewTime(now.Add(-time.Second)) }), p, "sda", ErrGrantExpired, false, ErrGrantExpired},
		{"device not listed", grant(nil), p, "sdb", ErrGrantDevice, false, nil},
		{"no devices", grant(func(g *RolloutGrant) { g.Devices = nil }), p, "sda", ErrGrantDevice, false, nil},
		{"other policy and device not listed", grant(func(g *RolloutGrant) { g.Policy = "other" }), p, "sdb", ErrGrantOtherPolicy, false, ErrGrantOtherPolicy},
		{"expired and device not listed", grant(func(g *RolloutGrant) { g.Until = metav1.NewTime(now) }), p, "sdb", ErrGrantExpired, false, ErrGrantExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckGrant(c.g, c.p, c.dev, now)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Errorf("CheckGrant = %v, want %v", err, c.want)
			}
			if ok := ValidGrant(c.g, c.p, c.dev, now); ok != c.wantOK {
				t.Errorf("ValidGrant = %v, want %v", ok, c.wantOK)
			}
			if err := CheckGrantPolicy(c.g, c.p, now); !errors.Is(err, c.wantPolicy) || (c.wantPolicy == nil) != (err == nil) {
				t.Errorf("CheckGrantPolicy = %v, want %v", err, c.wantPolicy)
			}
		})
	}
}
