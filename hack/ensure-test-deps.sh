#!/usr/bin/env bash
# Installs what the tests that need real parts of the machine need, when it
# is missing, and checks what cannot be installed:
#   - fio (the workloads of agent/integration_linux_test.go and
#     cmd/shadowtune/app/run_test.go), from apt; $FIO overrides its path,
#     as in the tests (package internal/testutil/need);
#   - losetup (util-linux; loop devices) and mkfs.ext4 (e2fsprogs);
#   - promtool (Debian's prometheus package; charts/monitoring_test.go runs
#     promtool test rules on the chart's PrometheusRule);
#   - a static busybox (Debian's busybox-static; agent/dmcache's chroot
#     test builds a root file system around it);
#   - tracefs mounted at /sys/kernel/tracing (the tracefs tracer);
#   - kube-apiserver and etcd for the envtest tests
#     (internal/testutil/envtest), through hack/k8s-bins.sh: built once
#     into ~/.cache/shadowtune (several minutes the first time), where make
#     test points KUBEBUILDER_ASSETS;
#   - root, /dev/loop-control and a memory cgroup, which it can only check.
# Packages are installed without recommended packages, and no service of
# theirs is started or left enabled (hack/lib/apt.sh): Debian's prometheus
# would otherwise bring prometheus-node-exporter and start both on every
# interface.
#
# It is idempotent and prints nothing when everything is there. With
# CI=true (as .ci/run sets it) anything still missing fails the build, with
# one line per missing part; otherwise it says which tests will skip and
# exits 0.
#
# usage: hack/ensure-test-deps.sh   (make test runs it first)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=hack/lib/apt.sh
. hack/lib/apt.sh

note() { echo "ensure-test-deps: $*" >&2; }
ci=false
case ${CI:-} in 1 | t | T | true | TRUE | True) ci=true ;; esac

# tool NAME: the path the tests use for NAME ($NAME_UPPER overrides it,
# as package need's Tool does), or nothing.
tool() {
	local env
	env=$(tr '[:lower:]' '[:upper:]' <<<"$1" | tr -c '[:upper:][:digit:]\n' '_')
	if [[ -n ${!env+set} ]]; then
		[[ -n ${!env} ]] && command -v "${!env}" 2>/dev/null
	else
		command -v "$1" 2>/dev/null
	fi
}
# shellcheck disable=SC2317 # called through ${provides[...]}
# static_busybox: a busybox on PATH that is statically linked (Debian's
# busybox package's is dynamic; busybox-static's is not).
static_busybox() {
	local bb out
	bb=$(tool busybox) || return 1
	out=$(LC_ALL=C ldd "$bb" 2>&1) # ldd exits 1 for a static program
	[[ $out == *"not a dynamic executable"* ]]
}
tracefs_mounted() { grep -qs ' /sys/kernel/tracing tracefs ' /proc/mounts; }

# package -> check: what each package provides, checked before and after.

declare -A provides=(
	[fio]='tool fio'
	[prometheus]='tool promtool'
	[busybox-static]='static_busybox'
	[util-linux]='tool losetup'
	[e2fsprogs]='tool mkfs.ext4'
)
# why_missing PKG: what is still missing of package PKG, one line.
why_missing() {
	local check=${provides[$1]} name env
	name=${check#tool }
	[[ $check == static_busybox ]] && name=busybox
	env=$(tr '[:lower:]' '[:upper:]' <<<"$name" | tr -c '[:upper:][:digit:]\n' '_')
	if [[ -n ${!env+set} ]]; then
		echo "$env=${!env} is not an executable program (the tests use \$$env)"
	elif [[ $check == static_busybox ]] && tool busybox >/dev/null; then
		echo "$(tool busybox) is dynamically linked, and installing $1 did not replace it"
	elif dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; then
		echo "no $name on PATH, though package $1 is installed (PATH=$PATH)"
	else
		echo "no $name on PATH after installing $1"
	fi
}
missing_pkgs() {
	local p
	for p in fio prometheus busybox-static util-linux e2fsprogs; do
		${provides[$p]} >/dev/null || echo "$p"
	done
}

problems=()
k8s_bins=hack/k8s-bins.sh
if ! "$k8s_bins" --print-dir >/dev/null 2>&1; then
	note "getting kube-apiserver and etcd for the envtest tests (hack/k8s-bins.sh; the first build takes several minutes)"
	"$k8s_bins" kube-apiserver >/dev/null || problems+=("kube-apiserver and etcd: hack/k8s-bins.sh failed (see above)")
fi

mapfile -t missing < <(missing_pkgs)
if [[ $(id -u) -ne 0 ]]; then
	problems+=("root: not root, so nothing is installed and the tests that need root (loop devices, eBPF, fio) cannot run${missing[*]:+; missing: ${missing[*]}}")
else
	if [[ ${#missing[@]} -gt 0 ]]; then
		if ! command -v apt-get >/dev/null 2>&1; then
			note "no apt-get: install ${missing[*]} by hand (Debian package names)"
		else
			apt_install_quiet "${missing[@]}"
		fi
		for p in "${missing[@]}"; do
			${provides[$p]} >/dev/null || problems+=("$p: $(why_missing "$p")")
		done
	fi
	if ! tracefs_mounted; then
		if [[ -d /sys/kernel/tracing ]] && mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
			note "mounted tracefs at /sys/kernel/tracing"
		else
			problems+=("tracefs: could not mount it at /sys/kernel/tracing")
		fi
	fi
	[[ -e /dev/loop-control ]] || problems+=("loop devices: no /dev/loop-control (load the loop module, or give the container the device)")
fi
if ! grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null && ! grep -qs ':memory:' /proc/self/cgroup; then
	problems+=("memory cgroup: neither a cgroup v2 memory controller at /sys/fs/cgroup nor a cgroup v1 memory hierarchy")
fi

[[ ${#problems[@]} -eq 0 ]] && exit 0
if $ci; then
	for p in "${problems[@]}"; do note "CI=true: missing $p"; done
	exit 1
fi
for p in "${problems[@]}"; do note "missing $p: the tests that need it will skip (they fail under CI=true)"; done
exit 0
