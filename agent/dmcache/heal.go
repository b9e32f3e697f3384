package dmcache

import (
	"context"
	"fmt"
	"strings"
)

// ResumeSuspended resumes the device-mapper device name when it is
// suspended, and reports whether it was. A process killed between its
// `dmsetup suspend` and `resume` (an agent killed in the middle of
// SetMode) leaves the device suspended, and every I/O to it waits. The
// resume makes a loaded inactive table live (the mode being switched to,
// which SetMode checked while suspended); when the kernel refuses it, the
// inactive table is cleared (`dmsetup clear`) and the live table resumed
// (Documentation/admin-guide/device-mapper: suspend, reload, resume,
// clear). Errors: ErrNotFound, or the command's, wrapped.
func (t *Tool) ResumeSuspended(ctx context.Context, name string) (bool, error) {
	out, err := t.run(ctx, name, t.dmsetup(), "info", name, "-c", "--noheadings", "-o", "suspended")
	if err != nil {
		if strings.Contains(err.Error(), "Device does not exist") {
			return false, fmt.Errorf("dmcache: %s: %w", name, ErrNotFound)
		}
		return false, err
	}
	if strings.TrimSpace(out) != "Suspended" {
		return false, nil
	}
	rctx, cancel := t.resumeCtx(ctx)
	defer cancel()
	if _, err := t.run(rctx, name, t.dmsetup(), "resume", name); err == nil {
		return true, nil
	}
	if _, err := t.run(rctx, name, t.dmsetup(), "clear", name); err != nil {
		return true, err
	}
	_, err = t.run(rctx, name, t.dmsetup(), "resume", name)
	return true, err
}
