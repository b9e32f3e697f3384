package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// pauseBinary builds ./pause, a small static binary, once per test binary.
func pauseBinary(t *testing.T) string {
	t.Helper()
	if pauseBin != "" {
		return pauseBin
	}
	bin := filepath.Join(pauseDir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./pause: %v\n%s", err, out)
	}
	pauseBin = bin
	return bin
}

var pauseBin, pauseDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "imagebuild-test")
	if err != nil {
		panic(err)
	}
	pauseDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// layerEntry is what the test checks of one tar entry.
type layerEntry struct {
	typ      byte
	mode     int64
	uid, gid int
}

func TestImage(t *testing.T) {
	bin := pauseBinary(t)
	binData, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	args := func(out string) []string {
		return []string{"-binary", bin, "-path", "/usr/local/bin/shadowtune", "-user", "65532:65532",
			"-tag", "localhost/shadowtune:dev", "-o", out, "-ca-bundle", ca,
			"-created", created.Format(time.RFC3339),
			"-label", "org.opencontainers.image.title=shadowtune", "-label", "org.opencontainers.image.version=v1.2.3"}
	}
	out1, out2 := filepath.Join(dir, "a", "image.tar"), filepath.Join(dir, "b", "image.tar")
	for _, out := range []string{out1, out2} {
		if err := run(args(out)); err != nil {
			t.Fatal(err)
		}
	}
	a, err := os.ReadFile(out1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two runs with the same inputs wrote different tarballs")
	}
	if fi, err := os.Stat(out1); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("output mode: %v, %v; want 0644", fi.Mode(), err)
	}

	tag, err := name.NewTag("localhost/shadowtune:dev")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out1, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || !reflect.DeepEqual(c.Entrypoint, []string{"/usr/local/bin/shadowtune"}) ||
		c.WorkingDir != "/home/nonroot" || len(c.Cmd) != 0 {
		t.Errorf("config: user %q, entrypoint %q, cmd %q, workdir %q", c.User, c.Entrypoint, c.Cmd, c.WorkingDir)
	}
	wantEnv := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	if !reflect.DeepEqual(c.Env, wantEnv) {
		t.Errorf("env %q, want %q", c.Env, wantEnv)
	}
	if want := map[string]string{"org.opencontainers.image.title": "shadowtune", "org.opencontainers.image.version": "v1.2.3"}; !reflect.DeepEqual(c.Labels, want) {
		t.Errorf("labels %v, want %v", c.Labels, want)
	}
	if !cf.Created.Equal(created) || cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("created %v, os %q, architecture %q", cf.Created, cf.OS, cf.Architecture)
	}
	if len(cf.History) != 1 || !cf.History[0].Created.Equal(created) {
		t.Errorf("history %+v", cf.History)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	got, data := readLayer(t, layers[0], created)
	want := map[string]layerEntry{
		"etc/":                              {tar.TypeDir, 0o755, 0, 0},
		"etc/group":                         {tar.TypeReg, 0o644, 0, 0},
		"etc/passwd":                        {tar.TypeReg, 0o644, 0, 0},
		"etc/ssl/":                          {tar.TypeDir, 0o755, 0, 0},
		"etc/ssl/certs/":                    {tar.TypeDir, 0o755, 0, 0},
		"etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644, 0, 0},
		"home/":                             {tar.TypeDir, 0o755, 0, 0},
		"home/nonroot/":                     {tar.TypeDir, 0o700, 65532, 65532},
		"root/":                             {tar.TypeDir, 0o700, 0, 0},
		"tmp/":                              {tar.TypeDir, 0o1777, 0, 0},
		"usr/":                              {tar.TypeDir, 0o755, 0, 0},
		"usr/local/":                        {tar.TypeDir, 0o755, 0, 0},
		"usr/local/bin/":                    {tar.TypeDir, 0o755, 0, 0},
		"usr/local/bin/shadowtune":          {tar.TypeReg, 0o755, 0, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer entries:\n got %v\nwant %v", got, want)
	}
	if !bytes.Equal(data["usr/local/bin/shadowtune"], binData) {
		t.Error("the binary in the layer differs from the input")
	}
	if s := string(data["etc/passwd"]); !strings.Contains(s, "nonroot:x:65532:65532:nonroot:/home/nonroot:") {
		t.Errorf("/etc/passwd:\n%s", s)
	}
	if s := string(data["etc/ssl/certs/ca-certificates.crt"]); !strings.Contains(s, "BEGIN CERTIFICATE") {
		t.Errorf("CA bundle: %q", s)
	}
}

// TestFiles: -file adds files of this machine at their own paths (a
// dynamically linked binary's libraries), symlinks followed, 0755 when
// executable, else 0644.
func TestFiles(t *testing.T) {
	bin := pauseBinary(t)
	dir := t.TempDir()
	lib, exe, link := filepath.Join(dir, "lib", "libx.so.1.2"), filepath.Join(dir, "ld.so"), filepath.Join(dir, "lib", "libx.so.1")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("library"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("loader"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("libx.so.1.2", link); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	base := []string{"-binary", bin, "-path", "/usr/bin/x", "-tag", "localhost/x:1", "-o", out, "-ca-bundle", "",
		"-created", "1970-01-01T00:00:00Z"}
	if err := run(append(base, "-file", link, "-file", exe)); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("localhost/x:1")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	got, data := readLayer(t, layers[0], time.Unix(0, 0).UTC())
	rel := strings.TrimPrefix
	for name, want := range map[string]layerEntry{
		rel(link, "/"): {tar.TypeReg, 0o644, 0, 0},
		rel(exe, "/"):  {tar.TypeReg, 0o755, 0, 0},
		"usr/bin/x":    {tar.TypeReg, 0o755, 0, 0},
	} {
		if got[name] != want {
			t.Errorf("%s: %+v, want %+v", name, got[name], want)
		}
	}
	if d := string(data[rel(link, "/")]); d != "library" {
		t.Errorf("%s holds %q, want the symlink's target's contents", link, d)
	}
	for _, tc := range []struct {
		file, want string
	}{
		{"lib/libx.so.1", "absolute"},
		{filepath.Join(dir, "missing"), "no such file"},
		{dir, "not a regular file"},
	} {
		if err := run(append(base, "-file", tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("-file %s: %v, want an error containing %q", tc.file, err, tc.want)
		}
	}
	if err := run(append(base, "-path", exe, "-file", exe)); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("-file at the binary's own -path: %v, want an error containing %q", err, "already")
	}
}

// TestPauseImage builds the image as e2e/cluster does: another path, user
// and working directory, no CA bundle, and the time from SOURCE_DATE_EPOCH.
func TestPauseImage(t *testing.T) {
	bin := pauseBinary(t)
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	out := filepath.Join(t.TempDir(), "pause.tar")
	if err := run([]string{"-binary", bin, "-path", "/pause", "-user", "65535:65535", "-workdir", "/",
		"-tag", "localhost/pause:3.10", "-o", out, "-ca-bundle", filepath.Join(t.TempDir(), "absent")}); err != nil {
		t.Fatal(err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(out) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !reflect.DeepEqual(m[0].RepoTags, []string{"localhost/pause:3.10"}) {
		t.Fatalf("manifest.json: %+v", m)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(1700000000, 0).UTC()
	c := cf.Config
	if c.User != "65535:65535" || !reflect.DeepEqual(c.Entrypoint, []string{"/pause"}) || c.WorkingDir != "/" ||
		len(c.Labels) != 0 || !cf.Created.Equal(created) {
		t.Errorf("config: user %q, entrypoint %q, workdir %q, labels %v, created %v", c.User, c.Entrypoint, c.WorkingDir, c.Labels, cf.Created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	got, _ := readLayer(t, layers[0], created)
	want := map[string]layerEntry{
		"etc/":          {tar.TypeDir, 0o755, 0, 0},
		"etc/group":     {tar.TypeReg, 0o644, 0, 0},
		"etc/passwd":    {tar.TypeReg, 0o644, 0, 0},
		"home/":         {tar.TypeDir, 0o755, 0, 0},
		"home/nonroot/": {tar.TypeDir, 0o700, 65532, 65532},
		"pause":         {tar.TypeReg, 0o755, 0, 0},
		"root/":         {tar.TypeDir, 0o700, 0, 0},
		"tmp/":          {tar.TypeDir, 0o1777, 0, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer entries:\n got %v\nwant %v", got, want)
	}
}

// readLayer lists the layer's entries, checks that each directory precedes
// its contents and that every mtime is mtime, and returns the files' data.
func readLayer(t *testing.T, l v1.Layer, mtime time.Time) (map[string]layerEntry, map[string][]byte) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries, data := map[string]layerEntry{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if parent := filepath.Dir(strings.TrimSuffix(h.Name, "/")); parent != "." {
			if _, ok := entries[parent+"/"]; !ok {
				t.Errorf("%s precedes its directory %s/", h.Name, parent)
			}
		}
		if !h.ModTime.Equal(mtime) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, mtime)
		}
		entries[h.Name] = layerEntry{h.Typeflag, h.Mode, h.Uid, h.Gid}
		if data[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	return entries, data
}

func TestFlagErrors(t *testing.T) {
	bin := pauseBinary(t)
	out := filepath.Join(t.TempDir(), "x.tar")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tag", "localhost/x:1", "-o", out}, "required"},
		{[]string{"-binary", bin, "-tag", "localhost/x", "-o", out}, "want NAME:TAG"},
		{[]string{"-binary", bin, "-tag", "localhost:5000/x", "-o", out}, "want NAME:TAG"},
		{[]string{"-binary", bin, "-tag", "Bad/Name:1", "-o", out}, "-tag"},
		{[]string{"-binary", bin, "-tag", "localhost/x:1", "-o", out, "-user", "nonroot"}, "numeric"},
		{[]string{"-binary", bin, "-tag", "localhost/x:1", "-o", out, "-path", "pause"}, "absolute"},
		{[]string{"-binary", bin, "-tag", "localhost/x:1", "-o", out, "-label", "novalue"}, "KEY=VALUE"},
		{[]string{"-binary", "main.go", "-tag", "localhost/x:1", "-o", out}, "not an ELF"},
	} {
		err := run(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed run left %s: %v", out, err)
	}
}
