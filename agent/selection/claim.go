package selection

// Claims: the devices the agent governs are claimed through the actuator
// (a host-wide claim per device), so that a second agent with another
// state directory is refused, naming the owner.

import (
	"errors"

	"github.com/go-logr/logr"

	"github.com/shadowtune/shadowtune/agent/actuate"
)

// Claim claims the selected devices through act (a device already
// this actuator owns is a no-op (actuate.Actuator.Claim)). It returns the
// ones another agent owns, with its error (actuate.OwnedError), leaving
// them out of sel: `shadowtune run` refuses them; the cluster agent
// reports them. Any other claim error is logged and the device kept.
func Claim(act *actuate.Actuator, sel []Governed, log logr.Logger) (kept []Governed, owned []error) {
	for _, s := range sel {
		err := act.Claim(s.Device.Name)
		var oe *actuate.OwnedError
		switch {
		case errors.As(err, &oe):
			owned = append(owned, err)
			continue
		case err != nil:
			log.Error(err, "claim a device", "device", s.Device.Name)
		}
		kept = append(kept, s)
	}
	return kept, owned
}
