package trace

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// traceFile returns the path of a shipped real trace, looking in the
// repository's testdata/traces and then in ../shared/traces next to the
// repository. If neither has it the test is skipped, or fails under CI=true
// (package need).
func traceFile(t testing.TB, rel string) string {
	t.Helper()
	for _, dir := range []string{"../../testdata/traces", "../../../shared/traces"} {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	need.Missing(t, "shipped trace "+rel, "not in ../../testdata/traces or ../../../shared/traces")
	return ""
}

// checkStream drains r, checking every request with checkRequest, and
// returns the requests and the terminating error (nil for io.EOF).
func checkStream(t testing.TB, r Reader) ([]Request, error) {
	t.Helper()
	var out []Request
	last := int64(0)
	for {
		q, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if msg := checkRequest(&q, last); msg != "" {
			t.Fatalf("request %d %+v: %s", len(out)+1, q, msg)
		}
		last = q.Arrival
		out = append(out, q)
	}
}

// checkRequest returns what is wrong with q, given the previous arrival.
func checkRequest(q *Request, last int64) string {
	if err := q.Validate(); err != nil {
		return err.Error()
	}
	if q.Arrival < last {
		return "arrival goes backwards"
	}
	return ""
}

// parseErr asserts that err is a *ParseError at file:line whose message
// contains want.
func parseErr(t *testing.T, err error, file string, line int, want string) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("want *ParseError %s:%d (%q), got %v", file, line, want, err)
	}
	if pe.File != file || pe.Line != line || !strings.Contains(pe.Msg, want) {
		t.Fatalf("want %s:%d: …%s…, got %v", file, line, want, err)
	}
}

// readString reads a whole trace of the given format from text.
func readString(t testing.TB, format, name, text string) ([]Request, error) {
	t.Helper()
	f, err := Lookup(format)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.NewReader(name, strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return checkStream(t, r)
}

// req builds a request with unknown times beyond the arrival.
func req(arrival int64, op Op, sector uint64, sectors uint32) Request {
	return Request{Arrival: arrival, Dispatch: Unknown, Complete: Unknown, Think: Unknown, Op: op, Sector: sector, Sectors: sectors}
}
