// Package version reports the build's version, set at link time:
//
//	go build -ldflags "-X github.com/shadowtune/shadowtune/internal/version.Version=v0.1.0 \
//	  -X github.com/shadowtune/shadowtune/internal/version.Commit=$(git rev-parse --short HEAD)"
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version and Commit are set with -ldflags -X; they default to "dev" and
// the VCS revision Go embedded, if any.
var (
	Version = "dev"
	Commit  = ""
)

// String returns "shadowtune VERSION (commit COMMIT, GOVERSION OS/ARCH)".
func String() string {
	c := Commit
	if c == "" {
		c = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 7 {
					c = s.Value[:7]
				}
			}
		}
	}
	return fmt.Sprintf("shadowtune %s (commit %s, %s %s/%s)", Version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
