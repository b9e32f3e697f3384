package v1alpha1

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const exampleFile = "../../examples/storagetuning-observe.yaml"

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadExample(t *testing.T) {
	st, err := LoadStorageTuningFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	s := st.Spec
	if st.Name != "observe-all-disks" || s.Mode != ModeObserve {
		t.Errorf("name %q mode %q", st.Name, s.Mode)
	}
	if got := s.TunableCandidates(SchedulerBFQ); len(got) != 3 || got[1]["slice_idle"] != 4 {
		t.Errorf("bfq candidates %v", got)
	}
	if got := s.TunableCandidates(SchedulerKyber); len(got) != 4 || got[3]["read_lat_nsec"] != 4000000 {
		t.Errorf("kyber candidates %v", got)
	}
	if s.Evaluation.Window.Duration != 5*time.Second || *s.Evaluation.MarginPercent != 5 ||
		s.Rollout.MinDwell.Duration != 10*time.Minute || s.Rollout.MaxUnavailable.IntValue() != 1 {
		t.Errorf("evaluation %+v rollout %+v", s.Evaluation, s.Rollout)
	}
	for _, tc := range []struct {
		dev  DeviceInfo
		want bool
	}{
		{DeviceInfo{Name: "sda", SizeBytes: 1 << 40, Rotational: true}, true},
		{DeviceInfo{Name: "nvme0n1", SizeBytes: 1 << 40}, true},
		{DeviceInfo{Name: "nvme0n1p1", SizeBytes: 1 << 40}, false},
		{DeviceInfo{Name: "loop0", SizeBytes: 1 << 40}, false},
		{DeviceInfo{Name: "sdb", SizeBytes: 512 << 20}, false},
		{DeviceInfo{Name: "vda", SizeBytes: 1 << 40}, false},
		{DeviceInfo{Name: "nvme0n1", SizeBytes: 64 << 30}, false},
	} {
		if got := s.Matches(tc.dev); got != tc.want {
			t.Errorf("Matches(%+v) = %v, want %v", tc.dev, got, tc.want)
		}
	}
	if ok, err := s.MatchesNode(map[string]string{"kubernetes.io/os": "linux", "storage.shadowtune.io/tune": "true"}); !ok || err != nil {
		t.Errorf("MatchesNode(labelled) = %v, %v", ok, err)
	}
}

// TestExamplesSelectNothingByAccident: no shipped example selects a node
// that was not labelled for it, nor a typical root disk (vda, a small sda or
// nvme0n1) on a labelled one.
func TestExamplesSelectNothingByAccident(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	plain := map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": "n1", "node-role.kubernetes.io/control-plane": ""}
	roots := []DeviceInfo{
		{Name: "vda", SizeBytes: 50 << 30, Rotational: true},
		{Name: "sda", SizeBytes: 64 << 30, Rotational: true},
		{Name: "nvme0n1", SizeBytes: 64 << 30},
		{Name: "xvda", SizeBytes: 32 << 30},
	}
	for _, f := range files {
		st, err := LoadStorageTuningFile(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if ok, err := st.Spec.MatchesNode(plain); ok || err != nil {
			t.Errorf("%s selects an unlabelled node (%v)", f, err)
		}
		for _, d := range roots {
			if st.Spec.Matches(d) {
				t.Errorf("%s selects a typical root disk %+v", f, d)
			}
		}
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), "selects nothing by accident") {
			t.Errorf("%s: no comment says what guards its selection", f)
		}
	}
}

// TestLoadExampleIsDefaults checks the example's claim that every value it
// shows without a "not the default" comment is the default.
func TestLoadExampleIsDefaults(t *testing.T) {
	st, err := LoadStorageTuningFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	def := &StorageTuning{}
	def.Default()
	got := st.Spec
	got.NodeSelector, got.Devices, got.Tunables, got.Cache.Enabled = nil, DeviceSelector{}, nil, false
	if g, w := mustJSON(t, got), mustJSON(t, def.Spec); g != w {
		t.Errorf("example differs from the defaults\nexample:  %s\ndefaults: %s", g, w)
	}
}

func TestLoadErrors(t *testing.T) {
	const head = "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: t\n"
	cases := []struct {
		name, content string
		want          string // the error after "PATH"
	}{
		{"validation", head + "spec:\n  schedulers:\n    default: cfq\n",
			`: spec.schedulers.default: Invalid value: "cfq": must be one of the candidates`},
		{"two errors on one line", head + "spec:\n  mode: Auto\n  evaluation: {marginPercent: 90}\n",
			`: spec.mode: Unsupported value: "Auto": supported values: "Observe", "Apply"; spec.evaluation.marginPercent: Invalid value: 90: must be between 0 and 50`},
		{"unknown field", head + "spec:\n  evaluation:\n    windw: 5s\n", `: unknown field "spec.evaluation.windw"`},
		{"unknown top-level field", head + "sepc: {}\n", `: unknown field "sepc"`},
		{"field names are case-sensitive", head + "spec:\n  Mode: Apply\n", `: unknown field "spec.Mode"`},
		{"duplicate key", head + "spec:\n  mode: Apply\n  mode: Observe\n", `:7: key "mode" already set in map`},
		{"wrong kind", strings.Replace(head, "kind: StorageTuning", "kind: NodeStorageState", 1) + "spec:\n  bogus: 1\n",
			`: kind: Unsupported value: "NodeStorageState": supported values: "StorageTuning"`},
		{"wrong apiVersion", strings.Replace(head, "shadowtune.io/v1alpha1", "shadowtune.io/v1", 1),
			`: apiVersion: Unsupported value: "storage.shadowtune.io/v1": supported values: "storage.shadowtune.io/v1alpha1"`},
		{"no type", "metadata:\n  name: t\n", `: apiVersion: Required value: must be storage.shadowtune.io/v1alpha1; kind: Required value: must be StorageTuning`},
		{"malformed YAML", head + "spec:\n  mode: Apply\n   paused: true\n", `:7: mapping values are not allowed in this context`},
		{"tab indentation", head + "spec:\n\tmode: Apply\n", `:6: found character that cannot start any token`},
		{"empty file", "", `: no YAML document: want a StorageTuning`},
		{"comments only", "# nothing\n---\n# still nothing\n", `: no YAML document: want a StorageTuning`},
		{"two documents", head + "---\n" + head, `: 2 YAML documents: want exactly one StorageTuning`},
		{"a list", "- a\n- b\n", `: the document is not a mapping: want a StorageTuning`},
		{"a scalar", "hello\n", `: the document is not a mapping: want a StorageTuning`},
		{"bad name", strings.Replace(head, "name: t", "name: Bad_Name", 1) + "spec:\n  devices: {include: [loop9]}\n", `: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, "storagetuning.yaml", tc.content)
			st, err := LoadStorageTuningFile(p)
			if err == nil {
				t.Fatalf("loaded %+v", st)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, p+tc.want) {
				t.Errorf("error\n  %s\nwant\n  %s%s", msg, p, tc.want)
			}
			if strings.ContainsAny(msg, "\n\r") {
				t.Errorf("error is not one line: %q", msg)
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != p {
				t.Errorf("error %T is not a *FileError for %s", err, p)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := LoadStorageTuningFile(p)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("error %v, want fs.ErrNotExist", err)
	}
	if want := p + ": open: no such file or directory"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestLoadAccepts(t *testing.T) {
	for name, content := range map[string]string{
		"document markers":        "---\n# policy\napiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata: {name: t}\nspec: {devices: {include: [loop9]}}\n...\n",
		"trailing empty document": "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nspec: {devices: {include: [loop9]}}\n---\n# end\n",
		"JSON": `{"apiVersion": "storage.shadowtune.io/v1alpha1", "kind": "StorageTuning",
		          "spec": {"mode": "Apply", "rollout": {"maxUnavailable": "50%"}}}`,
		"CRLF":              "apiVersion: storage.shadowtune.io/v1alpha1\r\nkind: StorageTuning\r\nspec:\r\n  mode: Apply\r\n",
		"status is ignored": "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nspec: {devices: {include: [loop9]}}\nstatus: {matchedNodes: 3}\n",
	} {
		t.Run(name, func(t *testing.T) {
			st, err := LoadStorageTuningFile(writeFile(t, "st.yaml", content))
			if err != nil {
				t.Fatal(err)
			}
			if st.Spec.Evaluation.Window == nil || st.Spec.Schedulers.Default != SchedulerMQDeadline {
				t.Errorf("not defaulted: %+v", st.Spec)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	st := &StorageTuning{}
	st.Default()
	s := st.Spec
	checks := []struct {
		name string
		ok   bool
	}{
		{"mode", s.Mode == ModeObserve},
		{"candidates", len(s.Schedulers.Candidates) == 4 && s.Schedulers.Candidates[0] == SchedulerNone},
		{"default", s.Schedulers.Default == SchedulerMQDeadline},
		{"readAhead", *s.ReadAhead.Enabled && *s.ReadAhead.MinKiB == 16 && *s.ReadAhead.MaxKiB == 4096},
		{"cache", !s.Cache.Enabled && s.Cache.MemoryBudget.Cmp(resource.MustParse("64Mi")) == 0},
		{"window", s.Evaluation.Window.Duration == 5*time.Second},
		{"margin", *s.Evaluation.MarginPercent == 5},
		{"thrashGuard", *s.Evaluation.ThrashGuard.Changes == 5 && *s.Evaluation.ThrashGuard.QuietChecks == 7},
		{"cpu", *s.Evaluation.CPUBudgetPercent == 10},
		{"maxUnavailable", *s.Rollout.MaxUnavailable == intstr.FromInt32(1)},
		{"minDwell", s.Rollout.MinDwell.Duration == 10*time.Minute},
		{"tolerance", *s.Rollout.ToleratedRegressionPercent == 5},
		{"priority, paused", s.Priority == 0 && !s.Paused},
		{"valid", len(st.Validate()) == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("default %s wrong: %+v", c.name, s)
		}
	}

	// Set values, zeros included, are kept.
	zero, off := int32(0), false
	kept := &StorageTuning{Spec: StorageTuningSpec{
		Mode:       ModeApply,
		Schedulers: SchedulerPolicy{Candidates: []SchedulerName{}},
		Tunables:   []TunableRange{{Scheduler: "bfq", Name: "slice_idle", Max: new(int64)}},
		ReadAhead:  ReadAheadPolicy{Enabled: &off},
		Evaluation: EvaluationPolicy{MarginPercent: &zero},
		Rollout:    RolloutPolicy{ToleratedRegressionPercent: &zero},
	}}
	kept.Default()
	ks := kept.Spec
	if ks.Mode != ModeApply || ks.Schedulers.Candidates == nil || len(ks.Schedulers.Candidates) != 0 ||
		*ks.ReadAhead.Enabled || *ks.Evaluation.MarginPercent != 0 || *ks.Rollout.ToleratedRegressionPercent != 0 ||
		*ks.Tunables[0].Steps != 3 {
		t.Errorf("Default changed set values: %+v", ks)
	}
}

// TestLoadRefusesUnboundedFiles: a file that is not regular or larger than
// MaxConfigBytes is refused at once with a short one-line error naming it
// (a named pipe without a writer would block a read forever; /dev/zero
// never ends).
func TestLoadRefusesUnboundedFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	// A valid document followed by comments past the limit.
	content := "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: x\n" +
		strings.Repeat("# padding\n", MaxConfigBytes/10+1)
	if err := os.WriteFile(big, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	longName := filepath.Join(dir, "long-name.yaml")
	longContent := "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: " + strings.Repeat("a", 100<<20) + "\n"
	if err := os.WriteFile(longName, []byte(longContent), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		is   error
		want string
	}{
		{fifo, ErrNotRegularFile, fifo + ": not a regular file (a named pipe): want a YAML file"},
		{"/dev/zero", ErrNotRegularFile, "/dev/zero: not a regular file (a character device): want a YAML file"},
		{dir, ErrNotRegularFile, dir + ": not a regular file (a directory): want a YAML file"},
		{big, ErrConfigTooLarge, big + ": file too large: " + strconv.Itoa(len(content)) + " bytes, the limit is 1048576 (1 MiB)"},
		{longName, ErrConfigTooLarge, longName + ": file too large: " + strconv.Itoa(len(longContent)) + " bytes, the limit is 1048576 (1 MiB)"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := LoadStorageTuningFile(tc.path)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, tc.is) {
				t.Errorf("%s: error %v, want %v", tc.path, err, tc.is)
				continue
			}
			if err.Error() != tc.want {
				t.Errorf("%s: error\n%q, want\n%q", tc.path, err, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: LoadStorageTuningFile blocked", tc.path)
		}
	}
}

// TestLoadAtLimit: a file of exactly MaxConfigBytes is read.
func TestLoadAtLimit(t *testing.T) {
	head := "apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: x\nspec: {devices: {include: [loop9]}}\n"
	pad := MaxConfigBytes - len(head)
	content := head + strings.Repeat("#", pad-1) + "\n"
	if len(content) != MaxConfigBytes {
		t.Fatalf("content is %d bytes", len(content))
	}
	if _, err := LoadStorageTuningFile(writeFile(t, "limit.yaml", content)); err != nil {
		t.Fatal(err)
	}
}
