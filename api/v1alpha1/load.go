package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/shadowtune/shadowtune/internal/fsutil"
)

// FileError is the error LoadStorageTuningFile returns. Its message is one
// line that starts with the file's path: "FILE:LINE: what" for a YAML syntax
// error, "FILE: what" otherwise, e.g.
//
//	storagetuning.yaml: spec.schedulers.default: Invalid value: "cfq": must be one of the candidates
//
// +kubebuilder:object:generate=false
type FileError struct {
	// Path is the file as given.
	Path string
	// Line is the 1-based line of a YAML syntax error; 0 otherwise.
	Line int
	// Errs holds the field errors of a document that decoded but is not a
	// valid StorageTuning: a wrong apiVersion or kind, or what Validate
	// reports.
	Errs field.ErrorList
	// Err is the cause of any other failure: reading, YAML syntax, unknown
	// or duplicate fields, values of the wrong type.
	Err error
}

// Error returns the one-line message.
func (e *FileError) Error() string {
	var what string
	if len(e.Errs) > 0 {
		what = formatErrors(e.Errs)
	} else if e.Err != nil {
		what = oneLine(e.Err.Error())
	}
	if e.Line > 0 {
		return e.Path + ":" + strconv.Itoa(e.Line) + ": " + what
	}
	return e.Path + ": " + what
}

// Unwrap returns Err (e.g. fs.ErrNotExist for a missing file).
func (e *FileError) Unwrap() error { return e.Err }

// LoadStorageTuningFile reads one StorageTuning from a YAML (or JSON) file,
// as the node agent does on a host without an API server
// (shadowtune run --config FILE). The file must hold exactly one document
// with apiVersion storage.shadowtune.io/v1alpha1 and kind StorageTuning.
// Decoding is strict, as the API server's strict field validation: unknown
// fields, duplicate keys and fields of the wrong type are errors, and field
// names are case-sensitive. The object is then defaulted (Default) and
// validated (Validate). Any error is a *FileError.
//
// The file must be a regular file of at most MaxConfigBytes (1 MiB): a
// named pipe, a device such as /dev/zero, a directory or a larger file is
// refused at once, without reading it, with a FileError that wraps
// ErrNotRegularFile or ErrConfigTooLarge.
func LoadStorageTuningFile(path string) (*StorageTuning, error) {
	data, err := readConfigFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
		}
		return nil, &FileError{Path: path, Err: err}
	}
	st, ferr := decodeStorageTuning(data)
	if ferr != nil {
		ferr.Path = path
		return nil, ferr
	}
	return st, nil
}

// MaxConfigBytes is the largest configuration file LoadStorageTuningFile
// reads, in bytes (1 MiB): a StorageTuning is a few KiB.
const MaxConfigBytes = 1 << 20

// MaxExpandedYAMLBytes is the most a configuration document may hold once
// its YAML aliases are expanded, in bytes (2 MiB, counted as the scalars'
// bytes plus one per node): a document of MaxConfigBytes without aliases
// is within it, and an alias bomb (a short file whose aliases repeat a
// long value thousands of times) is refused before any alias is expanded.
// go-yaml's own check counts alias nodes, not bytes: 9,000 aliases of a
// 100 KB string, in a 127 KB file, took more than 4.3 GB.
const MaxExpandedYAMLBytes = 2 << 20

// Errors of LoadStorageTuningFile (wrapped in a *FileError).
var (
	// ErrNotRegularFile: the path is a named pipe, a device, a socket or a
	// directory.
	ErrNotRegularFile = errors.New("not a regular file")
	// ErrConfigTooLarge: the file holds more than MaxConfigBytes.
	ErrConfigTooLarge = errors.New("file too large")
	// ErrYAMLExpansion: the document's YAML aliases expand it past
	// MaxExpandedYAMLBytes.
	ErrYAMLExpansion = errors.New("YAML aliases expand the document past the limit")
	// ErrEmptySpec: spec is missing, null or empty, which would select
	// every disk of every node.
	ErrEmptySpec = errors.New("empty spec")
)

// readConfigFile reads path, a regular file of at most MaxConfigBytes. It
// opens without blocking (O_NONBLOCK: opening a named pipe for reading
// would otherwise wait for a writer), checks the open file's type and size,
// and reads through an io.LimitReader so that a file growing meanwhile is
// cut off and refused too.
func readConfigFile(path string) ([]byte, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s): want a YAML file", ErrNotRegularFile, fsutil.Kind(fi.Mode()))
	}
	if fi.Size() > MaxConfigBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d (1 MiB)", ErrConfigTooLarge, fi.Size(), MaxConfigBytes)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%w: more than %d bytes (1 MiB), the limit", ErrConfigTooLarge, MaxConfigBytes)
	}
	return data, nil
}

// yamlLine finds "line N: what" in a go-yaml error.
var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

func decodeStorageTuning(data []byte) (*StorageTuning, *FileError) {
	if n := countDocuments(data); n != 1 {
		if n == 0 {
			return nil, &FileError{Err: errors.New("no YAML document: want a StorageTuning")}
		}
		return nil, &FileError{Err: fmt.Errorf("%d YAML documents: want exactly one StorageTuning", n)}
	}
	if ferr := checkExpansion(data); ferr != nil {
		return nil, ferr
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		msg := strings.TrimPrefix(oneLine(err.Error()), "yaml: ")
		msg = strings.TrimPrefix(msg, "unmarshal errors: ")
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &FileError{Line: line, Err: errors.New(m[2])}
		}
		return nil, &FileError{Err: errors.New(msg)}
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || js[0] != '{' {
		return nil, &FileError{Err: errors.New("the document is not a mapping: want a StorageTuning")}
	}

	st := &StorageTuning{}
	strictErrs, decodeErr := kjson.UnmarshalStrict(js, st)
	// A wrong apiVersion or kind explains every other error: report it
	// alone.
	if errs := checkTypeMeta(st.APIVersion, st.Kind); len(errs) > 0 {
		return nil, &FileError{Errs: errs}
	}
	if decodeErr != nil {
		return nil, decodeError(js, decodeErr)
	}
	if len(strictErrs) > 0 {
		// `unknown field "spec.evaluation.windw"`, `duplicate field "mode"`:
		// the API server's words for its strict field validation.
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = e.Error()
		}
		return nil, &FileError{Err: errors.New(strings.Join(msgs, "; "))}
	}
	if emptySpec(js) {
		return nil, &FileError{Err: ErrEmptySpec, Errs: field.ErrorList{field.Required(field.NewPath("spec"),
			"an empty spec would select every disk of every node, the root disk included: say which devices (spec.devices) and nodes (spec.nodeSelector) it governs")}}
	}
	st.Default()
	if errs := st.Validate(); len(errs) > 0 {
		return nil, &FileError{Errs: errs}
	}
	return st, nil
}

// emptySpec reports whether the document (JSON) has no spec, a null one or
// an empty mapping: each would default to a policy of every disk of every
// node.
func emptySpec(js []byte) bool {
	var doc struct {
		Spec json.RawMessage `json:"spec"`
	}
	if json.Unmarshal(js, &doc) != nil {
		return false // the strict decoding reported it
	}
	var spec map[string]json.RawMessage
	switch s := bytes.TrimSpace(doc.Spec); {
	case len(s) == 0, string(s) == "null":
		return true
	case json.Unmarshal(s, &spec) == nil:
		return len(spec) == 0
	}
	return false
}

// checkExpansion refuses a document whose YAML aliases expand it past
// MaxExpandedYAMLBytes, naming the line of its first alias. It parses the
// document into nodes, which keep aliases unexpanded, and adds up each
// node's expanded size once (an anchor's size is reused by every alias of
// it), so a bomb costs no more than its file. A document it cannot parse
// is left to the YAML decoder, which reports the syntax error.
func checkExpansion(data []byte) *FileError {
	var root yamlv3.Node
	if yamlv3.Unmarshal(data, &root) != nil {
		return nil
	}
	memo := map[*yamlv3.Node]int64{}
	if expandedSize(&root, memo) <= MaxExpandedYAMLBytes {
		return nil
	}
	return &FileError{Line: firstAlias(&root), Err: sentinelError{
		msg: fmt.Sprintf("YAML aliases expand the document past %d bytes (2 MiB), the limit", MaxExpandedYAMLBytes),
		is:  ErrYAMLExpansion}}
}

// sentinelError is an error with its own message that errors.Is matches to
// a sentinel.
type sentinelError struct {
	msg string
	is  error
}

func (e sentinelError) Error() string        { return e.msg }
func (e sentinelError) Is(target error) bool { return target == e.is }

// expandedSize is n's size with its aliases expanded: its scalars' bytes
// plus one per node, at most MaxExpandedYAMLBytes+1 (a cap that keeps the
// sum of a nested bomb from overflowing).
func expandedSize(n *yamlv3.Node, memo map[*yamlv3.Node]int64) int64 {
	if n == nil {
		return 0
	}
	if v, ok := memo[n]; ok {
		return v
	}
	memo[n] = MaxExpandedYAMLBytes + 1 // an alias of an ancestor: refused
	var size int64 = 1
	switch n.Kind {
	case yamlv3.AliasNode:
		size = expandedSize(n.Alias, memo)
	case yamlv3.ScalarNode:
		size += int64(len(n.Value))
	default:
		for _, c := range n.Content {
			if size += expandedSize(c, memo); size > MaxExpandedYAMLBytes {
				break
			}
		}
	}
	size = min(size, MaxExpandedYAMLBytes+1)
	memo[n] = size
	return size
}

// firstAlias is the line of the first alias of the document, 0 without
// one.
func firstAlias(n *yamlv3.Node) int {
	if n.Kind == yamlv3.AliasNode {
		return n.Line
	}
	for _, c := range n.Content {
		if l := firstAlias(c); l > 0 {
			return l
		}
	}
	return 0
}

func checkTypeMeta(apiVersion, kind string) field.ErrorList {
	var errs field.ErrorList
	switch apiVersion {
	case APIVersion:
	case "":
		errs = append(errs, field.Required(field.NewPath("apiVersion"), "must be "+APIVersion))
	default:
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), apiVersion, []string{APIVersion}))
	}
	switch kind {
	case KindStorageTuning:
	case "":
		errs = append(errs, field.Required(field.NewPath("kind"), "must be "+KindStorageTuning))
	default:
		errs = append(errs, field.NotSupported(field.NewPath("kind"), kind, []string{KindStorageTuning}))
	}
	return errs
}

// customFields are the fields whose types decode themselves (durations,
// quantities): their errors carry no field path, so decodeError finds the
// culprit by decoding each alone.
var customFields = []struct {
	path []string
	new  func() any
}{
	{[]string{"spec", "devices", "minSizeBytes"}, func() any { return &resource.Quantity{} }},
	{[]string{"spec", "cache", "memoryBudget"}, func() any { return &resource.Quantity{} }},
	{[]string{"spec", "evaluation", "window"}, func() any { return &metav1.Duration{} }},
	{[]string{"spec", "rollout", "maxUnavailable"}, func() any { return &intstr.IntOrString{} }},
	{[]string{"spec", "rollout", "minDwell"}, func() any { return &metav1.Duration{} }},
}

// typeError parses encoding/json's UnmarshalTypeError message.
var typeError = regexp.MustCompile(`^json: cannot unmarshal (\w+)(?: (\S+))? into Go (?:struct field \w+\.(\S+)|value) of type (\S+)$`)

// decodeError turns a decoding error into a *FileError naming the field.
func decodeError(js []byte, err error) *FileError {
	var obj map[string]any
	if kjson.UnmarshalCaseSensitivePreserveInts(js, &obj) == nil {
		for _, f := range customFields {
			v, found, _ := unstructured.NestedFieldNoCopy(obj, f.path...)
			if !found || v == nil {
				continue
			}
			raw, _ := json.Marshal(v)
			if ferr := json.Unmarshal(raw, f.new()); ferr != nil {
				return &FileError{Errs: field.ErrorList{
					field.Invalid(field.NewPath(f.path[0], f.path[1:]...), v, oneLine(ferr.Error()))}}
			}
		}
	}
	if m := typeError.FindStringSubmatch(err.Error()); m != nil && m[3] != "" {
		// The path has no list indices ("spec.tunables.max"); show the
		// value when the path leads to it.
		parts := strings.Split(m[3], ".")
		if v, found, _ := unstructured.NestedFieldNoCopy(obj, parts...); found {
			return &FileError{Errs: field.ErrorList{field.Invalid(fieldPath(m[3]), v, "must be "+goTypeName(m[4]))}}
		}
		return &FileError{Errs: field.ErrorList{field.TypeInvalid(fieldPath(m[3]), field.OmitValueType{},
			"got "+m[1]+", must be "+goTypeName(m[4]))}}
	}
	return &FileError{Err: errors.New(strings.TrimPrefix(oneLine(err.Error()), "json: "))}
}

// fieldPath makes a *field.Path of a dotted path.
func fieldPath(dotted string) *field.Path {
	parts := strings.Split(dotted, ".")
	return field.NewPath(parts[0], parts[1:]...)
}

// goTypeName names a Go type for a YAML author.
func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer"
	case t == "bool":
		return "true or false"
	case t == "string" || strings.HasSuffix(t, "Name") || strings.HasSuffix(t, "Mode"):
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	default:
		return "a mapping (" + t + ")"
	}
}

// countDocuments counts the YAML documents of data that hold anything but
// comments, splitting at "---" lines.
func countDocuments(data []byte) int {
	n, content := 0, false
	for _, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(line, "---") && (len(line) == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r') {
			if content {
				n++
			}
			content = false
			// "--- value" starts a document with content.
			if rest := strings.TrimSpace(line[3:]); rest != "" && !strings.HasPrefix(rest, "#") {
				content = true
			}
			continue
		}
		if t == "" || strings.HasPrefix(t, "#") || t == "..." || strings.HasPrefix(line, "%") {
			continue
		}
		content = true
	}
	if content {
		n++
	}
	return n
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return strings.Join(fields, " ")
}
