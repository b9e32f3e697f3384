package trace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// diskSimMaxNS is the largest time parseMicros accepts, in ns.
const diskSimMaxNS = 1e15

// diskSimWriter writes DiskSim validation traces. A line's think time is
// the gap before the next request, so each request is held until the next
// one (or Close) arrives.
type diskSimWriter struct {
	w       *bufio.Writer
	buf     []byte
	pending Request
	have    bool
	first   int64 // Arrival of the first request, ns
	clock   int64 // arrival of pending as a DiskSim reader will rebuild it, ns
	last    int64 // Arrival of the previous request, ns
}

// NewDiskSimWriter returns a Writer of DiskSim validation traces
// (`R|W buffaction blkno bcount service_us think_us`, times in µs with
// three decimals, so ns are kept exactly; buffaction is always "Hit").
//
// The format has one request outstanding at a time: a reader rebuilds
// arrival(i+1) = arrival(i) + service(i) + think(i), with arrival(0) = 0.
// The writer chooses think(i) so that rebuilt arrivals equal the original
// ones relative to the first request whenever requests did not overlap;
// when a request arrived before the previous one would complete in this
// serial replay, think is 0 and it arrives later than recorded. Queueing
// (Dispatch − Arrival) is therefore not kept, and PID, Dev and flags are
// not written.
//
// Only Read and Write requests with a known service time (Dispatch and
// Complete) can be written; others wrap [ErrNotRepresentable]. Requests out
// of arrival order wrap [ErrOrder].
func NewDiskSimWriter(w io.Writer, _ WriterOptions) (Writer, error) {
	return &diskSimWriter{w: bufio.NewWriter(w)}, nil
}

func (d *diskSimWriter) Write(r *Request) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("disksim: %w", err)
	}
	if r.Op != Read && r.Op != Write {
		return fmt.Errorf("disksim: %v request: %w (only R and W)", r.Op, ErrNotRepresentable)
	}
	if !r.HasService() {
		return fmt.Errorf("disksim: request without service time: %w", ErrNotRepresentable)
	}
	if r.ServiceTime() > diskSimMaxNS {
		return fmt.Errorf("disksim: service time %d ns: %w (readers accept up to 1e12 µs)", r.ServiceTime(), ErrNotRepresentable)
	}
	if !d.have {
		d.first, d.last = r.Arrival, r.Arrival
	}
	if r.Arrival < d.last {
		return fmt.Errorf("disksim: arrival %d ns after %d ns: %w", r.Arrival, d.last, ErrOrder)
	}
	d.last = r.Arrival
	if d.have {
		done := d.clock + d.pending.ServiceTime()
		think := max(0, r.Arrival-d.first-done)
		if think > diskSimMaxNS {
			return fmt.Errorf("disksim: gap of %d ns before a request: %w (readers accept up to 1e12 µs)", think, ErrNotRepresentable)
		}
		if err := d.emit(think); err != nil {
			return err
		}
		d.clock = done + think
	}
	d.pending, d.have = *r, true
	return nil
}

func (d *diskSimWriter) emit(think int64) error {
	b := d.buf[:0]
	b = append(b, d.pending.Op.String()...)
	b = append(b, " Hit "...)
	b = strconv.AppendUint(b, d.pending.Sector, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(d.pending.Sectors), 10)
	b = append(b, ' ')
	b = appendMicros(b, d.pending.ServiceTime())
	b = append(b, ' ')
	b = appendMicros(b, think)
	b = append(b, '\n')
	d.buf = b
	_, err := d.w.Write(b)
	return err
}

// appendMicros formats a non-negative ns count as µs with three decimals.
func appendMicros(b []byte, ns int64) []byte {
	b = strconv.AppendInt(b, ns/1000, 10)
	f := ns % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

func (d *diskSimWriter) Close() error {
	if d.have {
		d.have = false
		if err := d.emit(0); err != nil {
			return err
		}
	}
	return d.w.Flush()
}
