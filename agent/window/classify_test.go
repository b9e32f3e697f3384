package window

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// readTrace reads every request of a trace file.
func readTrace(t *testing.T, format, path string) []trace.Request {
	t.Helper()
	r, c, err := trace.OpenFile(format, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var reqs []trace.Request
	for {
		q, err := r.Next()
		if errors.Is(err, io.EOF) {
			return reqs
		}
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, q)
	}
}

// The class check by model error (compareClasses), on real traces: a
// virtio disk that QEMU throttles to 3,000 IOPS and 125 MB/s reports
// rotational=1 and its queued random reads look like seeks (under half
// are under the HDD hit threshold), yet an SSD model predicts it far
// better, so it is re-modelled; the DiskSim traces of real HDDs keep the
// HDD model.
func TestCalibrateByModelError(t *testing.T) {
	for _, tc := range []struct {
		name, format, path string
		want               model.Class
	}{
		// Recorded in the VM lab (e2e/vm, vmlab.Throttle{IOPS: 3000,
		// BytesPerSec: 131072000}) with `shadowtune trace record` while fio
		// read 4 KiB at random at queue depths 1, 4 and 16: the first 16,000
		// requests.
		{"throttled virtio disk", "native", "../testdata/virtio-throttled-3000iops.st.gz", model.SSD},
		{"atlas10k", "disksim", "../../testdata/traces/disksim/atlas10k.trace", model.HDD},
		{"cheetah9LP", "disksim", "../../testdata/traces/disksim/cheetah9LP.trace", model.HDD},
		{"hp_c2247a", "disksim", "../../testdata/traces/disksim/hp_c2247a.trace", model.HDD},
		{"st41601n", "disksim", "../../testdata/traces/disksim/st41601n.trace", model.HDD},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := readTrace(t, tc.format, tc.path)
			reqs = reqs[:min(len(reqs), 20000)]
			c := newTestController(t, false)
			c.learn.calibrate(reqs, c.Policy.MinRequests)
			if !c.learn.calibrated {
				t.Fatal("not calibrated")
			}
			if got := c.learn.model.Class(); got != tc.want {
				t.Errorf("class %v, want %v (%s)", got, tc.want, c.learn.note)
			}
			if tc.want == model.SSD && !strings.Contains(c.learn.note, "model error") {
				t.Errorf("note %q does not say the class came from the model error", c.learn.note)
			}
			t.Logf("%s: %v; %s", tc.name, c.learn.model.Class(), c.learn.note)
		})
	}
}
