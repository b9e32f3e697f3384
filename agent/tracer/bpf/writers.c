// SPDX-License-Identifier: GPL-2.0
//
// writers: names the process that writes a block device's queue settings
// through sysfs (/sys/block/DEV/queue/* and queue/iosched/*), so that the
// agent can say who changed a setting it governs. Compiled by bpf2go
// (../gen.go) into writers_bpfel.o / writers_bpfeb.o, which are committed.
//
// Hooks, tried in this order (WriterProbe loads one set):
//   1. fentry (BPF trampolines), or 2. kprobes where fentry cannot attach,
//      on the sysfs store functions (block/blk-sysfs.c, block/elevator.c):
//        queue_attr_store(kobj, attr, page, length)  every write of a
//            queue/* file, queue/scheduler and queue/read_ahead_kb among
//            them; kobj is the queue's kobject, whose parent is the
//            disk's ("sda")
//        elv_attr_store(kobj, attr, page, length)    every write of a
//            queue/iosched/* file; kobj is the elevator's, whose parent is
//            the queue's
//   3. the raw syscall tracepoint sys_enter (tp_btf, as the block
//      tracer's programs: no tracefs mount, no kprobes, no trampoline),
//      where neither loads: write, pwrite64, writev, pwritev and pwritev2
//      to a sysfs file named DISK/queue/ATTR or DISK/queue/iosched/ATTR
//      under a "block" directory. Kernels that refuse trampolines to root
//      and have no kprobes (this project's 6.18 test machines: fentry,
//      fexit and BPF LSM programs all get EPERM at load, before the
//      verifier runs, and CONFIG_KPROBES is off) still name the writer.
// Each records, per disk, the last writer: its tgid, thread, comm, cgroup
// id, the attribute and the first bytes written, and the time
// (CLOCK_MONOTONIC, ns). Writes by the agent itself (self_tgid) are not
// recorded. CO-RE: the kernel structures' fields are relocated against the
// running kernel's BTF.
//
// Cost: 1 and 2, nothing on the I/O path and a few µs per sysfs write of a
// queue setting, which is rare. 3 runs on every system call of the host
// while it is attached (the kernel takes its traced system call path for
// all tasks) and returns at once unless the call is one of the five
// writes: about 0.1 µs a system call on this project's test machine (see
// WriterProbe in writers_linux.go).

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

// writer fills w with the current task, and says whether it is another
// process than the agent.
static __always_inline bool writer(struct qwriter *w)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((__u32)(id >> 32) == self_tgid)
		return false;
	w->time_ns = bpf_ktime_get_ns();
	w->cgroup_id = bpf_get_current_cgroup_id();
	w->pid = id >> 32;
	w->tid = (__u32)id;
	bpf_get_current_comm(w->comm, sizeof(w->comm));
	return true;
}

// record stores the current task as the last writer of the disk whose
// kobject is disk, writing attr with page.
static __always_inline void record(struct kobject *disk, struct attribute *attr, const char *page)
{
	struct qwriter w = {};
	if (!writer(&w))
		return;
	struct qwriter_key key = {};
	const char *name = BPF_CORE_READ(disk, name);
	if (!name || bpf_probe_read_kernel_str(key.disk, sizeof(key.disk), name) <= 0)
		return;
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

// --- 3: the raw syscall tracepoint -----------------------------------------

// x86-64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl): the
// object is built for amd64 only (gen.go).
#define NR_write 1
#define NR_pwrite64 18
#define NR_writev 20
#define NR_pwritev 296
#define NR_pwritev2 328

#define SYSFS_MAGIC 0x62656572

// dname reads the name of dentry d into buf (NAME_LEN bytes); false when
// it cannot.
static __always_inline bool dname(struct dentry *d, char *buf)
{
	const unsigned char *n = BPF_CORE_READ(d, d_name.name);
	return n && bpf_probe_read_kernel_str(buf, NAME_LEN, n) > 0;
}

// is reports whether the NUL-terminated name in buf equals lit (a string
// literal of fewer than NAME_LEN bytes), its NUL included.
#define is(buf, lit) same((buf), (lit), sizeof(lit))

static __always_inline bool same(const char *a, const char *b, int n)
{
	for (int i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

// fd_file is the struct file of the current task's descriptor fd, or NULL.
static __always_inline struct file *fd_file(unsigned int fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]))
		return NULL;
	return f;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter_write, struct pt_regs *regs, long id)
{
	if (id != NR_write && id != NR_pwrite64 && id != NR_writev && id != NR_pwritev && id != NR_pwritev2)
		return 0;
	struct qwriter w = {};
	if (!writer(&w))
		return 0;
	unsigned int fd = (unsigned int)BPF_CORE_READ(regs, di);
	const char *buf = (const char *)BPF_CORE_READ(regs, si);
	__u64 count = BPF_CORE_READ(regs, dx);
	if (id == NR_writev || id == NR_pwritev || id == NR_pwritev2) {
		struct iovec iov = {}; // the first of count: what a value fits in
		if (count == 0 || bpf_probe_read_user(&iov, sizeof(iov), buf))
			return 0;
		buf = iov.iov_base;
		count = iov.iov_len;
	}
	struct file *f = fd_file(fd);
	if (!f)
		return 0;
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
	if (!d || BPF_CORE_READ(d, d_sb, s_magic) != SYSFS_MAGIC)
		return 0;
	// DISK/queue/ATTR or DISK/queue/iosched/ATTR, DISK in a "block"
	// directory (/sys/devices/.../block/sda).
	char name[NAME_LEN];
	struct dentry *p = BPF_CORE_READ(d, d_parent);
	if (!dname(p, name))
		return 0;
	if (is(name, "iosched")) {
		p = BPF_CORE_READ(p, d_parent);
		if (!dname(p, name))
			return 0;
	}
	if (!is(name, "queue"))
		return 0;
	struct dentry *disk = BPF_CORE_READ(p, d_parent);
	if (!dname(BPF_CORE_READ(disk, d_parent), name) || !is(name, "block"))
		return 0;
	struct qwriter_key key = {};
	if (!dname(disk, key.disk) || !dname(d, w.attr))
		return 0;
	if (count > sizeof(w.value) - 1)
		count = sizeof(w.value) - 1;
	if (buf && count > 0)
		bpf_probe_read_user(w.value, count & (sizeof(w.value) - 1), buf);
	bpf_map_update_elem(&writers, &key, &w, BPF_ANY);
	return 0;
}
