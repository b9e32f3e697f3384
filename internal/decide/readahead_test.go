package decide

import "testing"

func TestReadAhead(t *testing.T) {
	base := ReadAheadInput{CurrentKiB: 2560, OriginalKiB: 2560, MinKiB: 16, MaxKiB: 4096,
		WasteMeasured: true, ReadAheadSharePct: 80}
	tests := []struct {
		name   string
		edit   func(*ReadAheadInput)
		kib    int
		reason ReadAheadReason
	}{
		{"no evidence keeps even a huge depth", func(in *ReadAheadInput) { in.WasteMeasured, in.WastePct = false, 99 }, 2560, RANoEvidence},
		{"mmap thrash: 99% waste cuts to about the used share", func(in *ReadAheadInput) { in.WastePct = 99 }, 16, RAWaste},
		{"60% waste cuts at least by half", func(in *ReadAheadInput) { in.WastePct = 60 }, 1024, RAWaste},
		{"cut never goes below the minimum", func(in *ReadAheadInput) { in.WastePct = 100 }, 16, RAWaste},
		{"at the minimum a cut keeps", func(in *ReadAheadInput) { in.CurrentKiB, in.WastePct = 16, 100 }, 16, RAKeep},
		{"moderate waste keeps", func(in *ReadAheadInput) { in.CurrentKiB, in.WastePct = 128, 20 }, 128, RAKeep},
		{"no waste after a cut restores the original", func(in *ReadAheadInput) { in.CurrentKiB, in.WastePct = 16, 1 }, 2560, RARestore},
		{"restore stops at MaxKiB", func(in *ReadAheadInput) { in.CurrentKiB, in.MaxKiB, in.WastePct = 16, 1024, 0 }, 1024, RARestore},
		{"above MaxKiB is lowered without evidence", func(in *ReadAheadInput) { in.WasteMeasured, in.MaxKiB = false, 1024 }, 1024, RABounds},
		{"below MinKiB is raised even with waste", func(in *ReadAheadInput) { in.CurrentKiB, in.MinKiB, in.WastePct = 16, 128, 99 }, 128, RABounds},
		{"no waste but little read-ahead keeps the cut", func(in *ReadAheadInput) { in.CurrentKiB, in.ReadAheadSharePct = 16, 10 }, 16, RAKeep},
		{"sequential at the original keeps", func(in *ReadAheadInput) {}, 2560, RAKeep},
		{"rotational with streams gets the competitive depth", func(in *ReadAheadInput) {
			in.CurrentKiB, in.OriginalKiB, in.Rotational, in.Streams, in.CompetitiveKiB = 128, 128, true, 4, 1024
		}, 1024, RACompetitive},
		{"competitive depth is bounded", func(in *ReadAheadInput) {
			in.CurrentKiB, in.OriginalKiB, in.Rotational, in.Streams, in.CompetitiveKiB, in.MaxKiB = 128, 128, true, 4, 8192, 512
		}, 512, RACompetitive},
		{"one stream is not the competitive premise", func(in *ReadAheadInput) {
			in.CurrentKiB, in.OriginalKiB, in.Rotational, in.Streams, in.CompetitiveKiB = 128, 128, true, 1, 1024
		}, 128, RAKeep},
		{"a fast device never gets the competitive depth", func(in *ReadAheadInput) {
			in.CurrentKiB, in.OriginalKiB, in.Streams, in.CompetitiveKiB = 128, 128, 4, 1024
		}, 128, RAKeep},
		{"waste never raises", func(in *ReadAheadInput) {
			in.CurrentKiB, in.Rotational, in.Streams, in.CompetitiveKiB, in.WastePct = 16, true, 4, 1024, 30
		}, 16, RAKeep},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			tc.edit(&in)
			kib, reason := ReadAhead(in)
			if kib != tc.kib || reason != tc.reason {
				t.Errorf("ReadAhead(%+v) = %d, %s; want %d, %s", in, kib, reason, tc.kib, tc.reason)
			}
		})
	}
}
