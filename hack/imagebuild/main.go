// Command imagebuild writes a container image holding one static binary as a
// docker-archive tarball (the format of `docker save`, which `docker load`,
// `ctr images import`, `podman load` and `skopeo copy docker-archive:` read),
// without a container daemon or a registry.
//
// The image is equivalent to the Dockerfile's final stage on
// gcr.io/distroless/static-debian12:nonroot: the binary at -path as the
// entrypoint, the user -user, and distroless' few files (/etc/passwd and
// /etc/group naming root, nobody and nonroot, /home/nonroot, /tmp, and the
// host's CA bundle at /etc/ssl/certs/ca-certificates.crt when it has one).
// No shell. The output is reproducible: every timestamp is -created, so the
// same inputs give a byte-identical tarball with the same Go toolchain (its
// compress/gzip compresses the layer) and go.mod.
//
//	go run ./hack/imagebuild -binary bin/shadowtune -tag localhost/shadowtune:dev -o bin/shadowtune-image.tar
//	go run ./hack/imagebuild -binary bin/pause -path /pause -user 65535:65535 -tag localhost/pause:3.10 -o pause.tar
//
// A dynamically linked binary takes its shared libraries and loader along
// with -file, once each, at the paths ldd names (symlinks are followed):
//
//	go run ./hack/imagebuild -binary /usr/bin/db_bench -path /usr/bin/db_bench \
//		-file /lib64/ld-linux-x86-64.so.2 -file /lib/x86_64-linux-gnu/libc.so.6 ... -tag localhost/db-bench:dev -o db-bench.tar
//
// This program only lists the layer's files (as an uncompressed tar) and
// fills in the image config; go-containerregistry (pkg/v1/mutate,
// pkg/v1/tarball) gzips the layer, computes the digests and diff IDs, and
// writes manifest.json and the archive.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	binary   string
	path     string
	user     string
	tag      name.Tag
	out      string
	caBundle string
	workdir  string
	created  time.Time
	arch     string
	labels   map[string]string
	files    []string // more files, at their own paths
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "imagebuild: error: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	var o options
	var labels stringList
	var tag string
	created := fs.String("created", "1970-01-01T00:00:00Z", "image creation time and every file's mtime (RFC 3339); SOURCE_DATE_EPOCH overrides the default")
	fs.StringVar(&o.binary, "binary", "", "the static binary to put in the image (required)")
	fs.StringVar(&o.path, "path", "/usr/local/bin/shadowtune", "its path in the image, also the entrypoint")
	fs.StringVar(&o.user, "user", "65532:65532", "the image's USER (uid:gid)")
	fs.StringVar(&tag, "tag", "", "image name and tag, e.g. localhost/shadowtune:dev (required)")
	fs.StringVar(&o.out, "o", "", "output tarball (required)")
	fs.StringVar(&o.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA bundle copied to /etc/ssl/certs/ca-certificates.crt; skipped when absent or empty")
	fs.StringVar(&o.workdir, "workdir", "/home/nonroot", "the image's working directory")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "image architecture (the binary's)")
	fs.Var(&labels, "label", "KEY=VALUE image label (repeatable)")
	var files stringList
	fs.Var(&files, "file", "an absolute path of this machine added at the same path, its symlinks followed, 0755 when executable, else 0644 (repeatable): a dynamically linked binary's libraries and loader")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.binary == "" || tag == "" || o.out == "" {
		return errors.New("-binary, -tag and -o are required")
	}
	if !path.IsAbs(o.path) {
		return fmt.Errorf("-path %q: want an absolute path", o.path)
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}
	if !strings.HasSuffix(tag, ":"+ref.TagStr()) {
		return fmt.Errorf("-tag %q: want NAME:TAG", tag)
	}
	o.tag = ref
	if _, _, err := parseUser(o.user); err != nil {
		return err
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" && !flagSet(fs, "created") {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
		}
		o.created = time.Unix(sec, 0).UTC()
	} else {
		t, err := time.Parse(time.RFC3339, *created)
		if err != nil {
			return fmt.Errorf("-created: %w", err)
		}
		o.created = t.UTC()
	}
	for _, f := range files {
		if !path.IsAbs(f) {
			return fmt.Errorf("-file %q: want an absolute path", f)
		}
	}
	o.files = files
	o.labels = map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("-label %q: want KEY=VALUE", l)
		}
		o.labels[k] = v
	}
	return build(&o)
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func parseUser(u string) (uid, gid int, err error) {
	us, gs, ok := strings.Cut(u, ":")
	if !ok {
		gs = us
	}
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("-user %q: want numeric UID:GID", u)
	}
	return uid, gid, nil
}

// entry is one file or directory of the layer.
type entry struct {
	name     string // relative, no leading slash
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

func build(o *options) error {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return fmt.Errorf("%s is not an ELF binary", o.binary)
	}
	entries := baseFiles(o)
	entries = append(entries, entry{name: strings.TrimPrefix(o.path, "/"), mode: 0o755, data: bin})
	have := map[string]bool{}
	for _, e := range entries {
		have[e.name] = true
	}
	for _, f := range o.files {
		e, err := fileEntry(f)
		if err != nil {
			return err
		}
		if have[e.name] {
			return fmt.Errorf("-file %s: the image has that path already", f)
		}
		have[e.name] = true
		entries = append(entries, e)
	}
	entries = withParents(entries)

	layerData, err := layerTar(entries, o.created)
	if err != nil {
		return err
	}
	// ggcr gzips the layer (BestSpeed); caching keeps it from compressing
	// twice (once for the digest, once for the archive).
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerData)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return err
	}
	img, err := image(o, layer)
	if err != nil {
		return err
	}
	return writeAtomic(o.out, func(w io.Writer) error { return tarball.Write(o.tag, img, w) })
}

// image is the one-layer image: the config without rootfs, then the layer
// appended, which adds its diff ID and history entry.
func image(o *options, layer v1.Layer) (v1.Image, error) {
	created := v1.Time{Time: o.created}
	cfg := &v1.ConfigFile{
		Architecture: o.arch,
		OS:           "linux",
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       o.user,
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			Entrypoint: []string{o.path},
			WorkingDir: o.workdir,
		},
	}
	if len(o.labels) > 0 {
		cfg.Config.Labels = o.labels
	}
	base, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "hack/imagebuild " + o.path},
	})
}

// baseFiles are distroless static nonroot's own files.
func baseFiles(o *options) []entry {
	e := []entry{
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "root", mode: 0o700, dir: true},
		{name: "home/nonroot", mode: 0o700, dir: true, uid: 65532, gid: 65532},
		{name: "tmp", mode: 0o1777, dir: true},
	}
	if wd := strings.TrimPrefix(path.Clean(o.workdir), "/"); wd != "" && wd != "home/nonroot" && wd != "." {
		e = append(e, entry{name: wd, mode: 0o755, dir: true})
	}
	if ca, err := os.ReadFile(o.caBundle); err == nil && len(ca) > 0 {
		e = append(e, entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca})
	}
	return e
}

// fileEntry is the regular file at abs (symlinks followed) as an entry at
// the same path: 0755 when anyone may execute it, else 0644.
func fileEntry(abs string) (entry, error) {
	fi, err := os.Stat(abs)
	if err != nil {
		return entry{}, fmt.Errorf("-file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return entry{}, fmt.Errorf("-file %s: not a regular file", abs)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return entry{}, fmt.Errorf("-file: %w", err)
	}
	mode := int64(0o644)
	if fi.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	return entry{name: strings.TrimPrefix(path.Clean(abs), "/"), mode: mode, data: data}, nil
}

// withParents adds the missing parent directories (0755, root) and sorts the
// entries so that every directory precedes its contents.
func withParents(entries []entry) []entry {
	have := map[string]bool{}
	for _, e := range entries {
		have[e.name] = true
	}
	for _, e := range entries {
		for d := path.Dir(e.name); d != "." && !have[d]; d = path.Dir(d) {
			have[d] = true
			entries = append(entries, entry{name: d, mode: 0o755, dir: true})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries
}

// layerTar is the layer's uncompressed tar; every mtime is mtime.
func layerTar(entries []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeAtomic writes name (0644) through a temporary file in its directory,
// so that a failed build leaves no partial tarball.
func writeAtomic(name string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
