package tracer

// The eBPF programs are compiled ahead of time: blocktrace_bpfel.{go,o} and
// blocktrace_bpfeb.{go,o} are generated from bpf/blocktrace.c, and
// writers_bpfel.{go,o} and writers_bpfeb.{go,o} from bpf/writers.c, and
// pagecache_bpfel.{go,o} and pagecache_bpfeb.{go,o} from bpf/pagecache.c,
// and committed, so building needs no clang. To regenerate (Debian/Ubuntu):
//
//	apt-get install -y clang llvm bpftool libbpf-dev
//	bpftool btf dump file /sys/kernel/btf/vmlinux format c > agent/tracer/bpf/vmlinux.h   # only to refresh it
//	go generate ./agent/tracer/
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel,bpfeb -tags linux -type event -type inflight_req -type slot -type counter blocktrace bpf/blocktrace.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target amd64 -tags linux -type qwriter -type qwriter_key writers bpf/writers.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel,bpfeb -tags linux -type pc_stats pagecache bpf/pagecache.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel,bpfeb -tags linux -type open_file openfiles bpf/openfiles.c
