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
	"os"
	"path/filepath"
	"strings"
)

// loadRecordDir calls read for each DIR/SUB/NAME.json (dot files, the
// temporary files of writeFileAtomic, skipped) and returns the errors, by
// "SUB/NAME" (or "SUB" when the directory cannot be read; a missing one is
// no error).
func loadRecordDir(dir, sub string, read func(path, name string) error) map[string]error {
	bad := map[string]error{}
	ents, err := os.ReadDir(filepath.Join(dir, sub))
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
		if err := read(filepath.Join(dir, sub, e.Name()), name); err != nil {
			bad[sub+"/"+name] = err
		}
	}
	return bad
}

// decodeRecord reads path, not following a symlink, into v, refusing
// unknown fields. what names the record in errors (ErrCorruptState).
func decodeRecord(path, what string, v any) error {
	b, err := readFileNoFollow(path)
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

// writeRecord writes v as indented JSON to path in DIR/SUB, durably
// (writeFileAtomic: create fails if the file exists), creating DIR/SUB.
// what names the record in errors.
func writeRecord(dir, sub, path, what string, v any, create bool) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("actuate: encode %s: %w", what, err)
	}
	d := filepath.Join(dir, sub)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return fmt.Errorf("actuate: %s directory: %w", what, err)
	}
	return writeFileAtomic(d, path, append(b, '\n'), create)
}
