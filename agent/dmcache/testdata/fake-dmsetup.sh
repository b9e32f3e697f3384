#!/bin/sh
# A fake dmsetup (and lvchange) for tool_test.go. It appends its
# arguments to $FAKE_DIR/log, then answers from files in $FAKE_DIR:
# <sub>.<key>.<n> or else <sub>.<key> is printed to stdout, and when
# <sub>.<key>[.<n>].rc exists, <sub>.<key>[.<n>].err goes to stderr and
# the file's number is the exit code. <sub> is the dmsetup command
# (info, table, status, splitname, suspend, reload, resume) or lvchange
# (the first argument starts with "-"); <key> is the device (the second
# argument; "all" when there is none) or, for lvchange, VG_LV; <n> counts
# the calls of <sub>.<key>, from 1.
d=${FAKE_DIR:?FAKE_DIR is not set}
echo "$*" >>"$d/log"
sub=$1
key=$2
case $sub in
-*)
	sub=lvchange
	for a in "$@"; do key=$a; done
	key=$(echo "$key" | tr / _)
	;;
esac
case $key in
"" | -*) key=all ;;
esac
n=$(($(cat "$d/n.$sub.$key" 2>/dev/null || echo 0) + 1))
echo $n >"$d/n.$sub.$key"
for f in "$d/$sub.$key.$n" "$d/$sub.$key"; do
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
