package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func benchRead(b *testing.B, newReader func() Reader) {
	b.ReportAllocs()
	var n int
	for b.Loop() {
		r := newReader()
		for {
			_, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "requests/s")
}

func webserverGz(b *testing.B) []byte {
	data, err := os.ReadFile(traceFile(b, filepath.Join("blkreplay", "linux-webserver-2.load.gz")))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkBlkreplayWebserver reads linux-webserver-2 (269,007 requests)
// from its gzip file in memory: decompression and parsing.
func BenchmarkBlkreplayWebserver(b *testing.B) {
	gz := webserverGz(b)
	benchRead(b, func() Reader {
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			b.Fatal(err)
		}
		r, _ := NewBlkreplayReader("webserver", zr)
		return r
	})
}

// BenchmarkBlkreplayWebserverText parses the decompressed text only.
func BenchmarkBlkreplayWebserverText(b *testing.B) {
	zr, err := gzip.NewReader(bytes.NewReader(webserverGz(b)))
	if err != nil {
		b.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	benchRead(b, func() Reader {
		r, _ := NewBlkreplayReader("webserver", bytes.NewReader(text))
		return r
	})
}

// BenchmarkNativeWebserver decodes linux-webserver-2 in the native format.
func BenchmarkNativeWebserver(b *testing.B) {
	zr, err := gzip.NewReader(bytes.NewReader(webserverGz(b)))
	if err != nil {
		b.Fatal(err)
	}
	r, _ := NewBlkreplayReader("webserver", zr)
	var buf bytes.Buffer
	w, _ := NewNativeWriter(&buf, WriterOptions{})
	if _, err := Convert(r, w); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.Logf("native size %d bytes", len(data))
	benchRead(b, func() Reader {
		r, _ := NewNativeReader("webserver", bytes.NewReader(data))
		return r
	})
}
