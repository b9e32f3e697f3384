package dmcache

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

func TestResumeSuspended(t *testing.T) {
	const info = "info cached -c --noheadings -o suspended"
	for _, tc := range []struct {
		name      string
		files     map[string]string
		suspended bool
		err       error
		cmds      []string
	}{
		{"active", map[string]string{"info.cached": "Active\n"}, false, nil, []string{info}},
		{"suspended", map[string]string{"info.cached": "Suspended\n"}, true, nil, []string{info, "resume cached"}},
		{"suspended, the inactive table refused", map[string]string{"info.cached": "Suspended\n",
			"resume.cached.1.rc": "1", "resume.cached.1.err": "device-mapper: resume ioctl on cached  failed: Device or resource busy\n"},
			true, nil, []string{info, "resume cached", "clear cached", "resume cached"}},
		{"gone", map[string]string{"info.cached.rc": "1", "info.cached.err": "Device does not exist.\nCommand failed.\n"},
			false, ErrNotFound, []string{info}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool, log := fake(t, tc.files)
			s, err := tool.ResumeSuspended(context.Background(), "cached")
			if s != tc.suspended || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Errorf("ResumeSuspended = %v, %v; want %v, %v", s, err, tc.suspended, tc.err)
			}
			if got := log(); !reflect.DeepEqual(got, tc.cmds) {
				t.Errorf("commands %q, want %q", got, tc.cmds)
			}
		})
	}
}
