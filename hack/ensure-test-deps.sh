#!/usr/bin/env bash
# Installs what the root-only integration tests need, when it is missing:
#   - fio (the workloads of agent/integration_linux_test.go and
#     cmd/shadowtune/app/run_test.go), from apt;
#   - losetup (util-linux; loop devices), normally present;
#   - promtool (Debian's prometheus package; charts/monitoring_test.go runs
#     promtool test rules on the chart's PrometheusRule);
#   - a static busybox (Debian's busybox-static; agent/dmcache's chroot
#     test builds a root file system around it);
#   - tracefs mounted at /sys/kernel/tracing (the tracefs tracer);
#   - kube-apiserver and etcd for the envtest tests
#     (internal/testutil/envtest), through hack/k8s-bins.sh: built once
#     into ~/.cache/shadowtune (several minutes the first time), where make
#     test points KUBEBUILDER_ASSETS.
# It is idempotent and prints nothing when everything is there. It never
# fails the build: without root, or off Debian, it only says which tests
# will skip.
#
# usage: hack/ensure-test-deps.sh   (make test runs it first)
set -uo pipefail

note() { echo "ensure-test-deps: $*" >&2; }

missing=()
command -v fio >/dev/null 2>&1 || missing+=(fio)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
# Only busybox-static's busybox is static (busybox's is dynamic).
{ command -v busybox >/dev/null 2>&1 && ! file -L "$(command -v busybox)" 2>/dev/null | grep -q dynamic; } || missing+=(busybox-static)
command -v losetup >/dev/null 2>&1 || [[ -x /usr/sbin/losetup || -x /sbin/losetup ]] || missing+=(util-linux)
tracefs_mounted() { grep -qs ' /sys/kernel/tracing tracefs ' /proc/mounts; }

k8s_bins="$(dirname "$0")/k8s-bins.sh"
if ! "$k8s_bins" --print-dir >/dev/null 2>&1; then
	note "getting kube-apiserver and etcd for the envtest tests (hack/k8s-bins.sh; the first build takes several minutes)"
	if ! "$k8s_bins" kube-apiserver >/dev/null; then
		note "hack/k8s-bins.sh failed: the envtest tests will skip (or fail with CI=true)"
	fi
fi

if [[ $(id -u) -ne 0 ]]; then
	note "not root: the tests that need root (loop devices, eBPF, fio) will skip${missing[*]:+; missing: ${missing[*]}}"
	exit 0
fi
if [[ ${#missing[@]} -eq 0 ]] && tracefs_mounted; then
	exit 0
fi

if [[ ${#missing[@]} -gt 0 ]]; then
	if command -v apt-get >/dev/null 2>&1; then
		note "installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		if ! { apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
			note "could not install ${missing[*]}: the tests that need them will skip"
		fi
	else
		note "no apt-get: install ${missing[*]} by hand, or the tests that need them will skip"
	fi
fi

if ! tracefs_mounted; then
	if [[ -d /sys/kernel/tracing ]] && mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
		note "mounted tracefs at /sys/kernel/tracing"
	else
		note "could not mount tracefs at /sys/kernel/tracing: the tracefs tracer tests will skip or mount it themselves"
	fi
fi
exit 0
