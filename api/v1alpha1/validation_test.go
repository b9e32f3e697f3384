package v1alpha1

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// doc returns a StorageTuning document with the given spec body, indented
// under spec:.
func doc(spec string) string {
	var b strings.Builder
	b.WriteString("apiVersion: storage.shadowtune.io/v1alpha1\nkind: StorageTuning\nmetadata:\n  name: t\nspec:")
	spec = strings.Trim(spec, "\n")
	if spec == "" {
		b.WriteString(" {}\n")
		return b.String()
	}
	b.WriteString("\n")
	for _, line := range strings.Split(spec, "\n") {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

// globs returns a YAML flow list of n distinct globs.
func globs(n int) string {
	g := make([]string, n)
	for i := range g {
		g[i] = fmt.Sprintf("sd%d*", i)
	}
	return "[" + strings.Join(g, ", ") + "]"
}

// volumes returns a YAML flow list of n distinct VG/LV names.
func volumes(n int) string {
	v := make([]string, n)
	for i := range v {
		v[i] = fmt.Sprintf("vg/lv%d", i)
	}
	return "[" + strings.Join(v, ", ") + "]"
}

// bfqRanges returns n tunables entries for bfq.
func bfqRanges(n int) string {
	names := KnownTunables(SchedulerBFQ)
	var b strings.Builder
	b.WriteString("tunables:\n")
	for _, name := range names[:n] {
		fmt.Fprintf(&b, "- {scheduler: bfq, name: %s, min: 0, max: 1}\n", name)
	}
	return b.String()
}

type invalidCase struct {
	name string
	spec string
	// Go's error must name path (when set) and contain detail.
	path, detail string
	// crdPath is the path the API server reports, when it differs from
	// path: a prefix of it for rules on a parent (default path).
	crdPath string
	// goOnly: the API server cannot check this (label syntax, names).
	goOnly bool
}

var invalidCases = []invalidCase{
	// Issue 44, F9: spec: {} would select every disk of every node. The
	// API server cannot tell it from a spec that sets only defaults (its
	// nested defaults fill it before validation); a missing or null spec
	// it refuses (missingSpecDocs).
	{name: "empty spec", spec: "", path: "spec", detail: "Required value: an empty spec would select every disk", goOnly: true},
	{name: "unknown mode", spec: "mode: Auto", path: "spec.mode", detail: `Unsupported value: "Auto"`},

	{name: "bad selector label key", spec: "nodeSelector: {matchLabels: {'bad key!': x}}",
		path: "spec.nodeSelector.matchLabels", detail: "Invalid value", goOnly: true},
	{name: "bad selector operator", spec: "nodeSelector: {matchExpressions: [{key: a, operator: Like, values: [x]}]}",
		path: "spec.nodeSelector.matchExpressions[0].operator", detail: "not a valid selector operator", crdPath: "spec.nodeSelector.matchExpressions"},
	{name: "selector In without values", spec: "nodeSelector: {matchExpressions: [{key: a, operator: In}]}",
		path: "spec.nodeSelector.matchExpressions[0].values", detail: "must be specified when `operator` is 'In' or 'NotIn'", crdPath: "spec.nodeSelector.matchExpressions"},
	{name: "selector Exists with values", spec: "nodeSelector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}",
		path: "spec.nodeSelector.matchExpressions[0].values", detail: "may not be specified when `operator` is 'Exists' or 'DoesNotExist'", crdPath: "spec.nodeSelector.matchExpressions"},

	{name: "empty glob", spec: `devices: {include: [""]}`, path: "spec.devices.include[0]", detail: "Required value"},
	{name: "unclosed class", spec: `devices: {include: ["sd[a"]}`, path: "spec.devices.include[0]", detail: "must be a path.Match glob"},
	{name: "empty class", spec: `devices: {include: ["sd[]"]}`, path: "spec.devices.include[0]", detail: "must be a path.Match glob"},
	{name: "open range", spec: `devices: {exclude: ["sd[a-]"]}`, path: "spec.devices.exclude[0]", detail: "must be a path.Match glob"},
	{name: "leading dash in class", spec: `devices: {exclude: ["sd[-a]"]}`, path: "spec.devices.exclude[0]", detail: "must be a path.Match glob"},
	{name: "dev path", spec: `devices: {include: ["/dev/sda"]}`, path: "spec.devices.include[0]", detail: "must be a path.Match glob"},
	{name: "escape", spec: `devices: {include: ["sd\\*"]}`, path: "spec.devices.include[0]", detail: "must be a path.Match glob"},
	{name: "glob too long", spec: `devices: {include: ["` + strings.Repeat("a", 65) + `"]}`, path: "spec.devices.include[0]", detail: "Too long"},
	{name: "duplicate glob", spec: `devices: {exclude: ["sd*", "sd*"]}`, path: "spec.devices.exclude[1]", detail: "Duplicate value"},
	{name: "too many globs", spec: "devices: {include: " + globs(33) + "}", path: "spec.devices.include", detail: "Too many"},
	{name: "negative min size", spec: "devices: {minSizeBytes: -1}", path: "spec.devices.minSizeBytes", detail: "must not be negative"},
	{name: "negative min size quantity", spec: "devices: {minSizeBytes: -1Gi}", path: "spec.devices.minSizeBytes", detail: "must not be negative"},

	{name: "empty candidates", spec: "schedulers: {candidates: []}", path: "spec.schedulers.candidates", detail: "Required value"},
	{name: "unknown candidate", spec: "schedulers: {candidates: [cfq]}", path: "spec.schedulers.candidates[0]", detail: `Unsupported value: "cfq"`},
	{name: "duplicate candidate", spec: "schedulers: {candidates: [bfq, bfq], default: bfq}", path: "spec.schedulers.candidates[1]", detail: "Duplicate value"},
	{name: "unknown default", spec: "schedulers: {default: cfq}", path: "spec.schedulers.default", detail: `Invalid value: "cfq": must be one of the candidates`},
	{name: "default not a candidate", spec: "schedulers: {candidates: [bfq, kyber]}", path: "spec.schedulers.default",
		detail: `Invalid value: "mq-deadline": must be one of the candidates`},
	{name: "none not a candidate", spec: "schedulers: {candidates: [bfq], default: none}", path: "spec.schedulers.default", detail: "must be one of the candidates"},

	{name: "tunable of none", spec: "tunables: [{scheduler: none, name: x, max: 1}]", path: "spec.tunables[0].scheduler", detail: `Unsupported value: "none"`},
	{name: "tunable of unknown scheduler", spec: "tunables: [{scheduler: cfq, name: slice_idle, max: 1}]", path: "spec.tunables[0].scheduler", detail: "Unsupported value"},
	{name: "mq-deadline tunable on bfq", spec: "tunables: [{scheduler: bfq, name: read_expire, max: 1}]", path: "spec.tunables[0].name", detail: `Unsupported value: "read_expire"`},
	{name: "bfq tunable on kyber", spec: "tunables: [{scheduler: kyber, name: slice_idle, max: 1}]", path: "spec.tunables[0].name", detail: "Unsupported value"},
	{name: "unknown tunable", spec: "tunables: [{scheduler: mq-deadline, name: async_depth, max: 1}]", path: "spec.tunables[0].name", detail: "Unsupported value"},
	{name: "empty tunable name", spec: `tunables: [{scheduler: mq-deadline, name: "", max: 1}]`, path: "spec.tunables[0].name", detail: "Required value"},
	{name: "min above max", spec: "tunables: [{scheduler: bfq, name: slice_idle, min: 10, max: 5}]", path: "spec.tunables[0].max", detail: "must be greater than or equal to min"},
	{name: "max missing", spec: "tunables: [{scheduler: bfq, name: slice_idle}]", path: "spec.tunables[0].max", detail: "Required value"},
	{name: "negative min", spec: "tunables: [{scheduler: bfq, name: slice_idle, min: -1, max: 5}]", path: "spec.tunables[0].min", detail: "greater than or equal to 0"},
	{name: "boolean tunable above 1", spec: "tunables: [{scheduler: mq-deadline, name: front_merges, max: 2}]", path: "spec.tunables[0].max", detail: "max must be at most 1"},
	{name: "one step", spec: "tunables: [{scheduler: bfq, name: slice_idle, max: 8, steps: 1}]", path: "spec.tunables[0].steps", detail: "must be between 2 and 4"},
	{name: "five steps", spec: "tunables: [{scheduler: bfq, name: slice_idle, max: 8, steps: 5}]", path: "spec.tunables[0].steps", detail: "must be between 2 and 4"},
	{name: "duplicate range", spec: "tunables: [{scheduler: bfq, name: slice_idle, max: 8}, {scheduler: bfq, name: slice_idle, max: 4}]",
		path: "spec.tunables[1]", detail: "Duplicate value"},
	{name: "five ranges for one scheduler", spec: bfqRanges(5), path: "spec.tunables", detail: "at most 4 tunable ranges per scheduler"},
	{name: "range for a scheduler not a candidate", spec: "schedulers: {candidates: [none, mq-deadline]}\ntunables: [{scheduler: bfq, name: slice_idle, max: 8}]",
		path: "spec.tunables[0].scheduler", detail: "must be one of spec.schedulers.candidates", crdPath: "spec.tunables"},

	{name: "read-ahead below 4", spec: "readAhead: {minKiB: 0}", path: "spec.readAhead.minKiB", detail: "must be a multiple of 4 between 4 and 65536"},
	{name: "read-ahead above 65536", spec: "readAhead: {maxKiB: 65540}", path: "spec.readAhead.maxKiB", detail: "must be a multiple of 4 between 4 and 65536"},
	{name: "read-ahead not a multiple of 4", spec: "readAhead: {minKiB: 18}", path: "spec.readAhead.minKiB", detail: "must be a multiple of 4"},
	{name: "read-ahead min above max", spec: "readAhead: {minKiB: 1024, maxKiB: 512}", path: "spec.readAhead.maxKiB", detail: "maxKiB must be greater than or equal to minKiB"},
	{name: "read-ahead min above default max", spec: "readAhead: {minKiB: 8192}", path: "spec.readAhead.maxKiB", detail: "maxKiB must be greater than or equal to minKiB"},

	{name: "zero cache", spec: "cache: {memoryBudget: 0}", path: "spec.cache.memoryBudget", detail: "must be between 1Mi and 64Gi"},
	{name: "small cache", spec: "cache: {memoryBudget: 512Ki}", path: "spec.cache.memoryBudget", detail: "must be between 1Mi and 64Gi"},
	{name: "huge cache", spec: "cache: {memoryBudget: 128Gi}", path: "spec.cache.memoryBudget", detail: "must be between 1Mi and 64Gi"},
	{name: "provision without enabled", spec: "cache: {provision: {logicalVolumes: [vg0/data]}}", path: "spec.cache.provision", detail: "provision needs enabled: true"},
	{name: "provision without volumes", spec: "cache: {enabled: true, provision: {fastDevice: ram}}", path: "spec.cache.provision.logicalVolumes", detail: "Required value"},
	{name: "provision empty volumes", spec: "cache: {enabled: true, provision: {logicalVolumes: []}}", path: "spec.cache.provision.logicalVolumes", detail: "Required value",
		crdPath: "spec.cache.provision.logicalVolumes"},
	{name: "provision too many volumes", spec: "cache: {enabled: true, provision: {logicalVolumes: " + volumes(17) + "}}", path: "spec.cache.provision.logicalVolumes", detail: "Too many"},
	{name: "provision volume without VG", spec: "cache: {enabled: true, provision: {logicalVolumes: [data]}}", path: "spec.cache.provision.logicalVolumes[0]", detail: "must be VG/LV"},
	{name: "provision volume with a dev path", spec: "cache: {enabled: true, provision: {logicalVolumes: [/dev/vg0/data]}}", path: "spec.cache.provision.logicalVolumes[0]", detail: "must be VG/LV"},
	{name: "provision volume starting with a hyphen", spec: "cache: {enabled: true, provision: {logicalVolumes: [vg0/-data]}}", path: "spec.cache.provision.logicalVolumes[0]", detail: "must be VG/LV"},
	{name: "provision volume dot", spec: "cache: {enabled: true, provision: {logicalVolumes: [vg0/..]}}", path: "spec.cache.provision.logicalVolumes[0]", detail: "must be VG/LV"},
	{name: "provision volume name too long", spec: "cache: {enabled: true, provision: {logicalVolumes: [vg0/" + strings.Repeat("a", 128) + "]}}", path: "spec.cache.provision.logicalVolumes[0]", detail: "must be VG/LV"},
	{name: "provision duplicate volume", spec: "cache: {enabled: true, provision: {logicalVolumes: [vg0/a, vg0/a]}}", path: "spec.cache.provision.logicalVolumes[1]", detail: "Duplicate value"},
	{name: "provision relative device", spec: "cache: {enabled: true, provision: {logicalVolumes: [vg0/a], fastDevice: sdb}}", path: "spec.cache.provision.fastDevice", detail: `must be "ram" or an absolute path under /dev`},
	{name: "provision device outside /dev", spec: "cache: {enabled: true, provision: {logicalVolumes: [vg0/a], fastDevice: /tmp/x}}", path: "spec.cache.provision.fastDevice", detail: `must be "ram" or an absolute path`},
	{name: "provision device with ..", spec: "cache: {enabled: true, provision: {logicalVolumes: [vg0/a], fastDevice: /dev/../etc/x}}", path: "spec.cache.provision.fastDevice", detail: `must be "ram" or an absolute path`},
	{name: "provision device path too long", spec: "cache: {enabled: true, provision: {logicalVolumes: [vg0/a], fastDevice: /dev/" + strings.Repeat("a", 124) + "}}", path: "spec.cache.provision.fastDevice", detail: "Too long"},
	{name: "provision device for two volumes", spec: "cache: {enabled: true, provision: {logicalVolumes: [vg0/a, vg0/b], fastDevice: /dev/nvme0n1}}", path: "spec.cache.provision.logicalVolumes", detail: "a fastDevice path caches one logical volume"},

	{name: "short window", spec: "evaluation: {window: 500ms}", path: "spec.evaluation.window", detail: "must be between 1s and 5m"},
	{name: "long window", spec: "evaluation: {window: 5m1s}", path: "spec.evaluation.window", detail: "must be between 1s and 5m"},
	{name: "negative window", spec: "evaluation: {window: -5s}", path: "spec.evaluation.window", detail: "must be between 1s and 5m"},
	{name: "window not a duration", spec: "evaluation: {window: five}", path: "spec.evaluation.window", detail: `Invalid value: "five": time: invalid duration "five"`},
	{name: "size not a quantity", spec: "devices: {minSizeBytes: 1GB}", path: "spec.devices.minSizeBytes", detail: `Invalid value: "1GB": quantities must match`},
	{name: "negative margin", spec: "evaluation: {marginPercent: -1}", path: "spec.evaluation.marginPercent", detail: "must be between 0 and 50"},
	{name: "margin above 50", spec: "evaluation: {marginPercent: 51}", path: "spec.evaluation.marginPercent", detail: "must be between 0 and 50"},
	{name: "fractional margin", spec: "evaluation: {marginPercent: 2.5}", path: "spec.evaluation.marginPercent", detail: "Invalid value: 2.5: must be an integer"},
	{name: "margin as string", spec: `evaluation: {marginPercent: "5"}`, path: "spec.evaluation.marginPercent", detail: `Invalid value: "5": must be an integer`},
	{name: "max as string in a list", spec: `tunables: [{scheduler: bfq, name: slice_idle, max: "8"}]`, path: "spec.tunables.max", detail: "got string, must be an integer",
		crdPath: "spec.tunables[0].max"},
	{name: "mode as list", spec: "mode: [Apply]", path: "spec.mode", detail: `Invalid value: ["Apply"]: must be a string`},
	{name: "zero guard changes", spec: "evaluation: {thrashGuard: {changes: 0}}", path: "spec.evaluation.thrashGuard.changes", detail: "must be between 1 and 100"},
	{name: "too many guard changes", spec: "evaluation: {thrashGuard: {changes: 101}}", path: "spec.evaluation.thrashGuard.changes", detail: "must be between 1 and 100"},
	{name: "zero quiet checks", spec: "evaluation: {thrashGuard: {quietChecks: 0}}", path: "spec.evaluation.thrashGuard.quietChecks", detail: "must be between 1 and 1000"},
	{name: "zero CPU budget", spec: "evaluation: {cpuBudgetPercent: 0}", path: "spec.evaluation.cpuBudgetPercent", detail: "must be between 1 and 100"},
	{name: "CPU budget above 100", spec: "evaluation: {cpuBudgetPercent: 101}", path: "spec.evaluation.cpuBudgetPercent", detail: "must be between 1 and 100"},

	{name: "zero maxUnavailable", spec: "rollout: {maxUnavailable: 0}", path: "spec.rollout.maxUnavailable", detail: "must be a count of at least 1 or a percentage"},
	{name: "negative maxUnavailable", spec: "rollout: {maxUnavailable: -2}", path: "spec.rollout.maxUnavailable", detail: "must be a count of at least 1"},
	{name: "zero percent", spec: `rollout: {maxUnavailable: "0%"}`, path: "spec.rollout.maxUnavailable", detail: "percentage from 1% to 100%"},
	{name: "101 percent", spec: `rollout: {maxUnavailable: "101%"}`, path: "spec.rollout.maxUnavailable", detail: "percentage from 1% to 100%"},
	{name: "count as string", spec: `rollout: {maxUnavailable: "2"}`, path: "spec.rollout.maxUnavailable", detail: "percentage from 1% to 100%"},
	{name: "long dwell", spec: "rollout: {minDwell: 25h}", path: "spec.rollout.minDwell", detail: "must be between 0s and 24h"},
	{name: "negative dwell", spec: "rollout: {minDwell: -1s}", path: "spec.rollout.minDwell", detail: "must be between 0s and 24h"},
	{name: "tolerance above 100", spec: "rollout: {toleratedRegressionPercent: 101}", path: "spec.rollout.toleratedRegressionPercent", detail: "must be between 0 and 100"},
	{name: "negative tolerance", spec: "rollout: {toleratedRegressionPercent: -1}", path: "spec.rollout.toleratedRegressionPercent", detail: "must be between 0 and 100"},
}

// validSpecs are accepted by Validate and by the API server, with the same
// defaults.
var validSpecs = map[string]string{
	"apply":         "mode: Apply\npaused: true\npriority: -3",
	"one candidate": "schedulers: {candidates: [none], default: none}",
	"selector":      "nodeSelector: {matchLabels: {disktype: hdd}, matchExpressions: [{key: zone, operator: In, values: [a, b]}]}",
	"globs":         `devices: {include: ["sd[a-z]", "nvme[0-9]*n1", "loop[^0-9]*", "dm-*", "md?", "xvd[a-cx-z]", "sd*:0"], exclude: ["*"], rotational: false}`,
	"sizes":         "devices: {minSizeBytes: 0}\ncache: {enabled: true, memoryBudget: 1Mi}",
	"sizes 2":       `devices: {minSizeBytes: "100Gi"}` + "\ncache: {memoryBudget: 64Gi}",
	"sizes 3":       "devices: {minSizeBytes: 1000000}\ncache: {memoryBudget: 1048576}",
	"provision ram": "mode: Apply\ncache: {enabled: true, provision: {logicalVolumes: [vg0/data, \"my_vg.1/lv+2-x\"]}}",
	"provision max": "cache: {enabled: true, provision: {fastDevice: ram, logicalVolumes: " + volumes(16) + "}}",
	"provision dev": "mode: Apply\ncache: {enabled: true, memoryBudget: 1Gi, provision: {logicalVolumes: [vg0/data], fastDevice: /dev/disk/by-id/nvme-X_1.2}}",
	"tunables": `schedulers: {candidates: [mq-deadline, bfq, kyber], default: bfq}
tunables:
- {scheduler: mq-deadline, name: front_merges, min: 0, max: 1}
- {scheduler: mq-deadline, name: read_expire, min: 100, max: 500, steps: 4}
- {scheduler: mq-deadline, name: write_expire, min: 5000, max: 5000}
- {scheduler: mq-deadline, name: writes_starved, max: 4, steps: 2}
- {scheduler: bfq, name: low_latency, max: 1}
- {scheduler: bfq, name: strict_guarantees, min: 1, max: 1}
- {scheduler: bfq, name: slice_idle_us, max: 8000}
- {scheduler: bfq, name: max_budget, max: 0}
- {scheduler: kyber, name: read_lat_nsec, min: 1000000, max: 4000000}
- {scheduler: kyber, name: write_lat_nsec, min: 1000000, max: 9223372036854775807}`,
	"bounds low":  "readAhead: {enabled: false, minKiB: 4, maxKiB: 4}\nevaluation: {window: 1s, marginPercent: 0, thrashGuard: {changes: 1, quietChecks: 1}, cpuBudgetPercent: 1}\nrollout: {maxUnavailable: 1, minDwell: 0s, toleratedRegressionPercent: 0}",
	"bounds high": `readAhead: {minKiB: 65536, maxKiB: 65536}` + "\nevaluation: {window: 5m, marginPercent: 50, thrashGuard: {changes: 100, quietChecks: 1000}, cpuBudgetPercent: 100}\nrollout: {maxUnavailable: \"100%\", minDwell: 24h, toleratedRegressionPercent: 100}",
	"durations":   `evaluation: {window: 1m30s}` + "\nrollout: {maxUnavailable: \"5%\", minDwell: 1h30m}",
	"null fields": "devices: null\nschedulers: {candidates: null}\nrollout: {maxUnavailable: null}",
}

// goVerdict decodes, defaults and validates doc as LoadStorageTuningFile
// does.
func goVerdict(doc string) (*StorageTuning, error) {
	st, ferr := decodeStorageTuning([]byte(doc))
	if ferr != nil {
		ferr.Path = "f.yaml"
		return nil, ferr
	}
	return st, nil
}

// TestValidateRejects checks every rule against both Validate (through the
// file loader) and the generated CRD run as the API server runs it.
func TestValidateRejects(t *testing.T) {
	srv := newCRDServer(t, storageTuningCRDFile)
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			d := doc(tc.spec)
			_, err := goVerdict(d)
			if err == nil {
				t.Fatalf("Go accepted\n%s", d)
			}
			got := err.Error()
			if tc.path != "" && !strings.Contains(got, ": "+tc.path+": ") {
				t.Errorf("Go error\n  %s\nnot at %s", got, tc.path)
			}
			if !strings.Contains(got, tc.detail) {
				t.Errorf("Go error\n  %s\nwant it to contain\n  %s", got, tc.detail)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Go error is not one line: %q", err)
			}

			errs := srv.create(yamlObject(t, d))
			if tc.goOnly {
				if len(errs) > 0 {
					t.Errorf("API server now rejects this too (drop goOnly): %v", errs)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("API server accepted\n%s", d)
			}
			crdPath := tc.crdPath
			if crdPath == "" {
				crdPath = tc.path
			}
			t.Logf("Go:  %v", err)
			t.Logf("API: %v", errs)
			if !hasPath(errs, crdPath) {
				t.Errorf("API server errors %v\nnone at %s", errs, crdPath)
			}
		})
	}
}

func hasPath(errs field.ErrorList, p string) bool {
	for _, e := range errs {
		if e.Field == p {
			return true
		}
	}
	return false
}

// TestValidateAccepts checks that valid specs pass both validations and
// that Default and the schema's defaults agree on them.
func TestValidateAccepts(t *testing.T) {
	srv := newCRDServer(t, storageTuningCRDFile)
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "storagetuning-observe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{"example": string(example)}
	for name, spec := range validSpecs {
		docs[name] = doc(spec)
	}
	for name, d := range docs {
		t.Run(name, func(t *testing.T) {
			goObj, err := goVerdict(d)
			if err != nil {
				t.Fatalf("Go rejected: %v\n%s", err, d)
			}
			obj := yamlObject(t, d)
			if errs := srv.create(obj); len(errs) > 0 {
				t.Fatalf("API server rejected: %v\n%s", errs, d)
			}
			crdObj := &StorageTuning{}
			toTyped(t, obj, crdObj)
			if !equality.Semantic.DeepEqual(goObj, crdObj) {
				g, _ := json.Marshal(goObj)
				c, _ := json.Marshal(crdObj)
				t.Errorf("defaults differ\nDefault:    %s\nCRD schema: %s", g, c)
			}
			// A defaulted object is a fixed point of both.
			again := goObj.DeepCopy()
			again.Default()
			if !equality.Semantic.DeepEqual(goObj, again) {
				t.Errorf("Default is not idempotent")
			}
			if errs := goObj.Validate(); len(errs) > 0 {
				t.Errorf("Validate rejects a defaulted valid object: %v", errs)
			}
		})
	}
}

// TestValidateWithoutDefault checks that Validate tolerates unset fields
// (it is documented to skip them) and still checks what is set.
func TestValidateWithoutDefault(t *testing.T) {
	st := &StorageTuning{}
	st.Spec.Mode = ModeObserve
	st.Spec.Schedulers.Candidates = []SchedulerName{SchedulerBFQ}
	st.Spec.Schedulers.Default = SchedulerBFQ
	if errs := st.Validate(); len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	errs := (&StorageTuning{}).Validate()
	for _, p := range []string{"spec.mode", "spec.schedulers.candidates", "spec.schedulers.default"} {
		if !hasPath(errs, p) {
			t.Errorf("zero StorageTuning: no error at %s in %v", p, errs)
		}
	}
	bad := &StorageTuning{}
	bad.Default()
	bad.Name = "Not_A_DNS_Name"
	if errs := bad.Validate(); !hasPath(errs, "metadata.name") {
		t.Errorf("bad name accepted: %v", errs)
	}
}

// TestGlobPatternIsPathMatch checks that every glob the CRD's pattern
// accepts is one path.Match accepts, so the API server and Validate (which
// checks both) agree. The converse does not hold and need not: the pattern
// also rejects '^' and ']' as literals, which device names never contain.
func TestGlobPatternIsPathMatch(t *testing.T) {
	alphabet := []byte("a0_.:-*?[]^")
	accepted := 0
	var walk func(prefix []byte, n int)
	walk = func(prefix []byte, n int) {
		if g := string(prefix); g != "" && globPattern.MatchString(g) {
			accepted++
			if !validGlob(g) {
				t.Errorf("glob %q: the pattern accepts it, path.Match does not", g)
			}
		}
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c), n-1)
		}
	}
	walk(nil, 5)
	for _, g := range []string{"sd*", "nvme*n1", "loop[0-9]*", "sd[^ab]", "xvd[a-cx-z]", "dm-1", "*", "?"} {
		if !globPattern.MatchString(g) || !validGlob(g) {
			t.Errorf("glob %q rejected", g)
		}
	}
	t.Logf("%d globs of up to 5 bytes accepted", accepted)
}
