// Package host holds the node agent's own footprint and the host facts it
// reads: the CPU budget of its evaluations (CPUBudget, with ProcessCPU),
// the share of the node's CPU time spent idle (IdleMeter, from the "cpu"
// line of /proc/stat), its own scheduling priority (Background), the
// memory its windows may take (PlanMemory), and the run marker that tells
// an unclean end of the previous run (MarkRunning, MarkStopped).
//
// Nothing here decides about a device: the root package agent calls it.
// Units: durations in ns (time.Duration), memory in bytes.
package host
