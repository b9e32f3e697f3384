#!/usr/bin/env bash
# failed-digest.sh LOG: the first line of each t.Log/t.Error entry of every
# test that failed in a `go test -v` log, each cut to 400 characters, so
# that the reason for a failure stays at the end of a long log (the VM
# tests log the guest's whole output when they fail, before the next
# test's lines).
set -euo pipefail
awk '
/^=== RUN / { cur = $3; n[cur] = 0; next }
/^    [A-Za-z0-9_]+\.go:[0-9]+: / { if (cur != "") { buf[cur, ++n[cur]] = substr($0, 1, 400) } ; next }
/^--- FAIL: / {
	t = $3
	print "failed: " t
	for (i = 1; i <= n[t]; i++) print buf[t, i]
}
' "$1"
