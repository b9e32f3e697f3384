package trace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

func init() {
	register(Format{
		Name:      "native",
		Doc:       "shadowtune native binary trace: varint-delta records in CRC-checked blocks (lossless)",
		NewReader: NewNativeReader,
		NewWriter: NewNativeWriter,
	})
}

// Native format constants. The byte layout is specified in NATIVE_FORMAT.md
// next to this file; in short:
//
//	file    = header block* end
//	header  = magic[8] version(1 byte) flags(1 byte)
//	block   = uvarint(count ≥ 1) uvarint(length) payload[length] crc32c(payload, uint32 LE)
//	end     = uvarint(0) uvarint(total records) crc32c(those two uvarints, uint32 LE)
//	record  = uvarint(Op | Flags<<2)
//	          uvarint(Arrival − previous Arrival)        (previous = 0 at block start)
//	          uvarint(0 if Dispatch Unknown, else Dispatch − Arrival + 1)
//	          uvarint(0 if Complete Unknown, else Complete − base + 1)
//	                  (base = Dispatch if known, else Arrival)
//	          varint(Sector − previous End)                (zigzag; previous End = 0 at block start)
//	          uvarint(Sectors)
//	          uvarint(Dev XOR previous Dev)                (previous = 0 at block start)
//	          uvarint(PID XOR previous PID)                (previous = 0 at block start)
//	          uvarint(0 if Think Unknown, else Think + 1)
//
// All times are ns, sectors 512 bytes. Varints are encoding/binary's
// (LEB128; zigzag for the signed one). CRC-32 uses the Castagnoli polynomial.
const (
	// NativeMagic starts every native trace.
	NativeMagic = "\x89STN\r\n\x1a\n"
	// NativeVersion is the format version this package writes and reads.
	NativeVersion = 1

	nativeHeaderLen  = len(NativeMagic) + 2
	nativeBlockCount = 4096     // writer: records per block
	nativeBlockBytes = 64 << 10 // writer: payload bytes per block (soft)
	nativeMaxCount   = 1 << 16  // reader: largest record count of a block
	nativeMaxPayload = 1 << 20  // reader: largest payload of a block
	nativeMinRecord  = 9        // bytes of the smallest record
	nativeMaxRecord  = 9 * binary.MaxVarintLen64
	nativeEndMarker  = 0
	nativeFlags      = 0 // no header flag is defined in version 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// nativeReader reads the native format.
type nativeReader struct {
	name    string
	br      *bufio.Reader
	n       int64 // records returned so far
	buf     []byte
	p       []byte // undecoded rest of the current block's payload
	left    int    // records left in the current block
	prev    Request
	last    int64 // Arrival of the previous record of the file
	started bool  // the header has been read
	done    bool
	err     error // sticky error
}

// NewNativeReader returns a Reader over a native trace. name is used in
// errors. Malformed, corrupt or truncated input yields a *ParseError whose
// Line is the number (1-based) of the record being read, or 0 for the file
// header. A zero-length input is an empty trace (io.EOF at once), but a
// header without its end marker is reported as truncated.
func NewNativeReader(name string, r io.Reader) (Reader, error) {
	return &nativeReader{name: name, br: bufio.NewReaderSize(r, 64<<10)}, nil
}

func (d *nativeReader) errf(rec int64, format string, args ...any) error {
	return &ParseError{File: d.name, Line: int(min(rec, math.MaxInt32)), Msg: fmt.Sprintf(format, args...)}
}

// ioErr converts a read error into a truncation report or a plain I/O error.
func (d *nativeReader) ioErr(rec int64, what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return d.errf(rec, "truncated: %s", what)
	}
	if errors.Is(err, errVarint) {
		return d.errf(rec, "corrupt %s: bad varint", what)
	}
	return fmt.Errorf("%s: read: %w", d.name, err)
}

func (d *nativeReader) Next() (Request, error) {
	if d.err != nil {
		return Request{}, d.err
	}
	q, err := d.next()
	if err != nil {
		d.err = err
	}
	return q, err
}

func (d *nativeReader) next() (Request, error) {
	if !d.started {
		if err := d.readHeader(); err != nil {
			return Request{}, err
		}
	}
	for d.left == 0 {
		if d.done {
			return Request{}, io.EOF
		}
		if err := d.readBlock(); err != nil {
			return Request{}, err
		}
	}
	rec := d.n + 1
	q, err := d.decode(rec)
	if err != nil {
		return Request{}, err
	}
	d.left--
	if d.left == 0 && len(d.p) != 0 {
		return Request{}, d.errf(rec, "corrupt block: %d bytes after its last record", len(d.p))
	}
	d.n++
	return q, nil
}

func (d *nativeReader) readHeader() error {
	d.started = true
	var h [nativeHeaderLen]byte
	n, err := io.ReadFull(d.br, h[:])
	if n == 0 && errors.Is(err, io.EOF) {
		d.done = true // empty input: empty trace
		return nil
	}
	if m := min(n, len(NativeMagic)); string(h[:m]) != NativeMagic[:m] {
		return d.errf(0, "not a native trace: bad magic %q", h[:m])
	}
	if err != nil {
		return d.ioErr(0, "file header", err)
	}
	if v := h[len(NativeMagic)]; v != NativeVersion {
		return d.errf(0, "unsupported native version %d (this reader reads %d)", v, NativeVersion)
	}
	if f := h[len(NativeMagic)+1]; f != nativeFlags {
		return d.errf(0, "unknown header flags 0x%02x", f)
	}
	return nil
}

func (d *nativeReader) readBlock() error {
	rec := d.n + 1
	count, err := readUvarint(d.br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return d.errf(rec, "truncated: end marker missing after record %d", d.n)
		}
		return d.ioErr(rec, "block header", err)
	}
	if count == nativeEndMarker {
		return d.readEnd(rec)
	}
	length, err := readUvarint(d.br)
	if err != nil {
		return d.ioErr(rec, "block header", err)
	}
	if count > nativeMaxCount {
		return d.errf(rec, "corrupt block: %d records (limit %d)", count, nativeMaxCount)
	}
	if length > nativeMaxPayload || length < count*nativeMinRecord || length > count*nativeMaxRecord {
		return d.errf(rec, "corrupt block: %d bytes for %d records", length, count)
	}
	if cap(d.buf) < int(length)+4 {
		d.buf = make([]byte, int(length)+4)
	}
	b := d.buf[:length+4]
	if _, err := io.ReadFull(d.br, b); err != nil {
		return d.ioErr(rec, fmt.Sprintf("block of %d records", count), err)
	}
	payload := b[:length]
	if got, want := crc32.Checksum(payload, castagnoli), binary.LittleEndian.Uint32(b[length:]); got != want {
		return d.errf(rec, "corrupt block: checksum %08x, want %08x", got, want)
	}
	d.p, d.left = payload, int(count)
	d.prev = Request{}
	return nil
}

func (d *nativeReader) readEnd(rec int64) error {
	var vb [binary.MaxVarintLen64 + 1]byte
	total, err := readUvarint(d.br)
	if err != nil {
		return d.ioErr(rec, "end marker", err)
	}
	var crc [4]byte
	if _, err := io.ReadFull(d.br, crc[:]); err != nil {
		return d.ioErr(rec, "end marker", err)
	}
	m := binary.AppendUvarint(append(vb[:0], nativeEndMarker), total)
	if got, want := crc32.Checksum(m, castagnoli), binary.LittleEndian.Uint32(crc[:]); got != want {
		return d.errf(rec, "corrupt end marker: checksum %08x, want %08x", got, want)
	}
	if total != uint64(d.n) {
		return d.errf(rec, "end marker counts %d records, file holds %d", total, d.n)
	}
	if _, err := d.br.ReadByte(); err == nil {
		return d.errf(rec, "trailing data after the end marker")
	} else if !errors.Is(err, io.EOF) {
		return d.ioErr(rec, "end marker", err)
	}
	d.done = true
	return nil
}

// nativeFields names the fields of a record, in order, for errors.
var nativeFields = [9]string{"op", "arrival", "dispatch", "complete", "sector", "sectors", "dev", "pid", "think"}

// errVarint reports a varint longer than 64 bits in the byte stream.
var errVarint = errors.New("varint overflows 64 bits")

// readUvarint reads one uvarint from br. It returns io.EOF only if no
// byte was read, io.ErrUnexpectedEOF if the stream ends inside the varint,
// and errVarint if the varint does not fit 64 bits.
func readUvarint(br io.ByteReader) (uint64, error) {
	var x uint64
	for i, s := 0, uint(0); i < binary.MaxVarintLen64; i, s = i+1, s+7 {
		c, err := br.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, errVarint
			}
			return x | uint64(c)<<s, nil
		}
		x |= uint64(c&0x7f) << s
	}
	return 0, errVarint
}

// uvarint takes one uvarint from d.p.
func (d *nativeReader) uvarint(rec int64, field string) (uint64, error) {
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		return 0, d.errf(rec, "corrupt record: bad varint in field %s", field)
	}
	d.p = d.p[n:]
	return v, nil
}

func (d *nativeReader) decode(rec int64) (Request, error) {
	var v [9]uint64
	for i := range v {
		x, err := d.uvarint(rec, nativeFields[i])
		if err != nil {
			return Request{}, err
		}
		v[i] = x
	}
	var q Request
	if v[0]>>2 > math.MaxUint8 {
		return Request{}, d.errf(rec, "corrupt record: op/flags value %d", v[0])
	}
	q.Op, q.Flags = Op(v[0]&3), Flags(v[0]>>2)
	if v[1] > uint64(math.MaxInt64-d.prev.Arrival) {
		return Request{}, d.errf(rec, "corrupt record: arrival overflows")
	}
	q.Arrival = d.prev.Arrival + int64(v[1])
	var err error
	if q.Dispatch, err = d.offset(rec, "dispatch", q.Arrival, v[2]); err != nil {
		return Request{}, err
	}
	base := q.Arrival
	if q.Dispatch != Unknown {
		base = q.Dispatch
	}
	if q.Complete, err = d.offset(rec, "complete", base, v[3]); err != nil {
		return Request{}, err
	}
	delta := int64(v[4]>>1) ^ -int64(v[4]&1) // zigzag
	q.Sector = d.prev.End() + uint64(delta)
	if v[5] > math.MaxUint32 || v[6] > math.MaxUint32 || v[7] > math.MaxUint32 {
		return Request{}, d.errf(rec, "corrupt record: sectors, dev or pid above 2^32")
	}
	q.Sectors = uint32(v[5])
	q.Dev = d.prev.Dev ^ uint32(v[6])
	q.PID = d.prev.PID ^ uint32(v[7])
	if q.Think, err = d.offset(rec, "think", 0, v[8]); err != nil {
		return Request{}, err
	}
	if err := q.Validate(); err != nil {
		return Request{}, d.errf(rec, "invalid record: %v", err)
	}
	if q.Arrival < d.last {
		return Request{}, d.errf(rec, "invalid record: arrival %d ns before the previous record's %d ns", q.Arrival, d.last)
	}
	d.last = q.Arrival
	d.prev = q
	return q, nil
}

// offset decodes an optional time stored as 0 (Unknown) or t − base + 1.
func (d *nativeReader) offset(rec int64, field string, base int64, v uint64) (int64, error) {
	if v == 0 {
		return Unknown, nil
	}
	if v-1 > uint64(math.MaxInt64-base) {
		return 0, d.errf(rec, "corrupt record: %s overflows", field)
	}
	return base + int64(v-1), nil
}

// nativeWriter writes the native format.
type nativeWriter struct {
	bw     *bufio.Writer
	block  []byte
	count  int
	total  uint64
	prev   Request
	last   int64
	closed bool
	err    error // sticky write error
}

// NewNativeWriter returns a Writer of the native format. It writes the
// file header at once and records in blocks of up to 4096; Close writes the
// last block and the end marker (a file without it reads as truncated).
// Every field of a valid request round-trips exactly. Write rejects a
// request that fails [Request.Validate], and one whose Arrival is earlier
// than the previous request's (wrapping [ErrOrder]).
func NewNativeWriter(w io.Writer, _ WriterOptions) (Writer, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	h := append([]byte(NativeMagic), NativeVersion, nativeFlags)
	if _, err := bw.Write(h); err != nil {
		return nil, err
	}
	return &nativeWriter{bw: bw, block: make([]byte, 0, nativeBlockBytes+nativeMaxRecord)}, nil
}

func (e *nativeWriter) Write(r *Request) error {
	switch {
	case e.err != nil:
		return e.err
	case e.closed:
		return errors.New("native: write after Close")
	}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("native: request %d: %w", e.total+1, err)
	}
	if e.total > 0 && r.Arrival < e.last {
		return fmt.Errorf("native: request %d: arrival %d ns after %d ns: %w", e.total+1, r.Arrival, e.last, ErrOrder)
	}
	b := e.block
	b = binary.AppendUvarint(b, uint64(r.Op)|uint64(r.Flags)<<2)
	b = binary.AppendUvarint(b, uint64(r.Arrival-e.prev.Arrival))
	b = binary.AppendUvarint(b, optOffset(r.Dispatch, r.Arrival))
	base := r.Arrival
	if r.Dispatch != Unknown {
		base = r.Dispatch
	}
	b = binary.AppendUvarint(b, optOffset(r.Complete, base))
	b = binary.AppendVarint(b, int64(r.Sector-e.prev.End()))
	b = binary.AppendUvarint(b, uint64(r.Sectors))
	b = binary.AppendUvarint(b, uint64(r.Dev^e.prev.Dev))
	b = binary.AppendUvarint(b, uint64(r.PID^e.prev.PID))
	b = binary.AppendUvarint(b, optOffset(r.Think, 0))
	e.block = b
	e.prev = *r
	e.last = r.Arrival
	e.count++
	e.total++
	if e.count >= nativeBlockCount || len(e.block) >= nativeBlockBytes {
		return e.flushBlock()
	}
	return nil
}

// optOffset encodes an optional time as 0 (Unknown) or t − base + 1.
func optOffset(t, base int64) uint64 {
	if t == Unknown {
		return 0
	}
	return uint64(t-base) + 1
}

func (e *nativeWriter) flushBlock() error {
	if e.count == 0 {
		return nil
	}
	var hdr [2 * binary.MaxVarintLen64]byte
	h := binary.AppendUvarint(hdr[:0], uint64(e.count))
	h = binary.AppendUvarint(h, uint64(len(e.block)))
	// bufio.Writer errors are sticky: the last Write reports any failure.
	_, _ = e.bw.Write(h)
	_, _ = e.bw.Write(e.block)
	_, err := e.bw.Write(binary.LittleEndian.AppendUint32(hdr[:0], crc32.Checksum(e.block, castagnoli)))
	e.block, e.count, e.prev = e.block[:0], 0, Request{}
	if err != nil {
		e.err = err
	}
	return err
}

func (e *nativeWriter) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if err := e.flushBlock(); err != nil {
		return err
	}
	var buf [2*binary.MaxVarintLen64 + 4]byte
	m := binary.AppendUvarint(append(buf[:0], nativeEndMarker), e.total)
	m = binary.LittleEndian.AppendUint32(m, crc32.Checksum(m, castagnoli))
	_, _ = e.bw.Write(m) // sticky; reported by Flush
	if err := e.bw.Flush(); err != nil {
		e.err = err
		return err
	}
	return nil
}
