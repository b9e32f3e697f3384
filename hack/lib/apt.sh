# shellcheck shell=bash
# apt_install_quiet PKG...: installs Debian packages for the tests without
# their recommended packages and without starting any service of theirs
# (sourced by hack/ensure-test-deps.sh).
#
#   - apt-get install --no-install-recommends: Debian's prometheus package
#     (wanted for promtool) recommends prometheus-node-exporter and 36
#     more;
#   - /usr/sbin/policy-rc.d answering 101 during the install: invoke-rc.d
#     and deb-systemd-invoke, which the maintainer scripts use, start
#     nothing. An existing policy that already answers 101 is left alone;
#     any other is moved aside and put back afterwards (also on failure);
#   - the systemd units or init scripts the packages shipped and enabled
#     for the next boot are disabled: the tests run the programs
#     themselves (promtool, fio), never as services. Only packages that
#     were not installed before are touched.
#
# It returns non-zero on failure, after a one-line note on stderr.

# apt_note MESSAGE: a line on stderr, prefixed with the calling script.
apt_note() { echo "${0##*/}: $*" >&2; }

# apt_units PKG: the systemd units and SysV init scripts package PKG ships.
apt_units() {
	dpkg-query -L "$1" 2>/dev/null | grep -E '^/(lib|usr/lib)/systemd/system/[^/]+\.service$|^/etc/init\.d/[^/]+$' || true
}

apt_install_quiet() {
	local new=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || new+=("$p")
	done
	[[ ${#new[@]} -gt 0 ]] || return 0

	# (APT_POLICY_RC_D is for hack/lib/apt_test.go only: invoke-rc.d asks
	# /usr/sbin/policy-rc.d.)
	local policy=${APT_POLICY_RC_D:-/usr/sbin/policy-rc.d} backup="" ours=false rc=none
	if [[ -x $policy ]]; then
		rc=0
		"$policy" prometheus start >/dev/null 2>&1 || rc=$?
	fi
	if [[ $rc != 101 ]]; then
		if [[ -e $policy ]]; then
			backup="$policy.ensure-test-deps.$$"
			mv "$policy" "$backup" || { apt_note "cannot move $policy aside"; return 1; }
		fi
		printf '#!/bin/sh\n# temporary (hack/lib/apt.sh): start no service during apt-get install\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		ours=true
		# shellcheck disable=SC2064 # expand now: put back what was there
		trap "rm -f '$policy'; ${backup:+mv '$backup' '$policy';} :" EXIT
	fi

	local ok=true
	apt_note "installing ${new[*]} (no recommended packages, no services started)"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get update -qq >/dev/null; then
		apt_note "apt-get update failed"
		ok=false
	elif ! apt-get install -y -qq --no-install-recommends "${new[@]}" >/dev/null; then
		apt_note "apt-get install --no-install-recommends ${new[*]} failed"
		ok=false
	fi

	if $ours; then
		rm -f "$policy"
		[[ -z $backup ]] || mv "$backup" "$policy"
		trap - EXIT
	fi
	$ok || return 1

	local unit name
	for p in "${new[@]}"; do
		for unit in $(apt_units "$p"); do
			name=${unit##*/}
			local off=(systemctl disable "$name")
			[[ $unit == /etc/init.d/* ]] && off=(update-rc.d "$name" disable)
			command -v "${off[0]}" >/dev/null 2>&1 || continue
			if "${off[@]}" >/dev/null 2>&1; then
				apt_note "$p: $name disabled at boot (a test tool here, not a service; it was not installed before)"
			else
				apt_note "$p: could not disable $name at boot (${off[*]})"
			fi
		done
	done
	return 0
}
