package agent

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
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

const runMarkerName = "agent.run"

type runMarker struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"startedAt"`
}

// markRunning writes this process's run marker into stateDir and reports
// whether the marker it replaced named a process that is gone (an unclean
// end of the previous run). A state directory it cannot write is not an
// error (the agent runs without the marker): it returns the write error
// for a note.
func markRunning(stateDir string, now time.Time) (unclean bool, werr error) {
	path := filepath.Join(stateDir, runMarkerName)
	if b, err := os.ReadFile(path); err == nil {
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
	b, _ := json.Marshal(runMarker{PID: os.Getpid(), StartedAt: now.UTC()})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return unclean, fmt.Errorf("run marker: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return unclean, fmt.Errorf("run marker: %w", err)
	}
	return unclean, nil
}

// markStopped removes this process's run marker (a clean shutdown).
func markStopped(stateDir string) error {
	path := filepath.Join(stateDir, runMarkerName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var m runMarker
	if err == nil && json.Unmarshal(b, &m) == nil && m.PID != os.Getpid() {
		return nil // another process's
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("run marker: %w", err)
	}
	return nil
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return err == nil
}
