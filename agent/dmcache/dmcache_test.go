package dmcache

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseTable(t *testing.T) {
	tests := []struct {
		file string
		want Table
	}{
		{"table-writethrough-smq.txt", Table{0, 262144, "253:0", "253:1", "254:16", 128, []string{"writethrough"}, Writethrough, "smq", []string{}}},
		{"table-passthrough.txt", Table{0, 262144, "253:0", "253:1", "254:16", 128, []string{"passthrough"}, Passthrough, "smq", []string{}}},
		{"table-writeback.txt", Table{0, 262144, "253:0", "253:1", "254:16", 128, []string{}, Writeback, "smq", []string{}}},
		{"table-cleaner.txt", Table{0, 262144, "253:0", "253:1", "254:16", 128, []string{"writethrough"}, Writethrough, "cleaner", []string{}}},
		{"table-metadata2.txt", Table{0, 262144, "253:0", "253:1", "254:16", 128, []string{"metadata2", "writethrough", "no_discard_passdown"}, Writethrough, "smq", []string{"migration_threshold", "4096"}}},
		{"table-lvm.txt", Table{0, 196608, "253:3", "253:2", "253:4", 128, []string{"metadata2", "writethrough"}, Writethrough, "mq", []string{}}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			line := fixture(t, tc.file)
			got, err := ParseTable(line)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseTable:\n got %+v\nwant %+v", got, tc.want)
			}
			// String gives back the kernel's line.
			if s := got.String(); s != strings.TrimSpace(line) {
				t.Errorf("String() = %q, want %q", s, strings.TrimSpace(line))
			}
		})
	}
}

func TestParseTableMalformed(t *testing.T) {
	tests := []struct{ line, want string }{
		{"", "target is not cache"},
		{"0 1000 linear 254:16 0", "target is not cache"},
		{"0 262144 cache 253:0 253:1 254:16 128 1 writethrough", "fields, want at least 10"},
		{"x 262144 cache 253:0 253:1 254:16 128 1 writethrough smq 0", "not sector counts"},
		{"0 0 cache 253:0 253:1 254:16 128 1 writethrough smq 0", "not sector counts"},
		{"0 262144 cache 253:0 253:1 254:16 0 1 writethrough smq 0", `block size "0"`},
		{"0 262144 cache 253:0 253:1 254:16 128 5 writethrough smq 0", `feature argument count "5"`},
		{"0 262144 cache 253:0 253:1 254:16 128 -1 writethrough smq 0", `feature argument count "-1"`},
		{"0 262144 cache 253:0 253:1 254:16 128 2 writethrough passthrough smq 0", "two mode features"},
		{"0 262144 cache 253:0 253:1 254:16 128 1 writethrough smq 2 migration_threshold", `policy argument count "2"`},
		{"0 262144 cache 253:0 253:1 254:16 128 1 writethrough smq 0 junk", "1 extra fields"},
		{"0 262144 cache 253:0 253:1 254:16 128 1 writethrough smq x y", `policy argument count "x"`},
	}
	for _, tc := range tests {
		_, err := ParseTable(tc.line)
		if err == nil || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTable(%q) = %v, want an ErrSyntax error with %q", tc.line, err, tc.want)
		}
	}
}

func TestWithMode(t *testing.T) {
	tests := []struct {
		file string
		mode Mode
		want string
	}{
		{"table-writethrough-smq.txt", Passthrough, "0 262144 cache 253:0 253:1 254:16 128 1 passthrough smq 0"},
		{"table-passthrough.txt", Writethrough, "0 262144 cache 253:0 253:1 254:16 128 1 writethrough smq 0"},
		{"table-writeback.txt", Writethrough, "0 262144 cache 253:0 253:1 254:16 128 1 writethrough smq 0"},
		{"table-writethrough-smq.txt", Writeback, "0 262144 cache 253:0 253:1 254:16 128 1 writeback smq 0"},
		{"table-metadata2.txt", Passthrough, "0 262144 cache 253:0 253:1 254:16 128 3 metadata2 passthrough no_discard_passdown smq 2 migration_threshold 4096"},
		{"table-lvm.txt", Passthrough, "0 196608 cache 253:3 253:2 253:4 128 2 metadata2 passthrough mq 0"},
		{"table-cleaner.txt", Writethrough, "0 262144 cache 253:0 253:1 254:16 128 1 writethrough cleaner 0"},
	}
	for _, tc := range tests {
		orig, err := ParseTable(fixture(t, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		before := orig.String()
		got := orig.WithMode(tc.mode)
		if got.String() != tc.want || got.Mode != tc.mode {
			t.Errorf("%s WithMode(%s) = %q (mode %s), want %q", tc.file, tc.mode, got.String(), got.Mode, tc.want)
		}
		if orig.String() != before {
			t.Errorf("%s: WithMode changed the original to %q", tc.file, orig.String())
		}
		// The line parses back to the same table.
		back, err := ParseTable(got.String())
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("%s: ParseTable(WithMode) = %+v, %v; want %+v", tc.file, back, err, got)
		}
	}
}

func TestParseStatus(t *testing.T) {
	mig := func(v string) []string { return []string{"migration_threshold", v} }
	mqArgs := []string{"random_threshold", "0", "sequential_threshold", "0", "discard_promote_adjustment", "0", "read_promote_adjustment", "0", "write_promote_adjustment", "0"}
	tests := []struct {
		file string
		want Status
	}{
		{"status-writethrough-smq.txt", Status{Length: 262144, MetadataBlockSectors: 8, MetadataUsed: 8, MetadataTotal: 1024, BlockSectors: 128, TotalBlocks: 960, ReadMisses: 400,
			Features: []string{"writethrough"}, Mode: Writethrough, CoreArgs: mig("2048"), Policy: "smq", PolicyArgs: []string{}}},
		{"status-passthrough.txt", Status{Length: 262144, MetadataBlockSectors: 8, MetadataUsed: 11, MetadataTotal: 1024, BlockSectors: 128, TotalBlocks: 960, ReadMisses: 400,
			Features: []string{"passthrough"}, Mode: Passthrough, CoreArgs: mig("2048"), Policy: "smq", PolicyArgs: []string{}}},
		{"status-writeback-dirty.txt", Status{Length: 262144, MetadataBlockSectors: 8, MetadataUsed: 11, MetadataTotal: 1024, BlockSectors: 128, UsedBlocks: 100, TotalBlocks: 960,
			ReadMisses: 400, WriteHits: 100, Promotions: 100, Dirty: 100, Features: []string{"writeback"}, Mode: Writeback, CoreArgs: mig("2048"), Policy: "smq", PolicyArgs: []string{}}},
		{"status-cleaner.txt", Status{Length: 262144, MetadataBlockSectors: 8, MetadataUsed: 11, MetadataTotal: 1024, BlockSectors: 128, UsedBlocks: 100, TotalBlocks: 960,
			ReadMisses: 400, WriteHits: 100, Features: []string{"writethrough"}, Mode: Writethrough, CoreArgs: mig("2048"), Policy: "cleaner", PolicyArgs: []string{}}},
		{"status-metadata2.txt", Status{Length: 262144, MetadataBlockSectors: 8, MetadataUsed: 10, MetadataTotal: 1024, BlockSectors: 128, TotalBlocks: 960,
			Features: []string{"metadata2", "writethrough", "no_discard_passdown"}, Mode: Writethrough, CoreArgs: mig("4096"), Policy: "smq", PolicyArgs: []string{}}},
		{"status-lvm.txt", Status{Length: 196608, MetadataBlockSectors: 8, MetadataUsed: 9, MetadataTotal: 2048, BlockSectors: 128, TotalBlocks: 384,
			Features: []string{"metadata2", "writethrough"}, Mode: Writethrough, CoreArgs: mig("2048"), Policy: "mq", PolicyArgs: mqArgs}},
		// Not captured: the kernel's other endings (cache_status in
		// drivers/md/dm-cache-target.c).
		{"", Status{Length: 8, Failed: "Fail"}},
		{"ro", Status{Length: 262144, MetadataBlockSectors: 8, MetadataUsed: 8, MetadataTotal: 1024, BlockSectors: 128, TotalBlocks: 960,
			Features: []string{"writethrough"}, Mode: Writethrough, CoreArgs: mig("2048"), Policy: "smq", PolicyArgs: []string{}, ReadOnly: true, NeedsCheck: true}},
	}
	for _, tc := range tests {
		line := "0 8 cache Fail"
		switch tc.file {
		case "":
		case "ro":
			line = "0 262144 cache 8 8/1024 128 0/960 0 0 0 0 0 0 0 1 writethrough 2 migration_threshold 2048 smq 0 ro needs_check"
		default:
			line = fixture(t, tc.file)
		}
		got, err := ParseStatus(line)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ParseStatus:\n got %+v\nwant %+v", tc.file, got, tc.want)
		}
	}
}

func TestParseStatusMalformed(t *testing.T) {
	ok := "0 262144 cache 8 8/1024 128 0/960 0 400 0 0 0 0 0 1 writethrough 2 migration_threshold 2048 smq 0 rw -"
	tests := []struct{ line, want string }{
		{"", "target is not cache"},
		{"0 262144 linear", "target is not cache"},
		{"0 262144 cache Error x", "fields, want at least 20"},
		{"0 262144 cache 8 8/1024 128 0/960 0 400", "fields, want at least 20"},
		{strings.Replace(ok, "8/1024", "8-1024", 1), `"8-1024" is not used/total`},
		{strings.Replace(ok, " 400 ", " -4 ", 1), `"-4" is not a count`},
		{strings.Replace(ok, "1 writethrough 2", "9 writethrough 2", 1), `feature argument count "9"`},
		{strings.Replace(ok, "2 migration_threshold", "7 migration_threshold", 1), `core argument count "7"`},
		{strings.Replace(ok, "rw -", "rw", 1), "want metadata mode and needs_check"},
		{strings.Replace(ok, "rw -", "rx -", 1), `metadata mode "rx"`},
		{strings.Replace(ok, "rw -", "rw needs-check", 1), `"needs-check", want - or needs_check`},
		{ok + " extra", "got 3 fields"},
	}
	for _, tc := range tests {
		_, err := ParseStatus(tc.line)
		if err == nil || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseStatus(%q) = %v, want an ErrSyntax error with %q", tc.line, err, tc.want)
		}
	}
	if _, err := ParseStatus(ok); err != nil {
		t.Errorf("ParseStatus(%q): %v", ok, err)
	}
}
