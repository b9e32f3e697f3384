package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// ErrNotRepresentable is wrapped by writers when a request cannot be
// expressed in their format (an operation the format lacks, a time it
// requires but the request does not carry, a size beyond its limits).
var ErrNotRepresentable = errors.New("request not representable in this format")

// ErrOrder is wrapped by writers when requests are not given in
// non-decreasing Arrival order.
var ErrOrder = errors.New("requests out of arrival order")

// Validate reports whether r is a well-formed request:
//   - Arrival ≥ 0 (ns since trace start);
//   - Op is one of Read, Write, Flush, Discard;
//   - Sectors > 0, except for Flush, which may carry no range (Sectors 0);
//   - the range Sector … Sector+Sectors does not overflow;
//   - Dispatch is Unknown or ≥ Arrival;
//   - Complete is Unknown or ≥ Arrival and ≥ Dispatch when that is known;
//   - Think is Unknown or ≥ 0.
//
// Every reader in this package returns only requests that pass Validate.
func (r *Request) Validate() error {
	switch {
	case r.Arrival < 0:
		return fmt.Errorf("arrival %d ns is negative", r.Arrival)
	case r.Op > Discard:
		return fmt.Errorf("unknown op %d", uint8(r.Op))
	case r.Sectors == 0 && r.Op != Flush:
		return fmt.Errorf("%v request has no sectors", r.Op)
	case r.Sector > math.MaxUint64-uint64(r.Sectors):
		return fmt.Errorf("range %d+%d overflows", r.Sector, r.Sectors)
	case r.Dispatch != Unknown && r.Dispatch < r.Arrival:
		return fmt.Errorf("dispatch %d ns before arrival %d ns", r.Dispatch, r.Arrival)
	case r.Complete != Unknown && r.Complete < r.Arrival:
		return fmt.Errorf("completion %d ns before arrival %d ns", r.Complete, r.Arrival)
	case r.Complete != Unknown && r.Dispatch != Unknown && r.Complete < r.Dispatch:
		return fmt.Errorf("completion %d ns before dispatch %d ns", r.Complete, r.Dispatch)
	case r.Think != Unknown && r.Think < 0:
		return fmt.Errorf("think time %d ns is negative", r.Think)
	}
	return nil
}

// Convert copies every request of r to w and then closes w. It returns the
// number of requests written and the first error met: a read error from r
// (w is still closed, so what was written is flushed), a write error, or
// the error of w.Close. An empty trace is not an error: n is 0.
func Convert(r Reader, w Writer) (n int64, err error) {
	defer func() {
		if cerr := w.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	for {
		q, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if err := w.Write(&q); err != nil {
			return n, err
		}
		n++
	}
}
