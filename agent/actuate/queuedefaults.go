package actuate

import (
	"fmt"
	"strconv"

	"github.com/shadowtune/shadowtune/internal/sched"
)

// blkdevDefaultRQ is BLKDEV_DEFAULT_RQ (include/linux/blkdev.h).
const blkdevDefaultRQ = 128

// attrTags is the driver's tag count of the first hardware queue, the
// tag set's queue depth (every hardware queue has the same).
const attrTags = "mq/0/nr_tags"

// QueueDefaults returns the value each queue attribute the simulator
// models (the knob table's tuned ones: nr_requests) takes when the kernel
// starts a scheduler other than none on dev: nr_requests is twice the
// smaller of the tag set's queue depth and BLKDEV_DEFAULT_RQ
// (block/blk-mq-sched.c, blk_mq_init_sched), read from mq/0/nr_tags. A
// candidate that leaves nr_requests out is simulated at that depth
// (sim.Config.NrRequests 0). The error is an *AttrError, or says the
// file holds no positive count.
func (a *Actuator) QueueDefaults(dev string) (sched.Tunables, error) {
	v, err := a.read(dev, attrTags)
	if err != nil {
		return nil, err
	}
	tags, err := strconv.ParseInt(v, 10, 64)
	if err != nil || tags <= 0 {
		return nil, fmt.Errorf("%s: %q is not a positive tag count", a.store.Path(dev, attrTags), v)
	}
	return sched.Tunables{"nr_requests": 2 * min(tags, blkdevDefaultRQ)}, nil
}
