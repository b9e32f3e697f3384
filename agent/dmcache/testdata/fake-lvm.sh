#!/bin/sh
# A fake lvm for provision_test.go. It appends its arguments to
# $FAKE_DIR/log, then answers from files in $FAKE_DIR: lvm.<sub>.<n> or
# else lvm.<sub> is printed to stdout, and when lvm.<sub>[.<n>].rc
# exists, lvm.<sub>[.<n>].err goes to stderr and the file's number is the
# exit code. <sub> is the lvm command (the first argument: lvs, pvs,
# pvcreate, ...); <n> counts its calls, from 1.
d=${FAKE_DIR:?FAKE_DIR is not set}
echo "$*" >>"$d/log"
sub=$1
n=$(($(cat "$d/n.lvm.$sub" 2>/dev/null || echo 0) + 1))
echo $n >"$d/n.lvm.$sub"
for f in "$d/lvm.$sub.$n" "$d/lvm.$sub"; do
	if [ -f "$f.rc" ]; then
		cat "$f.err" >&2 2>/dev/null
		exit "$(cat "$f.rc")"
	fi
	if [ -f "$f" ]; then
		cat "$f"
		exit 0
	fi
done
exit 0
