#!/usr/bin/env bash
# Installs what the VM lab (internal/testutil/vmlab, make test-vm) needs,
# when it is missing, from Debian's archive:
#   qemu-system-x86 (without recommends), busybox-static, cpio, xz-utils
#   (to unpack the kernel's vmlinux), fio, dmsetup, lvm2, e2fsprogs (mke2fs)
#   and coreutils (tac) (copied into the guest's initramfs with their
#   libraries);
# and makes sure the package lists know linux-image-amd64, whose kernel the
# tests fetch with apt-get download (never installed) into
# ~/.cache/shadowtune/vm.
# Unlike hack/ensure-test-deps.sh it fails when it cannot: make test-vm is
# asked for explicitly and cannot run without these.
#
# usage: hack/ensure-vm-deps.sh   (make test-vm runs it first; root)
set -euo pipefail

note() { echo "ensure-vm-deps: $*" >&2; }

declare -A need=([qemu-system-x86_64]=qemu-system-x86 [busybox]=busybox-static [cpio]=cpio [xz]=xz-utils
	[fio]=fio [dmsetup]=dmsetup [lvm]=lvm2 [mke2fs]=e2fsprogs [tac]=coreutils
	[ldd]=libc-bin [dpkg]=dpkg)
missing=()
for cmd in "${!need[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd || -x /sbin/$cmd ]] || missing+=("${need[$cmd]}")
done
# busybox from busybox (not -static) is dynamic: the initramfs needs the static one.
if command -v busybox >/dev/null 2>&1 && ldd "$(command -v busybox)" >/dev/null 2>&1; then
	missing+=(busybox-static)
fi
have_kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | grep -q 'Depends: linux-image-'; }

if [[ ${#missing[@]} -eq 0 ]] && have_kernel_pkg; then
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	note "not root: cannot install ${missing[*]:-nothing} or update the package lists"
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	note "no apt-get: install ${missing[*]} by hand (Debian 12 package names)"
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
note "apt-get update${missing[*]:+; installing ${missing[*]}}"
apt-get update -qq >/dev/null
if [[ ${#missing[@]} -gt 0 ]]; then
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
have_kernel_pkg || { note "apt-cache knows no linux-image-amd64"; exit 1; }
