#!/usr/bin/env bash
# Makes a real kube-apiserver and etcd (and, on request, the other Kubernetes
# node binaries) available for controller-runtime envtest and for a
# single-node e2e cluster, from parts reachable without a container registry
# (see /work/shared/notes/local-cluster.md):
#
#   - etcd: the Debian package etcd-server (installed with apt-get when no
#     `etcd` is on PATH; root only). Its service is kept from starting during
#     the install (policy-rc.d answering 101), and stopped and disabled again
#     should it run anyway, so nothing is left listening on 2379.
#   - kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
#     kube-proxy: built with Go from the module proxy at K8S_VERSION, through
#     a generated wrapper module (k8s.io/kubernetes cannot be `go install`ed:
#     its go.mod replaces the staging modules with local paths, so the
#     wrapper replaces each of them with the published k8s.io/<name>
#     v0.<minor>.<patch> instead). The checksum database is switched off for
#     that throwaway wrapper only (it fails here for some modules), never for
#     the project's go.sum.
#   - kubectl: a symlink to the installed one, when there is one (built like
#     the others when asked for by name and none is installed).
#
# Everything goes to ${SHADOWTUNE_CACHE:-~/.cache/shadowtune}/k8s/<version>/:
#   bin/  kube-apiserver, etcd, kubectl, ... — usable as envtest's
#         KUBEBUILDER_ASSETS / BinaryAssetsDirectory and as an e2e cluster's
#         binaries;
#   src/  the wrapper module (go.mod, go.sum).
# Cached binaries whose --version matches are reused; Go's build cache makes
# rebuilds of the others fast. Concurrent runs serialise on a lock file.
#
# usage: hack/k8s-bins.sh [--print-dir] [BINARY...]
#   BINARY  kube-apiserver (the default), kube-controller-manager,
#           kube-scheduler, kubelet, kube-proxy, kubectl, etcd; etcd is
#           always included.
#   --print-dir  build and install nothing: print the bin directory if the
#           binaries are there already, else fail (exit 1) saying so.
# The bin directory is printed on the last line of stdout; progress and
# errors go to stderr. Nothing is printed on stderr when all is cached.
#
# environment:
#   K8S_VERSION       Kubernetes version to build (default v1.33.13: the
#                     module proxy here lacks the v0.32.x staging modules
#                     kube-controller-manager, kube-scheduler and kubelet
#                     need, so 1.33 is the oldest minor with all four; one
#                     version serves envtest and the e2e cluster)
#   SHADOWTUNE_CACHE  cache root (default ~/.cache/shadowtune)
#   GO                go command (default go)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.33.13}
CACHE_ROOT=${SHADOWTUNE_CACHE:-${HOME:?HOME is not set}/.cache/shadowtune}
GO=${GO:-go}
KNOWN_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd)

prog=k8s-bins
note() { echo "$prog: $*" >&2; }
die() {
	echo "$prog: error: $*" >&2
	exit 1
}

usage() {
	sed -n "s/^# \{0,1\}//; /^usage:/,/^environment:/p" "$0" | sed "\$d" >&2
}

print_dir=false
want=()
for arg in "$@"; do
	case $arg in
	--print-dir) print_dir=true ;;
	-h | --help)
		usage
		exit 0
		;;
	-*)
		usage
		die "unknown option $arg"
		;;
	*)
		known=false
		for k in "${KNOWN_BINARIES[@]}"; do [[ $arg == "$k" ]] && known=true; done
		$known || die "unknown binary '$arg' (known: ${KNOWN_BINARIES[*]})"
		want+=("$arg")
		;;
	esac
done
[[ ${#want[@]} -gt 0 ]] || want=(kube-apiserver)

# v1.<minor>.<patch>[-pre] -> the staging modules' v0.<minor>.<patch>[-pre].
if [[ ! $K8S_VERSION =~ ^v1\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.-]+)?$ ]]; then
	die "K8S_VERSION=$K8S_VERSION: want v1.<minor>.<patch>, e.g. v1.32.13"
fi
k8s_minor=${BASH_REMATCH[1]}
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}${BASH_REMATCH[3]}"

root="$CACHE_ROOT/k8s/$K8S_VERSION"
bin="$root/bin"
src="$root/src"

# The binaries Kubernetes builds from k8s.io/kubernetes/cmd/<name>; etcd is
# always wanted.
k8s_wanted=()
want_kubectl=false
for b in "${want[@]}"; do
	case $b in
	etcd) ;;
	kubectl) want_kubectl=true ;;
	*) [[ " ${k8s_wanted[*]} " == *" $b "* ]] || k8s_wanted+=("$b") ;;
	esac
done

# version_ok BINARY: the cached binary exists and reports K8S_VERSION.
version_ok() {
	local out
	[[ -x $bin/$1 ]] || return 1
	out=$("$bin/$1" --version 2>/dev/null) || return 1
	[[ $out == *" $K8S_VERSION" || $out == *" $K8S_VERSION "* ]]
}

if $print_dir; then
	missing=()
	[[ -x $bin/etcd ]] || missing+=(etcd)
	for b in "${k8s_wanted[@]}"; do [[ -x $bin/$b ]] || missing+=("$b"); done
	if $want_kubectl && [[ ! -x $bin/kubectl ]]; then missing+=(kubectl); fi
	if [[ ${#missing[@]} -gt 0 ]]; then
		die "$bin lacks ${missing[*]}: run hack/k8s-bins.sh ${want[*]} (make envtest-assets K8S_BINS=\"${want[*]}\")"
	fi
	echo "$bin"
	exit 0
fi

mkdir -p "$bin" "$src"

# One run at a time per version (make test and a test helper may race).
if command -v flock >/dev/null 2>&1; then
	exec 9>"$root/.lock"
	if ! flock -n 9; then
		note "waiting for another k8s-bins.sh run (lock $root/.lock)"
		flock 9
	fi
fi

# on_path NAME: the executable NAME on PATH outside this bin directory (PATH
# may hold it: a symlink must not point at itself).
on_path() {
	local d
	local IFS=:
	for d in $PATH; do
		[[ -n $d && -f $d/$1 && -x $d/$1 && ! $d -ef $bin ]] || continue
		echo "$d/$1"
		return 0
	done
	return 1
}

# --- etcd --------------------------------------------------------------------

# etcd_listening: something listens on etcd's default client port 2379.
etcd_listening() {
	if command -v ss >/dev/null 2>&1; then
		[[ -n $(ss -Hltn 'sport = :2379' 2>/dev/null) ]]
	else
		grep -qi ':094B ' /proc/net/tcp /proc/net/tcp6 2>/dev/null # 2379 = 0x094B
	fi
}

install_etcd() {
	[[ $(id -u) -eq 0 ]] || die "etcd is not installed and this is not root: install the Debian package etcd-server (apt-get install etcd-server) or put etcd on PATH"
	command -v apt-get >/dev/null 2>&1 || die "etcd is not installed and there is no apt-get: put an etcd (3.4 or newer) on PATH"
	local listening_before=false
	etcd_listening && listening_before=true

	# Keep the package's service from starting: invoke-rc.d (which the
	# maintainer scripts use) asks /usr/sbin/policy-rc.d and does nothing
	# on 101. Leave an existing policy that already says 101 alone;
	# otherwise put ours in place for the install and restore afterwards.
	local policy=/usr/sbin/policy-rc.d backup=""
	local rc=0
	if [[ -x $policy ]]; then
		"$policy" etcd start >/dev/null 2>&1 || rc=$?
	else
		rc=none
	fi
	if [[ $rc != 101 ]]; then
		if [[ -e $policy ]]; then
			backup="$policy.k8s-bins-backup.$$"
			mv "$policy" "$backup"
		fi
		printf '#!/bin/sh\n# temporary, hack/k8s-bins.sh: start no services during apt-get install\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		# shellcheck disable=SC2064 # expand now: restore what was there
		trap "rm -f '$policy'; ${backup:+mv '$backup' '$policy';} :" EXIT
	fi

	note "installing etcd (Debian package etcd-server)"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get update -qq >/dev/null; then
		die "apt-get update failed"
	fi
	if ! apt-get install -y -qq --no-install-recommends etcd-server >/dev/null; then
		die "apt-get install etcd-server failed"
	fi

	if [[ $rc != 101 ]]; then
		rm -f "$policy"
		[[ -n $backup ]] && mv "$backup" "$policy"
		trap - EXIT
	fi

	# Should the service have started anyway (a policy that did not hold,
	# an init system that ignores it), stop it and keep it from starting
	# at boot: the tests run their own etcd on free ports.
	if ! $listening_before && etcd_listening; then
		note "the etcd package started a system etcd on :2379: stopping and disabling it"
		if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; then
			systemctl stop etcd.service || true
			systemctl disable etcd.service || true
		else
			service etcd stop || invoke-rc.d etcd stop || true
			update-rc.d etcd disable || true
		fi
		if etcd_listening; then
			note "warning: something still listens on :2379 (see ss -ltnp 'sport = :2379'); envtest uses other ports, so the tests are not affected"
		fi
	elif [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; then
		# Not started now, but enabled for the next boot.
		systemctl disable etcd.service >/dev/null 2>&1 || true
	elif command -v update-rc.d >/dev/null 2>&1; then
		update-rc.d etcd disable >/dev/null 2>&1 || true
	fi
	on_path etcd >/dev/null || die "etcd-server is installed but there is no etcd on PATH"
}

on_path etcd >/dev/null || install_etcd
etcd_path=$(on_path etcd)
if [[ $(readlink "$bin/etcd" 2>/dev/null) != "$etcd_path" ]]; then
	ln -sfn "$etcd_path" "$bin/etcd"
	note "etcd: $("$etcd_path" --version 2>/dev/null | head -n1) ($etcd_path)"
fi

# --- kubectl -------------------------------------------------------------------

# A symlink to the installed kubectl, unless one was built here.
if [[ ! -f $bin/kubectl || -L $bin/kubectl ]]; then
	if kubectl_path=$(on_path kubectl); then
		[[ $(readlink "$bin/kubectl" 2>/dev/null) == "$kubectl_path" ]] || ln -sfn "$kubectl_path" "$bin/kubectl"
	elif $want_kubectl; then
		rm -f "$bin/kubectl"
		k8s_wanted+=(kubectl)
	fi
fi

# --- Kubernetes binaries -------------------------------------------------------

to_build=()
for b in "${k8s_wanted[@]}"; do
	version_ok "$b" || to_build+=("$b")
done

if [[ ${#to_build[@]} -gt 0 ]]; then
	command -v "$GO" >/dev/null 2>&1 || die "no Go toolchain ($GO) on PATH: needed to build ${to_build[*]}"

	# The wrapper module's go commands: modules from the proxy, go.mod and
	# go.sum updated as needed, no checksum database (for this throwaway
	# module only), no go.work, no toolchain download.
	gorun() {
		(cd "$src" && env GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false" GOSUMDB=off "$GO" "$@")
	}

	header="// Generated by hack/k8s-bins.sh: builds the Kubernetes $K8S_VERSION binaries."
	if [[ ! -s $src/go.mod ]] || ! grep -qxF "$header" "$src/go.mod"; then
		note "generating the wrapper module for k8s.io/kubernetes $K8S_VERSION in $src"
		rm -f "$src/go.mod" "$src/go.sum"
		# `go mod download` needs no module: run it in an empty directory.
		info=$(cd "$src" && env GOWORK=off GOTOOLCHAIN=local GOFLAGS= GOSUMDB=off "$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" 2>&1) ||
			die "cannot download k8s.io/kubernetes@$K8S_VERSION from the module proxy ($($GO env GOPROXY)):
$info"
		gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")
		[[ -f $gomod ]] || die "no go.mod for k8s.io/kubernetes@$K8S_VERSION in: $info"

		# Staging modules: "k8s.io/<name> => ./staging/src/k8s.io/<name>",
		# in a replace block or on a replace line.
		mapfile -t staging < <(sed -n 's#^[[:space:]]*\(replace[[:space:]]\{1,\}\)\{0,1\}\(k8s\.io/[^[:space:]]*\)[[:space:]]\{1,\}=>[[:space:]]\{1,\}\./staging/.*#\2#p' "$gomod" | sort -u)
		[[ ${#staging[@]} -gt 0 ]] || die "found no staging replacements in $gomod"
		# Keep the release's language version and GODEBUG defaults: they only
		# take effect from the main module's go.mod.
		go_line=$(grep -m1 '^go [0-9]' "$gomod" || echo "go 1.23.0")
		{
			echo "$header"
			echo "module shadowtune.local/k8s-bins"
			echo
			echo "$go_line"
			echo
			sed -n '/^godebug[[:space:]]*(/,/^)/p; /^godebug[[:space:]]\{1,\}[^(]/p' "$gomod"
			echo
			echo "require k8s.io/kubernetes $K8S_VERSION"
			echo
			echo "replace ("
			for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
			echo ")"
		} >"$src/go.mod.tmp"
		mv "$src/go.mod.tmp" "$src/go.mod"
	fi

	build_date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(gorun env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.info" 2>/dev/null || true)
	ldflags="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor -X $p.gitTreeState=clean"
		[[ -z $build_date ]] || ldflags+=" -X $p.buildDate=$build_date"
	done

	tmp="$root/.build.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	trap 'rm -rf "$tmp"' EXIT
	for b in "${to_build[@]}"; do
		note "building $b $K8S_VERSION (the first build takes minutes; later ones reuse Go's build cache)"
		start=$SECONDS
		log="$tmp/$b.log"
		if ! CGO_ENABLED=0 gorun build -trimpath -ldflags="$ldflags" -o "$tmp/$b" "k8s.io/kubernetes/cmd/$b" >"$log" 2>&1; then
			# Should a binary need cgo, build it with cgo when there is a C compiler.
			if command -v "$(gorun env CC)" >/dev/null 2>&1 &&
				CGO_ENABLED=1 gorun build -trimpath -ldflags="$ldflags" -o "$tmp/$b" "k8s.io/kubernetes/cmd/$b" >>"$log" 2>&1; then
				note "$b: built with cgo (CGO_ENABLED=0 failed)"
			else
				# The module proxy here is a partial mirror: name what it lacks.
				mapfile -t absent < <(sed -n 's#.*[: ]\([^ :]*@v[^ :]*\): reading https\{0,1\}://.*#\1#p' "$log" | sort -u)
				if [[ ${#absent[@]} -gt 0 ]] && grep -q 'not available\|404 Not Found\|403 Forbidden\|410 Gone' "$log"; then
					die "building $b $K8S_VERSION: the module proxy ($(gorun env GOPROXY)) lacks ${absent[*]}, so $b cannot be built at $K8S_VERSION here; choose a K8S_VERSION whose staging modules are all on the proxy (v1.33.13 had all of them when this script was written: K8S_VERSION=v1.33.13 $0 ${want[*]})"
				fi
				tail -n 40 "$log" >&2
				die "building $b $K8S_VERSION failed (the log's end above; wrapper module in $src)"
			fi
		fi
		got=$("$tmp/$b" --version 2>&1 || true)
		[[ $got == *" $K8S_VERSION" || $got == *" $K8S_VERSION "* ]] || die "$b reports '$got', want $K8S_VERSION"
		mv -f "$tmp/$b" "$bin/$b"
		note "$b: $got, built in $((SECONDS - start)) s"
	done
	rm -rf "$tmp"
	trap - EXIT
fi

echo "$bin"
