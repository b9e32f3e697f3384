// Package envtest starts a real kube-apiserver and etcd for tests, through
// controller-runtime's envtest, with shadowtune's CRDs installed and its API
// registered.
//
// The binaries come from hack/k8s-bins.sh (make envtest-assets): a
// kube-apiserver built from the module proxy and the Debian etcd, in one
// directory named by KUBEBUILDER_ASSETS (make test sets it). Without
// KUBEBUILDER_ASSETS the helper asks `hack/k8s-bins.sh --print-dir` for the
// directory. When that fails too the test is skipped, or fails when CI=true
// (package need): in CI a missing control plane is an error, not a reason to
// pass. A
// KUBEBUILDER_ASSETS that is set but lacks the binaries fails the test.
//
//	func TestReconcile(t *testing.T) {
//		cfg, c := envtest.Start(t)
//		// c is a client.Client with the shadowtune and client-go kinds;
//		// cfg is for a controller-runtime manager (Scheme: envtest.Scheme()).
//	}
//
// Every Start runs its own etcd and kube-apiserver on free loopback ports
// and stops both in t.Cleanup, so tests may run in parallel.
package envtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/shadowtune/shadowtune/api/scheme"
	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// AssetsEnv names the directory holding kube-apiserver and etcd (envtest's
// own variable).
const AssetsEnv = "KUBEBUILDER_ASSETS"

// Scheme returns a new scheme with client-go's kinds and shadowtune's
// v1alpha1 kinds: the scheme of the client Start returns, and the one to give
// a controller-runtime manager built on Start's config (api/scheme.New).
func Scheme() *runtime.Scheme {
	s, err := scheme.New()
	utilruntime.Must(err)
	return s
}

// Start starts etcd and kube-apiserver, installs the CRDs of the
// repository's crds/ directory and those of crdDirs (relative paths are taken
// from the repository root), and returns a config for the API server (as
// cluster admin) and a client with Scheme. Both processes are stopped, and
// their data removed, in t.Cleanup.
//
// It skips the test when there are no binaries (see the package comment) or
// with -short, and fails it when the control plane does not come up.
func Start(t testing.TB, crdDirs ...string) (*rest.Config, client.Client) {
	t.Helper()
	env := StartEnv(t, crdDirs...)
	return env.Config, env.Client
}

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as cluster admin.
	Config *rest.Config
	// Client uses Scheme.
	Client client.Client
	// Scheme is the client's scheme (see Scheme).
	Scheme *runtime.Scheme
	// Environment is the underlying controller-runtime environment, e.g.
	// for Environment.ControlPlane.AddUser.
	Environment *crenvtest.Environment
}

// StartEnv is Start returning the whole environment.
func StartEnv(t testing.TB, crdDirs ...string) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("envtest: skipped with -short (starts etcd and kube-apiserver)")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	assets := AssetsDir(t)

	dirs := []string{filepath.Join(root, "crds")}
	for _, d := range crdDirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(root, d)
		}
		dirs = append(dirs, d)
	}

	scheme := Scheme()
	env := &crenvtest.Environment{
		Scheme:                scheme,
		BinaryAssetsDirectory: assets,
		CRDInstallOptions: crenvtest.CRDInstallOptions{
			Paths:              dirs,
			ErrorIfPathMissing: true,
			Scheme:             scheme,
		},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute, // 2 shared cores, parallel test binaries
		ControlPlaneStopTimeout:  time.Minute,
	}
	// The Debian etcd is 3.4 (kube-apiserver 1.32 and 1.33 work with it).
	// envtest gives etcd only --data-dir, --listen-peer-urls,
	// --listen-client-urls and --advertise-client-urls, all known to 3.4,
	// and adds --unsafe-no-fsync only when `etcd --help` lists it (3.5+), so
	// etcd needs no arguments of ours.
	//
	// The output of etcd and kube-apiserver (its last lines) goes to the
	// test's log when the control plane fails to start.
	etcdLog, apiLog := &tailBuffer{}, &tailBuffer{}
	env.ControlPlane.Etcd = &crenvtest.Etcd{Out: etcdLog, Err: etcdLog}
	env.ControlPlane.APIServer = &crenvtest.APIServer{Out: apiLog, Err: apiLog}

	cfg, err := env.Start()
	if err != nil {
		// Start stops what it started on most errors; make sure.
		_ = env.Stop()
		t.Fatalf("envtest: starting etcd and kube-apiserver from %s: %v\n--- etcd:\n%s\n--- kube-apiserver:\n%s",
			assets, err, tail(etcdLog.String(), 40), tail(apiLog.String(), 40))
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("envtest: stopping etcd and kube-apiserver: %v", err)
		}
	})

	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("envtest: client: %v", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, Environment: env}
}

// AssetsDir returns the directory with kube-apiserver and etcd:
// KUBEBUILDER_ASSETS when set, else what `hack/k8s-bins.sh --print-dir`
// prints. Without either it skips the test, or fails it when CI=true
// (package need).
func AssetsDir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(AssetsEnv); dir != "" {
		// Set on purpose: wrong is an error, not a reason to skip.
		if err := checkAssets(dir); err != nil {
			t.Fatalf("envtest: %s=%s: %v", AssetsEnv, dir, err)
		}
		need.Have(t, "kube-apiserver and etcd")
		return dir
	}
	dir, err := printDir()
	if err == nil {
		need.Have(t, "kube-apiserver and etcd")
		return dir
	}
	need.Missing(t, "kube-apiserver and etcd", "envtest: %v (hack/k8s-bins.sh builds them; make test runs it)", err)
	return ""
}

// printDir asks hack/k8s-bins.sh for the directory it fills.
func printDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "hack", "k8s-bins.sh")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(script, "--print-dir")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s unset and `hack/k8s-bins.sh --print-dir` failed (%w): %s",
			AssetsEnv, err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if err := checkAssets(dir); err != nil {
		return "", fmt.Errorf("hack/k8s-bins.sh --print-dir: %s: %w", dir, err)
	}
	return dir, nil
}

func checkAssets(dir string) error {
	var missing []string
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no executable %s there; run `make envtest-assets` (hack/k8s-bins.sh)", strings.Join(missing, ", "))
	}
	return nil
}

// RepoRoot returns the repository root: the nearest directory at or above
// the working directory (a test's package directory) holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// tailBuffer keeps the last 64 KiB written to it; a process's output is
// copied into it from another goroutine.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailBufferSize = 64 << 10

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - tailBufferSize; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
