package openfiles

import (
	"reflect"
	"testing"

	"github.com/shadowtune/shadowtune/agent/tracer"
)

func TestPlanFollow(t *testing.T) {
	const random, noreuse = 1 << 12, 1 << 23
	const marks = random | noreuse
	const plainMode = 0x4a801d // FMODE_READ|… as a plain read-only file has it
	file := func(pid, fd, ra, mode uint32) tracer.OpenFile {
		return tracer.OpenFile{PID: pid, FD: fd, RAPages: ra, Mode: mode}
	}
	mapped := func(pid, fd, ra uint32) tracer.OpenFile {
		return tracer.OpenFile{PID: pid, FD: fd, RAPages: ra, Mode: plainMode, Mapped: true}
	}
	for _, tc := range []struct {
		name     string
		files    []tracer.OpenFile
		from, to uint32
		want     Plan
	}{
		{name: "a file at the old value follows", files: []tracer.OpenFile{file(10, 3, 640, plainMode)}, from: 640, to: 4,
			want: Plan{Steps: []Step{{PID: 10, FD: 3, Advice: Normal}}}},
		{name: "sequential advice keeps twice the device's", files: []tracer.OpenFile{file(10, 4, 1280, plainMode)}, from: 640, to: 4,
			want: Plan{Steps: []Step{{PID: 10, FD: 4, Advice: Sequential}}}},
		{name: "an application's random mark is kept", files: []tracer.OpenFile{file(10, 5, 640, plainMode|random)}, from: 640, to: 4,
			want: Plan{Marked: 1}},
		{name: "an application's noreuse mark is kept", files: []tracer.OpenFile{file(10, 5, 1280, plainMode|noreuse)}, from: 640, to: 4,
			want: Plan{Marked: 1}},
		{name: "a file opened at another value is its own", files: []tracer.OpenFile{file(11, 3, 32, plainMode)}, from: 640, to: 4,
			want: Plan{Own: 1}},
		{name: "a file already at the new value is its own", files: []tracer.OpenFile{file(11, 3, 4, plainMode)}, from: 640, to: 4,
			want: Plan{Own: 1}},
		{name: "back from zero: only files at zero follow, never as sequential", files: []tracer.OpenFile{file(12, 3, 0, plainMode), file(12, 4, 8, plainMode)}, from: 0, to: 640,
			want: Plan{Steps: []Step{{PID: 12, FD: 3, Advice: Normal}}, Own: 1}},
		{name: "no change plans nothing", files: []tracer.OpenFile{file(10, 3, 640, plainMode)}, from: 640, to: 640},
		{name: "every kind at once", files: []tracer.OpenFile{file(1, 3, 64, plainMode), file(1, 4, 128, plainMode), file(2, 3, 64, plainMode|random), file(2, 9, 16, plainMode)}, from: 64, to: 640,
			want: Plan{Steps: []Step{{PID: 1, FD: 3, Advice: Normal}, {PID: 1, FD: 4, Advice: Sequential}}, Marked: 1, Own: 1}},
		{name: "a raise moves mapped files", files: []tracer.OpenFile{mapped(3, 5, 4)}, from: 4, to: 640,
			want: Plan{Steps: []Step{{PID: 3, FD: 5, Advice: Normal}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PlanFollow(tc.files, tc.from, tc.to, marks); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PlanFollow = %+v, want %+v", got, tc.want)
			}
		})
	}
}
