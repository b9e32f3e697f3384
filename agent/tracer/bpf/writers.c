// SPDX-License-Identifier: GPL-2.0
//
// writers: names the process that writes a block device's queue settings
// through sysfs (/sys/block/DEV/queue/* and queue/iosched/*), so that the
// agent can say who changed a setting it governs. Compiled by bpf2go
// (../gen.go) into writers_bpfel.o / writers_bpfeb.o, which are committed.
//
// Hooks (fentry, or kprobes where fentry cannot attach; block/blk-sysfs.c
// and block/elevator.c):
//   queue_attr_store(kobj, attr, page, length)  every write of a queue/*
//       file, queue/scheduler and queue/read_ahead_kb among them; kobj is
//       the queue's kobject, whose parent is the disk's ("sda")
//   elv_attr_store(kobj, attr, page, length)    every write of a
//       queue/iosched/* file; kobj is the elevator's, whose parent is the
//       queue's
// Each records, per disk, the last writer: its tgid, thread, comm, cgroup
// id, the attribute and the first bytes written, and the time
// (CLOCK_MONOTONIC, ns). Writes by the agent itself (self_tgid) are not
// recorded. CO-RE: struct kobject and struct attribute fields are
// relocated against the running kernel's BTF.
//
// Cost: nothing on the I/O path; a few µs per sysfs write of a queue
// setting, which is rare.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define NAME_LEN 32

struct qwriter_key {
	char disk[NAME_LEN];
};

struct qwriter {
	__u64 time_ns;   // bpf_ktime_get_ns: CLOCK_MONOTONIC
	__u64 cgroup_id; // bpf_get_current_cgroup_id: the writer's cgroup v2 id
	__u32 pid;       // tgid
	__u32 tid;
	char comm[16];
	char attr[NAME_LEN];
	char value[NAME_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct qwriter_key);
	__type(value, struct qwriter);
} writers SEC(".maps");

// self_tgid is the agent's own tgid, set at load time: its writes are not
// recorded.
volatile const __u32 self_tgid = 0;

// record stores the current task as the last writer of the disk whose
// kobject is disk, writing attr with page.
static __always_inline void record(struct kobject *disk, struct attribute *attr, const char *page)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((__u32)(id >> 32) == self_tgid)
		return;
	struct qwriter_key key = {};
	const char *name = BPF_CORE_READ(disk, name);
	if (!name || bpf_probe_read_kernel_str(key.disk, sizeof(key.disk), name) <= 0)
		return;
	struct qwriter w = {};
	w.time_ns = bpf_ktime_get_ns();
	w.cgroup_id = bpf_get_current_cgroup_id();
	w.pid = id >> 32;
	w.tid = (__u32)id;
	bpf_get_current_comm(w.comm, sizeof(w.comm));
	const char *an = BPF_CORE_READ(attr, name);
	if (an)
		bpf_probe_read_kernel_str(w.attr, sizeof(w.attr), an);
	if (page)
		bpf_probe_read_kernel_str(w.value, sizeof(w.value), page);
	bpf_map_update_elem(&writers, &key, &w, BPF_ANY);
}

// fentry programs (BPF trampolines, 5.5+), tried first: they need no
// kprobes, which some kernels are built without.
SEC("fentry/queue_attr_store")
int BPF_PROG(fentry_queue_attr_store, struct kobject *kobj, struct attribute *attr, const char *page)
{
	record(BPF_CORE_READ(kobj, parent), attr, page);
	return 0;
}

SEC("fentry/elv_attr_store")
int BPF_PROG(fentry_elv_attr_store, struct kobject *kobj, struct attribute *attr, const char *page)
{
	record(BPF_CORE_READ(kobj, parent, parent), attr, page);
	return 0;
}

// kprobe programs: the fallback where fentry cannot attach.
SEC("kprobe/queue_attr_store")
int BPF_KPROBE(kprobe_queue_attr_store, struct kobject *kobj, struct attribute *attr, const char *page)
{
	record(BPF_CORE_READ(kobj, parent), attr, page);
	return 0;
}

SEC("kprobe/elv_attr_store")
int BPF_KPROBE(kprobe_elv_attr_store, struct kobject *kobj, struct attribute *attr, const char *page)
{
	record(BPF_CORE_READ(kobj, parent, parent), attr, page);
	return 0;
}
