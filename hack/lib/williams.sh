# shellcheck shell=bash
# williams_order N ROW prints the indices 0..N-1 of N treatments in the
# order of row ROW (0-based) of a Williams design (E. J. Williams, 1949,
# "Experimental designs balanced for the estimation of residual effects of
# treatments"): row 0 is 0, 1, N-1, 2, N-2, ...; row r adds r to each
# (mod N); for an odd N, rows N..2N-1 are rows 0..N-1 reversed, and rows
# repeat with a period of N (2N for an odd N). Over one period each
# treatment runs equally often in every position and follows every other
# treatment equally often. The decision benchmark orders its settings by
# it (hack/benchdec/runner.py, a Python port checked against this one by
# hack/benchdec/test_report.py); hack/benchorder tests it.
williams_order() {
	local n=$1 r=$2 j lo=1 hi=$(($1 - 1)) period=$1
	local -a b=(0) row=()
	((n % 2)) && period=$((2 * n))
	r=$((r % period))
	for ((j = 1; j < n; j++)); do
		if ((j % 2)); then
			b+=("$lo")
			lo=$((lo + 1))
		else
			b+=("$hi")
			hi=$((hi - 1))
		fi
	done
	for ((j = 0; j < n; j++)); do
		if ((r < n)); then
			row+=($(((b[j] + r) % n)))
		else
			row+=($(((b[n - 1 - j] + r - n) % n)))
		fi
	done
	echo "${row[@]}"
}
