package engine

import (
	"testing"
)

// TestQueueKnobCandidates: nr_requests is set with a scheduler through the
// candidate's tunables, split from the elevator's for the simulator, and
// refused with none or outside the kernel's [4, 2048].
func TestQueueKnobCandidates(t *testing.T) {
	for s, ok := range map[string]bool{
		"mq-deadline:nr_requests=16":                   true,
		"kyber:nr_requests=2048,read_lat_nsec=1e6":     false, // not an integer
		"kyber:nr_requests=2048,read_lat_nsec=1000000": true,
		"mq-deadline:nr_requests=4":                    true,
		"mq-deadline:nr_requests=3":                    false,
		"mq-deadline:nr_requests=2049":                 false,
		"none:nr_requests=16":                          false,
		"mq-deadline:wbt_lat_usec=0":                   false, // restored, not tuned
	} {
		c, err := ParseCandidate(s)
		if (err == nil) != ok {
			t.Errorf("ParseCandidate(%q) = %v, %v; want ok %v", s, c, err, ok)
		}
	}
	c, err := ParseCandidate("mq-deadline:fifo_batch=8,nr_requests=32")
	if err != nil {
		t.Fatal(err)
	}
	iosched, nr := c.split()
	if nr != 32 || len(iosched) != 1 || iosched["fifo_batch"] != 8 {
		t.Errorf("split = %v, %d; want fifo_batch=8 and 32", iosched, nr)
	}
	if c.Name() != "mq-deadline(fifo_batch=8,nr_requests=32)" {
		t.Errorf("Name() = %q", c.Name())
	}
}
