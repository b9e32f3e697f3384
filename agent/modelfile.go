package agent

// The learned model of a device in the state directory.

import (
	"bytes"
	"path/filepath"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/statefs"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// MaxModelBytes is the largest model file the agent loads from its state
// directory: 16 MiB, far above a model's size (a default one is about 300
// bytes).
const MaxModelBytes = 16 << 20

// ModelName names the file, relative to the state directory, where a
// device's learned model is kept (models/NAME[-SERIAL].json); the serial
// or WWN keeps a model from being loaded for a different disk that took
// the same name. `shadowtune model train` writes there by default, and
// Run loads it at start.
func ModelName(sd sysfs.Device) string {
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

// ModelPath is ModelName under stateDir.
func ModelPath(stateDir string, sd sysfs.Device) string {
	return filepath.Join(stateDir, ModelName(sd))
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// loadModel returns the saved model of the device when one was saved for
// a device of the same size (its class may differ from sysfs's after
// calibration), else the default of the class sysfs reports. The file is
// read as package statefs reads state files: a symbolic link, a FIFO, a
// device or a file over MaxModelBytes is not a model.
func loadModel(stateDir string, sd sysfs.Device) (m *model.Model, loaded bool) {
	capacity := max(sd.SizeBytes/trace.SectorSize, 1)
	if b, err := statefs.ReadFile(stateDir, ModelName(sd), MaxModelBytes); err == nil {
		if m, err := model.Load(bytes.NewReader(b)); err == nil && m.Config().CapacitySectors == capacity {
			return m, true
		}
	}
	return model.Default(sd.Class(), capacity), false
}

// saveModel writes the device's model durably and whole (package statefs:
// temporary file, fsync, rename; never through a symbolic link).
func saveModel(stateDir string, d *device) error {
	return statefs.WriteFile(stateDir, ModelName(d.sys), 0o600, d.ctrl.Model().Save)
}
