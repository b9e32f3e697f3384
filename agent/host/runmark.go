package host

// The run marker: STATEDIR/agent.run names the agent process that runs on
// the state directory, and is removed at a clean shutdown. An agent that
// starts and finds a marker of a process that is gone knows the previous
// run ended without a clean shutdown: killed (out of memory, SIGKILL) or
// the node crashed. It reports that (Status.UncleanRestart), so that a
// crash loop is not mistaken for health.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shadowtune/shadowtune/internal/statefs"
)

// runMarkerName is the marker's file in the state directory.
const runMarkerName = "agent.run"

// runMarkerMax is the most a run marker may hold (bytes): a few dozen are
// written.
const runMarkerMax = 4096

type runMarker struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"startedAt"`
}

// MarkRunning writes this process's run marker into stateDir and reports
// whether the marker it replaced named a process that is gone (an unclean
// end of the previous run). A marker that is not a regular file (a
// symbolic link, a FIFO) is not read and counts as unclean; it is
// replaced, never written through (package statefs). A state directory it
// cannot write is not an error (the agent runs without the marker): it
// returns the write error, wrapped ("run marker: %w"), for a note.
func MarkRunning(stateDir string, now time.Time) (unclean bool, werr error) {
	b, err := statefs.ReadFile(stateDir, runMarkerName, runMarkerMax)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		unclean = true
	default:
		var m runMarker
		switch {
		case json.Unmarshal(b, &m) != nil || m.PID <= 0:
			unclean = true
		case m.PID == os.Getpid():
			// This process's own marker: its agent loop was started again
			// after a failure (the cluster agent does), not killed.
		case !alive(m.PID):
			unclean = true
		}
	}
	b, _ = json.Marshal(runMarker{PID: os.Getpid(), StartedAt: now.UTC()})
	if err := statefs.WriteFile(stateDir, runMarkerName, 0o600, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}); err != nil {
		return unclean, fmt.Errorf("run marker: %w", err)
	}
	return unclean, nil
}

// MarkStopped removes this process's run marker in stateDir (a clean
// shutdown). A marker of another process is left; one that cannot be read
// as a regular file is removed (it is not a run's). It returns the removal
// error, wrapped ("run marker: %w"); a marker already gone is no error.
func MarkStopped(stateDir string) error {
	b, err := statefs.ReadFile(stateDir, runMarkerName, runMarkerMax)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var m runMarker
	if err == nil && json.Unmarshal(b, &m) == nil && m.PID != os.Getpid() {
		return nil // another process's
	}
	if err := statefs.Remove(stateDir, runMarkerName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("run marker: %w", err)
	}
	return nil
}

// alive reports whether process pid exists in the agent's own PID
// namespace: the marker names a pid of that namespace, so /proc is the
// agent's, not one under the host-root prefix.
func alive(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return err == nil
}
