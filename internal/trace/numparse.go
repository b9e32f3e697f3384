package trace

import (
	"math"
	"strconv"
)

// Allocation-free number parsers for the text readers. They accept plain
// ASCII decimal only: no sign, no exponent, no underscores, no spaces.

// ParseUint parses b, a non-empty plain ASCII decimal integer (no sign,
// exponent, underscore or space), without allocating. It reports false
// for anything else, for a value above max and for one that overflows
// uint64 (pass math.MaxUint64 for no other bound). The tracefs tracer
// shares it.
func ParseUint(b []byte, max uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if v > max {
		return 0, false
	}
	return v, true
}

// maxSeconds is the largest whole number of seconds that fits in int64 ns.
const maxSeconds = math.MaxInt64/1_000_000_000 - 1

// parseSecondsNS parses a non-negative decimal number of seconds, such as
// "12" or "3599.171823699", into nanoseconds. Fraction digits beyond the
// ninth are checked but dropped (truncated toward zero).
func parseSecondsNS(b []byte) (int64, bool) {
	i := 0
	for i < len(b) && b[i] != '.' {
		i++
	}
	sec, ok := ParseUint(b[:i], maxSeconds)
	if !ok {
		return 0, false
	}
	ns := int64(sec) * 1e9
	if i == len(b) {
		return ns, true
	}
	frac := b[i+1:]
	if len(frac) == 0 {
		return 0, false
	}
	var f int64
	for k, c := range frac {
		if c < '0' || c > '9' {
			return 0, false
		}
		if k < 9 {
			f = f*10 + int64(c-'0')
		}
	}
	for k := len(frac); k < 9; k++ {
		f *= 10
	}
	return ns + f, true
}

// isDecimal reports whether b is a plain non-negative decimal number with
// an optional fraction ("0", "0.0", "12.5").
func isDecimal(b []byte) bool {
	_, ok := parseSecondsNS(b)
	return ok
}

// fmtSecondsNS formats ns as seconds with nine fraction digits.
func fmtSecondsNS(dst []byte, ns int64) []byte {
	dst = strconv.AppendInt(dst, ns/1e9, 10)
	dst = append(dst, '.')
	f := ns % 1e9
	var buf [9]byte
	for i := 8; i >= 0; i-- {
		buf[i] = byte('0' + f%10)
		f /= 10
	}
	return append(dst, buf[:]...)
}

// trimSpaceB trims ASCII spaces and tabs (and a trailing CR) from both ends.
func trimSpaceB(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 {
		c := b[len(b)-1]
		if c != ' ' && c != '\t' && c != '\r' {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// quoteField quotes a field for an error message, shortening long values so
// that an error stays one readable line.
func quoteField(b []byte) string {
	const max = 40
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "..."
	}
	return strconv.Quote(string(b))
}

// byteRange converts a byte offset and length into whole 512-byte sectors,
// rounding outward: the first sector is the one holding the first byte and
// the last the one holding the last byte. ok is false when length is zero,
// the range overflows, or it spans more sectors than a Request can hold.
func byteRange(off, length uint64) (sector uint64, sectors uint32, ok bool) {
	if length == 0 || off > math.MaxUint64-length {
		return 0, 0, false
	}
	end := off + length // exclusive, bytes
	first := off / SectorSize
	last := (end + SectorSize - 1) / SectorSize // exclusive, sectors
	if end > math.MaxUint64-(SectorSize-1) {
		last = math.MaxUint64/SectorSize + 1
	}
	n := last - first
	if n > math.MaxUint32 {
		return 0, 0, false
	}
	return first, uint32(n), true
}
