package agent

// Opt-in provisioning (spec.cache.provision): package dmcache plans and
// makes the attaches and detaches (dmcache.Provision); the agent notes
// them in its status.

import (
	"github.com/shadowtune/shadowtune/agent/dmcache"
	"github.com/shadowtune/shadowtune/api/v1alpha1"
)

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

// hostRootOr is r, or "/" when r is "".
func hostRootOr(r string) string {
	if r == "" {
		return "/"
	}
	return r
}
