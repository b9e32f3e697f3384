package agent

// The learned model of a device in the state directory.

import (
	"os"
	"path/filepath"

	"github.com/shadowtune/shadowtune/agent/sysfs"
	"github.com/shadowtune/shadowtune/internal/fsutil"
	"github.com/shadowtune/shadowtune/internal/model"
	"github.com/shadowtune/shadowtune/internal/trace"
)

// ModelPath names the file under stateDir where a device's learned model
// is kept (models/NAME[-SERIAL].json); the serial or WWN keeps a model from
// being loaded for a different disk that took the same name. `shadowtune
// model train` writes there by default, and Run loads it at start.
func ModelPath(stateDir string, sd sysfs.Device) string {
	id := sd.Serial
	if id == "" {
		id = sd.WWN
	}
	name := sd.Name
	if id != "" {
		name += "-" + sanitize(id)
	}
	return filepath.Join(stateDir, "models", name+".json")
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
// calibration), else the default of the class sysfs reports.
func loadModel(stateDir string, sd sysfs.Device) (m *model.Model, loaded bool) {
	capacity := max(sd.SizeBytes/trace.SectorSize, 1)
	if fh, err := os.Open(ModelPath(stateDir, sd)); err == nil {
		defer fh.Close()
		if m, err := model.Load(fh); err == nil && m.Config().CapacitySectors == capacity {
			return m, true
		}
	}
	return model.Default(sd.Class(), capacity), false
}

// saveModel writes the device's model atomically (temp file, fsync,
// rename).
func saveModel(stateDir string, d *device) error {
	return fsutil.WriteAtomic(ModelPath(stateDir, d.sys), 0o600, d.ctrl.model.Save)
}
