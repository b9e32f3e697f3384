package dmcache

import (
	"context"
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/shadowtune/shadowtune/internal/testutil/need"
)

// mkRoot makes the files (path inside root → content; mode 0755) and
// symbolic links (path → target) of a test root file system in a new
// folder, and returns it.
func mkRoot(t *testing.T, files, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		writeFile(t, filepath.Join(root, p), content, 0o755)
	}
	for p, target := range links {
		l := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// TestLookPathIn: programs are found in RootPath's folders inside the
// root, through symbolic links read as a process chrooted into it reads
// them (absolute targets inside the root, ".." stopping at its top),
// and named by the path that was looked up (lvchange stays lvchange, a
// link to lvm, which reads its command from its name).
func TestLookPathIn(t *testing.T) {
	root := mkRoot(t, map[string]string{
		"usr/sbin/dmsetup":         "x",
		"usr/sbin/lvm":             "x",
		"opt/st-only-in-root/tool": "x",
		"st-escape/esc":            "x",
		"usr/local/bin/first":      "x",
		"usr/bin/first":            "x",
		"usr/bin/dir/placeholder":  "x",
		"usr/local/sbin/notexec":   "",
	}, map[string]string{
		"sbin":                 "usr/sbin",
		"usr/sbin/lvchange":    "lvm",
		"usr/local/sbin/abs":   "/opt/st-only-in-root/tool",
		"usr/local/sbin/esc":   "../../../../../../st-escape/esc",
		"usr/local/sbin/loop":  "loop",
		"usr/local/sbin/outer": "/bin/sh", // the test host's, not in root
		"usr/sbin/dir":         "../bin/dir",
	})
	if err := os.Chmod(filepath.Join(root, "usr/local/sbin/notexec"), 0o644); err != nil {
		t.Fatal(err)
	}
	for prog, want := range map[string]string{
		"dmsetup": "/usr/sbin/dmsetup", "lvchange": "/usr/sbin/lvchange", "abs": "/usr/local/sbin/abs",
		"esc": "/usr/local/sbin/esc", "first": "/usr/local/bin/first", "/sbin/dmsetup": "/sbin/dmsetup",
	} {
		if got, err := LookPathIn(root, prog); err != nil || got != want {
			t.Errorf("LookPathIn(%s) = %q, %v; want %q", prog, got, err, want)
		}
	}
	for _, prog := range []string{"nosuch", "notexec", "loop", "outer", "dir", "/usr/sbin/nosuch", "/sbin"} {
		_, err := LookPathIn(root, prog)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), root) || !strings.HasPrefix(err.Error(), "dmcache: "+prog+": ") {
			t.Errorf("LookPathIn(%s): %v, want fs.ErrNotExist naming the program and the root", prog, err)
		}
	}
	if _, err := LookPathIn(root, "sbin/dmsetup"); err == nil {
		t.Error("LookPathIn(sbin/dmsetup): a relative path with a folder was accepted")
	}
}

// staticBusybox returns a statically linked busybox of the test host, to
// be the shell and utilities of a test root ($BUSYBOX, else from $PATH);
// without one the test is skipped, or fails under CI=true (package need).
func staticBusybox(t *testing.T) string {
	t.Helper()
	const part, hint = "static busybox", "a test root needs a static one for its shell (Debian: busybox-static)"
	p := need.Tool(t, "busybox", hint)
	f, err := elf.Open(p)
	if err != nil {
		need.Missing(t, part, "busybox %s: %v", p, err)
	}
	defer f.Close()
	for _, ph := range f.Progs {
		if ph.Type == elf.PT_INTERP {
			need.Missing(t, part, "busybox %s is dynamically linked: %s", p, hint)
		}
	}
	need.Have(t, part)
	return p
}

// fakeRoot makes a root file system holding the fake tools as its
// /usr/sbin/dmsetup and /usr/sbin/lvm (/sbin a link to usr/sbin, as on a
// merged-/usr system), a static busybox as their /bin/sh, cat and tr,
// and, in /st-fake, the fake's answers (files); FAKE_DIR is set to
// /st-fake, a path that exists only inside the root. It returns the
// root and a reader of the commands the fakes logged.
func fakeRoot(t *testing.T, files map[string]string) (string, func() []string) {
	t.Helper()
	need.Root(t, "running a tool in Tool.Root is a chroot (CAP_SYS_CHROOT)")
	busybox := staticBusybox(t)
	if _, err := os.Stat("/st-fake"); err == nil {
		t.Fatal("/st-fake exists outside the test root: the test could not tell the root from the host")
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	root := mkRoot(t, map[string]string{
		"usr/sbin/dmsetup": fixture(t, "fake-dmsetup.sh"),
		"usr/sbin/lvm":     fixture(t, "fake-lvm.sh"),
		"bin/busybox":      string(bb),
	}, map[string]string{"sbin": "usr/sbin", "bin/sh": "busybox", "bin/cat": "busybox", "bin/tr": "busybox"})
	for name, content := range files {
		writeFile(t, filepath.Join(root, "st-fake", name), content, 0o644)
	}
	t.Setenv("FAKE_DIR", "/st-fake")
	return root, func() []string {
		b, _ := os.ReadFile(filepath.Join(root, "st-fake", "log"))
		return splitLines(string(b))
	}
}

// TestRootRunsToolsInRoot: with Root set, the tools run are the root's
// own (its /usr/sbin/dmsetup and lvm, which the test host's PATH does
// not have), chrooted into it: the fakes answer from and log to /st-fake,
// which exists only inside the root. A switch of a raw cache and an lvm
// command run as they do without Root; a tool the root lacks is an
// error naming the root.
func TestRootRunsToolsInRoot(t *testing.T) {
	files := raw(t, "table-writethrough-smq.txt", "status-writethrough-smq.txt")
	files["lvm.vgs"] = "  vg0\n"
	root, log := fakeRoot(t, files)
	tool := &Tool{Root: root}
	ctx := context.Background()
	d, err := tool.Get(ctx, "cached")
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.Mode != Writethrough || d.Table.Origin != "254:16" {
		t.Errorf("Get in the root: %+v", d)
	}
	if err := tool.SetMode(ctx, "cached", Passthrough); err != nil {
		t.Fatal(err)
	}
	out, err := tool.lvm(ctx, "", "vgs", "--noheadings", "-o", "vg_name")
	if err != nil || out != "  vg0\n" {
		t.Errorf("lvm vgs in the root: %q, %v", out, err)
	}
	want := append(append(append(append([]string{}, getCmds...), getCmds...), "suspend cached"), getCmds...)
	want = append(want, "reload cached --table 0 262144 cache 253:0 253:1 254:16 128 1 passthrough smq 0", "resume cached",
		"vgs --noheadings -o vg_name")
	if got := log(); !reflect.DeepEqual(got, want) {
		t.Errorf("commands logged in the root's /st-fake:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	tool.LVM = "st-nosuch-lvm"
	_, err = tool.lvm(ctx, "vg0/data", "vgs")
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "dmcache: vg0/data: st-nosuch-lvm: ") || !strings.Contains(err.Error(), root) {
		t.Errorf("a tool the root lacks: %v, want fs.ErrNotExist naming the device, the tool and the root", err)
	}
}
