package openfiles

import (
	"errors"
	"testing"

	"github.com/shadowtune/shadowtune/agent/tracer"
)

func TestMarksOf(t *testing.T) {
	const dev, pid = 7 << 20, 100
	inos := []uint64{11, 12, 13}
	files := func(pid uint32, plain, random, noreuse uint32) []tracer.OpenFile {
		return []tracer.OpenFile{
			{PID: 50, Dev: dev, Ino: 99, Mode: 0xffff}, // another process's file
			{PID: pid, Dev: dev, Ino: 11, Mode: plain},
			{PID: pid, Dev: dev, Ino: 12, Mode: random},
			{PID: pid, Dev: dev, Ino: 13, Mode: noreuse},
		}
	}
	for _, tc := range []struct {
		name    string
		files   []tracer.OpenFile
		want    uint32
		wantErr error
		anyErr  bool
	}{
		{name: "6.18: random bit 12, noreuse bit 23", files: files(pid, 0x4a801d, 0x4a901d, 0xca801d), want: 1<<12 | 1<<23},
		{name: "no noreuse bit (before 6.3)", files: files(pid, 0x4a801d, 0x4a901d, 0x4a801d), want: 1 << 12},
		{name: "listed under another PID: a PID namespace", files: files(7, 1, 3, 1), wantErr: ErrNotHostPID},
		{name: "own files not listed", files: files(pid, 1, 3, 5)[:2], anyErr: true},
		{name: "random sets no bit", files: files(pid, 1, 1, 1), anyErr: true},
		{name: "random sets two bits", files: files(pid, 1, 7, 1), anyErr: true},
		{name: "both set the same bit", files: files(pid, 1, 3, 3), anyErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := marksOf(tc.files, dev, inos, pid)
			switch {
			case tc.wantErr != nil || tc.anyErr:
				if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
					t.Errorf("marksOf = %#x, %v; want an error (%v)", got, err, tc.wantErr)
				}
			case err != nil || got != tc.want:
				t.Errorf("marksOf = %#x, %v; want %#x", got, err, tc.want)
			}
		})
	}
}
