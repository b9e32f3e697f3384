package modelfile

import (
	"testing"

	"github.com/shadowtune/shadowtune/agent/sysfs"
)

func TestPath(t *testing.T) {
	for _, c := range []struct {
		sd   sysfs.Device
		want string
	}{
		{sysfs.Device{Name: "loop3"}, "/s/models/loop3.json"},
		{sysfs.Device{Name: "sda", Serial: "WD-WX1234 56", WWN: "naa.5000"}, "/s/models/sda-WD-WX1234_56.json"},
		{sysfs.Device{Name: "nvme0n1", WWN: "eui.002538b1/x"}, "/s/models/nvme0n1-eui_002538b1_x.json"},
	} {
		if got := Path("/s", c.sd); got != c.want {
			t.Errorf("Path(%+v) = %s, want %s", c.sd, got, c.want)
		}
	}
}
