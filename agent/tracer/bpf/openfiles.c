// SPDX-License-Identifier: GPL-2.0
//
// openfiles: lists the regular files open on given file system devices,
// with each file's own read-ahead size and mode, so that the agent can
// bring the files that follow a device's read-ahead up to a new value.
// Compiled by bpf2go (../gen.go) into openfiles_bpfel.o / openfiles_bpfeb.o,
// which are committed.
//
// Why: the kernel copies a device's read-ahead (read_ahead_kb, the bdi's
// ra_pages) into a file's own state when the file is opened
// (file_ra_state_init, mm/readahead.c), and read(2) and an mmap's fault
// read-around use that copy (page_cache_sync_ra, do_sync_mmap_readahead in
// mm/filemap.c). A change of read_ahead_kb therefore reaches only files
// opened after it. POSIX_FADV_NORMAL sets a file's copy to the device's
// current value (mm/fadvise.c), on any descriptor of the same open file.
//
// Hook: a BPF iterator over every task's open files (iter/task_file,
// kernel/bpf/task_iter.c; threads that share their parent's file table are
// visited once). For each regular file whose inode's super block is on a
// device in devs (s_dev, major<<20 | minor), it writes one struct
// open_file to the iterator's output. It reads struct file fields
// (f_inode, f_mode, f_ra.ra_pages) with CO-RE relocations. It runs only
// when the agent reads the iterator, after it changes a device's
// read-ahead: nothing on the I/O path.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define S_IFMT 00170000
#define S_IFREG 0100000

// MAX_DEVS bounds devs (openFilesMaxDevs in openfiles_linux.go).
#define MAX_DEVS 256

// devs: the file system devices whose files are listed (s_dev → 1).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_DEVS);
	__type(key, __u32);
	__type(value, __u8);
} devs SEC(".maps");

// open_file is one open regular file: the process (tgid, in the initial
// PID namespace) and descriptor that hold it, its file system device and
// inode, its own read-ahead (f_ra.ra_pages, in pages), f_mode, and
// mapped: 1 when any process maps the file (its address_space's i_mmap
// tree has a VMA), whose faults then read around by that read-ahead.
struct open_file {
	__u32 tgid;
	__u32 fd;
	__u32 dev;
	__u32 ra_pages;
	__u64 ino;
	__u32 f_mode;
	__u32 mapped;
};

// Forces struct open_file into the BTF for bpf2go's -type.
const struct open_file *unused_open_file __attribute__((unused));

SEC("iter/task_file")
int open_files(struct bpf_iter__task_file *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct file *file = ctx->file;
	struct open_file r = {};
	struct inode *inode;
	__u32 dev;

	if (!task || !file)
		return 0;
	inode = BPF_CORE_READ(file, f_inode);
	if (!inode)
		return 0;
	if ((BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFREG)
		return 0;
	dev = BPF_CORE_READ(inode, i_sb, s_dev);
	if (!bpf_map_lookup_elem(&devs, &dev))
		return 0;
	r.tgid = BPF_CORE_READ(task, tgid);
	r.fd = ctx->fd;
	r.dev = dev;
	r.ra_pages = BPF_CORE_READ(file, f_ra.ra_pages);
	r.ino = BPF_CORE_READ(inode, i_ino);
	r.f_mode = BPF_CORE_READ(file, f_mode);
	r.mapped = BPF_CORE_READ(file, f_mapping, i_mmap.rb_root.rb_node) != 0;
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}
