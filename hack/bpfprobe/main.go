// Command bpfprobe says which kinds of BPF program the running kernel lets
// this process load and attach: the mechanisms the agent's tracer and
// writer probe use (tp_btf), and those they would rather use (fentry,
// kprobes), plus fexit and BPF LSM, which need the same trampolines as
// fentry. Each program is two instructions (return 0); nothing stays
// loaded or attached. One line per mechanism, for hack/host-facts.sh.
//
// usage: go run ./hack/bpfprobe   (as root)
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

func main() {
	for _, c := range []struct {
		name string
		typ  ebpf.ProgramType
		at   ebpf.AttachType
		to   string
	}{
		{"tp_btf (block tracer, writer probe's syscall tracepoint)", ebpf.Tracing, ebpf.AttachTraceRawTp, "sys_enter"},
		{"fentry (writer probe, first choice)", ebpf.Tracing, ebpf.AttachTraceFEntry, "queue_attr_store"},
		{"fexit", ebpf.Tracing, ebpf.AttachTraceFExit, "queue_attr_store"},
		{"BPF LSM", ebpf.LSM, ebpf.AttachLSMMac, "file_permission"},
		{"kprobe (writer probe, second choice)", ebpf.Kprobe, ebpf.AttachNone, "queue_attr_store"},
	} {
		fmt.Printf("- %s: %s\n", c.name, try(c.typ, c.at, c.to))
	}
}

// try loads and attaches a program of type typ to to, then releases it.
func try(typ ebpf.ProgramType, at ebpf.AttachType, to string) string {
	spec := &ebpf.ProgramSpec{Type: typ, AttachType: at, AttachTo: to, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}}
	if typ == ebpf.Kprobe {
		spec.AttachTo = ""
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		return "refused at load: " + short(err)
	}
	defer prog.Close()
	var l link.Link
	switch typ {
	case ebpf.Kprobe:
		l, err = link.Kprobe(to, prog, nil)
	case ebpf.LSM:
		l, err = link.AttachLSM(link.LSMOptions{Program: prog})
	default:
		l, err = link.AttachTracing(link.TracingOptions{Program: prog})
	}
	if err != nil {
		return "loads, refused at attach: " + short(err)
	}
	l.Close()
	return "loads and attaches"
}

// short drops cilium/ebpf's advice about memlock, which is not the cause
// on kernels that charge BPF memory to the memory cgroup (5.11+).
func short(err error) string {
	s := err.Error()
	if i := strings.Index(s, " (MEMLOCK may be too low"); i >= 0 {
		s = s[:i]
	}
	if errors.Is(err, os.ErrPermission) {
		s += " (EPERM)"
	}
	return s
}
