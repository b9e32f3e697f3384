// Package modelfile keeps a device's learned disk model in the agent's
// state directory: where the file of a disk is (Name, Path), and its
// bounded load (Load) and durable save (Save) through package statefs.
// The node agent loads a model at a device's start and saves it at its
// shutdown; `shadowtune model train` writes there by default.
package modelfile

import (
	"bytes"
	"path/filepath"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/statefs"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// MaxBytes is the largest model file Load reads (bytes): 16 MiB, far
// above a model's size (a default one is about 300 bytes).
const MaxBytes = 16 << 20

// Name names the file, relative to the state directory, where a
// device's learned model is kept (models/NAME[-SERIAL].json); the serial
// or WWN keeps a model from being loaded for a different disk that took
// the same name. `shadowtune model train` writes there by default, and
// the agent loads it at a device's start.
func Name(sd sysfs.Device) string {
	id := sd.Serial
	if id == "" {
		id = sd.WWN
	}
	name := sd.Name
	if id != "" {
		name += "-" + sanitize(id)
	}
	return "models/" + name + ".json"
}

// Path is Name under stateDir.
func Path(stateDir string, sd sysfs.Device) string {
	return filepath.Join(stateDir, Name(sd))
}

// sanitize replaces every byte of s but [A-Za-z0-9_-] with '_'.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Load returns the model saved in stateDir for the device when one was
// saved for a device of the same size (its class may differ from sysfs's
// after calibration), else the default of the class sysfs reports, with
// loaded false. The file is read as package statefs reads state files: a
// symbolic link, a FIFO, a device or a file over MaxBytes is not a model.
// No error is returned: a file that cannot be read or parsed is no model.
func Load(stateDir string, sd sysfs.Device) (m *model.Model, loaded bool) {
	capacity := max(sd.SizeBytes/trace.SectorSize, 1)
	if b, err := statefs.ReadFile(stateDir, Name(sd), MaxBytes); err == nil {
		if m, err := model.Load(bytes.NewReader(b)); err == nil && m.Config().CapacitySectors == capacity {
			return m, true
		}
	}
	return model.Default(sd.Class(), capacity), false
}

// Save writes m, the model of device sd, into stateDir durably and whole
// (package statefs: temporary file, fsync, rename; never through a
// symbolic link), readable by its owner only. It returns statefs's error
// (the model's write error among them), not wrapped again.
func Save(stateDir string, sd sysfs.Device, m *model.Model) error {
	return statefs.WriteFile(stateDir, Name(sd), 0o600, m.Save)
}
