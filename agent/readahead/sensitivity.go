//go:build sensitivity

package readahead

// A sensitivity build (go build -tags sensitivity) scales the road's
// thresholds by the factors $SHADOWTUNE_SENSITIVITY names, e.g.
// "MinResolvedPages=0.5,FitRows=2", for the sensitivity runs of the
// decision benchmark (hack/bench-sensitivity.sh): the outcome must not be
// balanced on a threshold's exact value. A production build has none of
// this.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func init() {
	spec := os.Getenv("SHADOWTUNE_SENSITIVITY")
	if spec == "" {
		return
	}
	for _, kv := range strings.Split(spec, ",") {
		name, v, _ := strings.Cut(kv, "=")
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			panic(fmt.Sprintf("SHADOWTUNE_SENSITIVITY: %q: want NAME=FACTOR, FACTOR > 0", kv))
		}
		switch name {
		case "MinResolvedPages":
			th.resolved *= f
		case "MinRequests":
			th.requests *= f
		case "CompetitiveRatio":
			th.ratio = max(1, th.ratio*f)
		case "FitRows":
			th.fitRows = max(1, min(int(float64(th.fitRows)*f), 64))
		default:
			panic(fmt.Sprintf("SHADOWTUNE_SENSITIVITY: %q: no threshold %s", kv, name))
		}
	}
	fmt.Fprintf(os.Stderr, "shadowtune: sensitivity build: thresholds %+v\n", th)
}
