package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoFio is returned (wrapped) when the fio binary cannot be found.
var ErrNoFio = errors.New("fio not found: install fio (Debian/Ubuntu: apt-get install fio; Fedora/RHEL: dnf install fio)")

// LookFio returns the path of the fio binary: path if it is not empty
// (a name is looked up in $PATH), else "fio" from $PATH.
func LookFio(path string) (string, error) {
	if path == "" {
		path = "fio"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%w (%w)", ErrNoFio, err)
	}
	return p, nil
}

// fioVersion returns what `fio --version` prints ("fio-3.33").
func fioVersion(ctx context.Context, fio string) string {
	out, err := exec.CommandContext(ctx, fio, "--version").Output()
	if err != nil {
		return "fio (version unknown)"
	}
	return strings.TrimSpace(string(out))
}

// fioRound is what one fio run did, from its JSON report.
type fioRound struct {
	Reads, Writes int64         // requests completed
	Runtime       time.Duration // the job's I/O time
	Wall          time.Duration // the whole run, start-up included
}

// fioArgs returns fio's arguments to replay iolog on device dev: one
// request at a time (psync, iodepth 1), O_DIRECT, back to back
// (replay_no_stall ignores the log's timestamps), the page cache left alone
// (invalidate=0), for at most runtime. readOnly adds --readonly, fio's own
// guard that drops every write and trim.
func fioArgs(iolog, dev string, readOnly bool, runtime time.Duration) []string {
	args := []string{
		"--name=train",
		"--filename=" + dev,
		"--read_iolog=" + iolog,
		"--ioengine=psync",
		"--direct=1",
		"--iodepth=1",
		"--replay_no_stall=1",
		"--invalidate=0",
		"--allow_mounted_write=0",
		"--runtime=" + strconv.FormatInt(max(runtime.Milliseconds(), 1), 10) + "ms",
		"--output-format=json",
	}
	if readOnly {
		args = append(args, "--readonly")
	}
	return args
}

// runFio replays iolog against dev and parses fio's JSON report. On ctx
// cancellation fio gets SIGINT (it stops and still reports).
func runFio(ctx context.Context, fio, iolog, dev string, readOnly bool, runtime time.Duration) (fioRound, error) {
	cmd := exec.CommandContext(ctx, fio, fioArgs(iolog, dev, readOnly, runtime)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	r, perr := parseFioJSON(stdout.Bytes())
	r.Wall = wall
	if err != nil && (perr != nil || ctx.Err() == nil) {
		return r, fmt.Errorf("fio %s: %w: %s", dev, err, lastLine(stderr.String(), stdout.String()))
	}
	if perr != nil {
		return r, fmt.Errorf("fio %s: %w: %s", dev, perr, lastLine(stderr.String(), stdout.String()))
	}
	return r, nil
}

// parseFioJSON reads the counters of fio's --output-format=json report
// (fio may print notes before the JSON object).
func parseFioJSON(b []byte) (fioRound, error) {
	i := bytes.IndexByte(b, '{')
	if i < 0 {
		return fioRound{}, errors.New("no JSON report")
	}
	var rep struct {
		Jobs []struct {
			Error      int   `json:"error"`
			JobRuntime int64 `json:"job_runtime"` // ms
			Read       struct {
				TotalIOs int64 `json:"total_ios"`
			} `json:"read"`
			Write struct {
				TotalIOs int64 `json:"total_ios"`
			} `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(b[i:], &rep); err != nil {
		return fioRound{}, fmt.Errorf("JSON report: %w", err)
	}
	if len(rep.Jobs) != 1 {
		return fioRound{}, fmt.Errorf("JSON report has %d jobs, want 1", len(rep.Jobs))
	}
	j := rep.Jobs[0]
	r := fioRound{Reads: j.Read.TotalIOs, Writes: j.Write.TotalIOs, Runtime: time.Duration(j.JobRuntime) * time.Millisecond}
	if j.Error != 0 {
		return r, fmt.Errorf("job error %d (%w)", j.Error, syscall.Errno(j.Error))
	}
	return r, nil
}

// lastLine returns the last non-empty line of the first non-empty text.
func lastLine(texts ...string) string {
	for _, t := range texts {
		lines := strings.Split(strings.TrimSpace(t), "\n")
		if s := strings.TrimSpace(lines[len(lines)-1]); s != "" {
			return s
		}
	}
	return "no output"
}
