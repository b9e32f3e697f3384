package actuate

// The record files of dm-caches (cachemode.go, attached.go): one JSON file
// per record in a subdirectory of the state directory, read strictly and
// written durably like the device records.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/shadowtune/shadowtune/internal/statefs"
)

// loadRecordDir calls read for each DIR/SUB/NAME.json (dot files, the
// temporary files of writeFileAtomic, skipped) with its path relative to
// the state directory dir, and returns the errors, by "SUB/NAME" (or "SUB"
// when the directory cannot be read, a symbolic link among others; a
// missing one is no error).
func loadRecordDir(dir, sub string, read func(rel, name string) error) map[string]error {
	bad := map[string]error{}
	ents, err := statefs.ReadDir(dir, sub)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			bad[sub] = fmt.Errorf("actuate: %s: %w: %w", filepath.Join(dir, sub), ErrCorruptState, err)
		}
		return bad
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), stateSuffix)
		if !ok || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if err := read(sub+"/"+e.Name(), name); err != nil {
			bad[sub+"/"+name] = err
		}
	}
	return bad
}

// decodeRecord reads rel of the state directory dir (package statefs:
// never through a symbolic link, a regular file of at most
// maxRecordBytes) into v, refusing unknown fields. what names the record
// in errors (ErrCorruptState).
func decodeRecord(dir, rel, what string, v any) error {
	path := filepath.Join(dir, rel)
	b, err := statefs.ReadFile(dir, rel, maxRecordBytes)
	if err != nil {
		return fmt.Errorf("actuate: %s %s: %w: %w", what, path, ErrCorruptState, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("actuate: %s %s: %w: %w", what, path, ErrCorruptState, err)
	}
	return nil
}

// writeRecord writes v as indented JSON to rel of the state directory
// dir, durably (writeFileAtomic: create fails if the file exists),
// creating its directory. what names the record in errors.
func writeRecord(dir, rel, what string, v any, create bool) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("actuate: encode %s: %w", what, err)
	}
	return writeFileAtomic(dir, rel, append(b, '\n'), create)
}
