#!/usr/bin/env bash
# Prints what this host's kernel offers the tests and the agent, as a
# Markdown list for docs/internals.md: block-layer schedulers (bfq or
# not), tracefs, kprobes, the ftrace function tracer, which kinds of BPF
# program load (hack/bpfprobe, as root), BTF, cgroup versions,
# device-mapper, loop, zram, ublk, nbd, null_blk, blk-throttle, lockdown,
# the capabilities and memlock limit of this shell. It only reads: it
# mounts nothing, loads no module, writes no sysfs file (the BPF programs
# hack/bpfprobe tries are two instructions, released at once).
#
# usage: hack/host-facts.sh   (as root for the BPF and tracefs lines)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# cfg NAME: CONFIG_NAME's value in the kernel's config ("y", "m", "n" when
# unset, "?" without a config to read).
kconfig=""
if [[ -r /proc/config.gz ]]; then
	kconfig=$(zcat /proc/config.gz)
elif [[ -r /boot/config-$(uname -r) ]]; then
	kconfig=$(cat "/boot/config-$(uname -r)")
fi
cfg() {
	[[ -n $kconfig ]] || { echo "?"; return; }
	local v
	v=$(grep -E "^CONFIG_$1=" <<<"$kconfig" | cut -d= -f2)
	echo "${v:-n}"
}
yesno() { if "$@" >/dev/null 2>&1; then echo yes; else echo no; fi; }

echo "- kernel: $(uname -r) ($(uname -m)), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM; config: $([[ -n $kconfig ]] && echo read || echo "not readable (no /proc/config.gz or /boot/config-*)")"

# Schedulers: a loop device's list (loop devices exist unbound), else the
# first block device's.
sched=""
for f in /sys/block/loop*/queue/scheduler /sys/block/*/queue/scheduler; do
	[[ -r $f ]] && { sched=$(tr -d '[]' <"$f" | xargs); break; }
done
echo "- block schedulers offered: ${sched:-none found} (CONFIG_IOSCHED_BFQ=$(cfg IOSCHED_BFQ), CONFIG_MQ_IOSCHED_KYBER=$(cfg MQ_IOSCHED_KYBER), CONFIG_MQ_IOSCHED_DEADLINE=$(cfg MQ_IOSCHED_DEADLINE)); bfq: $([[ " $sched " == *" bfq "* ]] && echo yes || echo no)"

tracefs=$(awk '$3 == "tracefs" {print $2; exit}' /proc/mounts)
echo "- tracefs: $([[ -n $tracefs ]] && echo "mounted at $tracefs" || echo "not mounted") (in /proc/filesystems: $(yesno grep -qw tracefs /proc/filesystems))"
t=${tracefs:-/sys/kernel/tracing}
echo "- kprobes: CONFIG_KPROBES=$(cfg KPROBES); kprobe_events: $([[ -e $t/kprobe_events ]] && echo present || echo absent); uprobes: CONFIG_UPROBE_EVENTS=$(cfg UPROBE_EVENTS)"
ff="not checked (tracefs not mounted)"
if [[ -n $tracefs ]]; then
	if err=$(head -c1 "$t/available_filter_functions" 2>&1 >/dev/null); then
		ff="open (available_filter_functions readable)"
	else
		ff="closed (available_filter_functions: ${err##*: })"
	fi
fi
echo "- ftrace function tracer: CONFIG_FUNCTION_TRACER=$(cfg FUNCTION_TRACER), CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS=$(cfg DYNAMIC_FTRACE_WITH_DIRECT_CALLS); to this process: $ff"
echo "- BTF: /sys/kernel/btf/vmlinux $([[ -r /sys/kernel/btf/vmlinux ]] && echo present || echo absent) (CONFIG_DEBUG_INFO_BTF=$(cfg DEBUG_INFO_BTF))"
if [[ $(id -u) -eq 0 ]] && command -v go >/dev/null 2>&1; then
	echo "- BPF programs this root process may load (hack/bpfprobe):"
	go run ./hack/bpfprobe 2>&1 | sed 's/^/  /'
else
	echo "- BPF programs: not probed (needs root and go)"
fi

v1=$(awk '$3 == "cgroup" {n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] ~ /^(cpu|cpuacct|cpuset|memory|blkio|io|pids|devices|freezer|net_cls|perf_event|hugetlb|rdma|misc)$/) c[o[i]] = 1} END {for (k in c) printf "%s ", k}' /proc/mounts | xargs -n1 2>/dev/null | sort | xargs)
v2=$(awk '$3 == "cgroup2" {printf "%s ", $2}' /proc/mounts | xargs)
ctl=""
for m in $v2; do [[ -r $m/cgroup.controllers ]] && ctl+="$m: $(xargs <"$m/cgroup.controllers"); "; done
echo "- cgroups: v1 controllers mounted: ${v1:-none}; v2 mounted at: ${v2:-nowhere}${ctl:+ (controllers ${ctl%; })}"

echo "- device-mapper: CONFIG_BLK_DEV_DM=$(cfg BLK_DEV_DM), /dev/mapper/control $([[ -e /dev/mapper/control ]] && echo present || echo absent), dm-cache CONFIG_DM_CACHE=$(cfg DM_CACHE)"
echo "- loop: CONFIG_BLK_DEV_LOOP=$(cfg BLK_DEV_LOOP), /dev/loop-control $([[ -e /dev/loop-control ]] && echo present || echo absent); zram: CONFIG_ZRAM=$(cfg ZRAM), /sys/class/zram-control $([[ -e /sys/class/zram-control ]] && echo present || echo absent)"
echo "- ublk: CONFIG_BLK_DEV_UBLK=$(cfg BLK_DEV_UBLK); nbd: CONFIG_BLK_DEV_NBD=$(cfg BLK_DEV_NBD); null_blk: CONFIG_BLK_DEV_NULL_BLK=$(cfg BLK_DEV_NULL_BLK); blk-throttle: CONFIG_BLK_DEV_THROTTLING=$(cfg BLK_DEV_THROTTLING); modules: CONFIG_MODULES=$(cfg MODULES)"

lock="unknown (securityfs not mounted; not mounted here, as this script changes nothing)"
[[ -r /sys/kernel/security/lockdown ]] && lock=$(cat /sys/kernel/security/lockdown)
echo "- lockdown: $lock (CONFIG_SECURITY_LOCKDOWN_LSM=$(cfg SECURITY_LOCKDOWN_LSM)); CONFIG_LSM=$(cfg LSM)"

# Capabilities missing from this shell's effective set (bit → name, as
# include/uapi/linux/capability.h numbers them).
caps=(chown dac_override dac_read_search fowner fsetid kill setgid setuid setpcap linux_immutable net_bind_service net_broadcast net_admin net_raw ipc_lock ipc_owner sys_module sys_rawio sys_chroot sys_ptrace sys_pacct sys_admin sys_boot sys_nice sys_resource sys_time sys_tty_config mknod lease audit_write audit_control setfcap mac_override mac_admin syslog wake_alarm block_suspend audit_read perfmon bpf checkpoint_restore)
eff=$((16#$(awk '/^CapEff/ {print $2}' /proc/self/status)))
missing=()
for i in "${!caps[@]}"; do ((eff >> i & 1)) || missing+=("cap_${caps[i]}"); done
echo "- this shell: uid $(id -u), capabilities missing from its effective set: ${missing[*]:-none}; memlock limit $(ulimit -l) KiB (hard $(ulimit -Hl))"
