package trace

import (
	"bytes"
	"io"
	"math"
	"strconv"
)

func init() {
	register(Format{
		Name:      "disksim",
		Doc:       "DiskSim validation trace: R|W buffaction blkno bcount service_us think_us (closed loop, one request outstanding)",
		NewReader: NewDiskSimReader,
		NewWriter: NewDiskSimWriter,
	})
}

// diskSimReader reads DiskSim 4.0 validation traces.
//
// Each line is `R|W buffaction blkno bcount service_us think_us`; blkno and
// bcount are in 512-byte sectors, service_us is the measured service time
// and think_us the gap before the next request is issued. Only one request
// is outstanding, so a request is dispatched as soon as it arrives; the
// reader rebuilds absolute times: arrival(i+1) = complete(i) + think(i).
// Every request is attributed to PID 1 and flagged Sync (the generator waits
// for each one).
type diskSimReader struct {
	ls        *lineScanner
	now       int64 // arrival of the next request, ns
	nextThink int64 // think time before the next request, ns
}

// NewDiskSimReader returns a Reader over a DiskSim validation trace.
func NewDiskSimReader(name string, r io.Reader) (Reader, error) {
	return &diskSimReader{ls: newLineScanner(name, r)}, nil
}

func (d *diskSimReader) Next() (Request, error) {
	for {
		line, err := d.ls.next()
		if err != nil {
			return Request{}, err
		}
		f := bytes.Fields(line)
		if len(f) == 0 || f[0][0] == '#' {
			continue
		}
		if len(f) != 6 {
			return Request{}, d.ls.errAt("want 6 fields (R|W buffaction blkno bcount service_us think_us), got %d", len(f))
		}
		var q Request
		switch string(f[0]) {
		case "R", "r":
			q.Op = Read
		case "W", "w":
			q.Op = Write
		default:
			return Request{}, d.ls.errAt("field 1 (op): want R or W, got %q", f[0])
		}
		blk, err := strconv.ParseUint(string(f[2]), 10, 64)
		if err != nil {
			return Request{}, d.ls.errAt("field 3 (blkno): not a non-negative integer: %q", f[2])
		}
		cnt, err := strconv.ParseUint(string(f[3]), 10, 32)
		if err != nil || cnt == 0 {
			return Request{}, d.ls.errAt("field 4 (bcount): want a positive sector count, got %q", f[3])
		}
		svc, err := parseMicros(f[4])
		if err != nil {
			return Request{}, d.ls.errAt("field 5 (service_us): %v", err)
		}
		think, err := parseMicros(f[5])
		if err != nil {
			return Request{}, d.ls.errAt("field 6 (think_us): %v", err)
		}
		if blk > math.MaxUint64-cnt {
			return Request{}, d.ls.errAt("field 3 (blkno): request runs past the largest sector")
		}
		q.Sector, q.Sectors = blk, uint32(cnt)
		q.PID, q.Flags = 1, Sync
		q.Arrival, q.Dispatch = d.now, d.now
		q.Complete = d.now + svc
		q.Think = d.nextThink
		if q.Complete < q.Arrival || q.Complete > math.MaxInt64-think {
			return Request{}, d.ls.errAt("times overflow")
		}
		d.now = q.Complete + think
		d.nextThink = think
		return q, nil
	}
}

// parseMicros parses a non-negative decimal number of microseconds into ns.
func parseMicros(b []byte) (int64, error) {
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errNum(b)
	}
	if v < 0 {
		return 0, errNeg(b)
	}
	if v > 1e12 { // > 11.5 days per request: certainly malformed
		return 0, errBig(b)
	}
	return int64(math.Round(v * 1e3)), nil
}

type numError struct {
	what string
	val  []byte
}

func (e *numError) Error() string { return e.what + ": " + strconv.Quote(string(e.val)) }

func errNum(b []byte) error { return &numError{"not a number", b} }
func errNeg(b []byte) error { return &numError{"negative value", b} }
func errBig(b []byte) error { return &numError{"value out of range", b} }
