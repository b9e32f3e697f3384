package actuate

import (
	"os"
	"strings"
	"testing"
)

// TestQueueDefaults: nr_requests at a scheduler's start is twice the
// smaller of the tag depth and 128 (block/blk-mq-sched.c), on the fake
// tree's devices of 32, 128, 256 and 1,023 tags; a device whose tag count
// is missing or not a positive number is an error naming the file.
func TestQueueDefaults(t *testing.T) {
	e := newEnv(t)
	for dev, want := range map[string]int64{"sda": 64, "loop3": 256, "vda": 256, "nvme0n1": 256} {
		d, err := e.a.QueueDefaults(dev)
		if err != nil {
			t.Fatalf("%s: %v", dev, err)
		}
		if d["nr_requests"] != want {
			t.Errorf("%s: nr_requests %d, want %d", dev, d["nr_requests"], want)
		}
	}
	if _, err := e.a.QueueDefaults("zram0"); err == nil {
		t.Error("zram0 has no mq directory: want an error")
	}
	if err := os.WriteFile(e.fake.Path("sda", attrTags), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.QueueDefaults("sda"); err == nil || !strings.Contains(err.Error(), "nr_tags") {
		t.Errorf("a tag count of x: %v, want an error naming nr_tags", err)
	}
}
