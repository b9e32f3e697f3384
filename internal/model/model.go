// Package model is shadowtune's learned disk model: the dynamic table of
// observed service times of KDSim (Computer Journal 2016, §3.1) with the
// three tables and the disk-cache model of DADS (JPDC 2014, §3.1–3.2),
// extended for modern devices (DESIGN §3).
//
// A [Model] holds, per device, three tables of service times — read-miss,
// read-hit and write (HDD); SSD and NVMe use only read-miss and write —
// addressed by request size (row) and inter-request distance (column). Each
// cell keeps the last [RingSize] observed service times and returns their
// mean. A [Disk] is one stateful instance of a device: it adds the position
// of the previously dispatched request and, for HDDs, the state of the
// drive's own cache, and answers "how long does this request take if
// dispatched next" in O(1) without allocating.
//
// Units: sector offsets, lengths and distances are 512-byte sectors unless
// a name says bytes; times are nanoseconds (int64). In JSON, time fields
// carry their unit in their name (thresholdNs, samplesNs, …).
//
// Concurrency: lookups ([Model.Predict], [Disk.Service]) only read the
// model, so any number of Disks may share one Model from several
// goroutines as long as nothing learns ([Model.Learn], [Disk.Observe],
// [Load] into it) at the same time. Take a [Model.Clone] to keep learning
// while simulations run.
package model

import (
	"fmt"
	"math/bits"

	"github.com/shadowtune/shadowtune/internal/trace"
)

// Class is a device class. It selects the tables that are used (HDD: all
// three; SSD, NVMe and Throttled: read-miss and write) and the parametric
// defaults of [Default].
type Class uint8

// Device classes. The zero Class is invalid ("unset").
const (
	HDD  Class = iota + 1 // rotational disk: seeks, rotation, a read cache (DADS §3.2)
	SSD                   // SATA/SAS flash: no disk-cache model (DADS §3.2, last paragraph)
	NVMe                  // NVMe flash: as SSD, lower latency, usually k > 1 servers
	// Throttled is a device behind a token bucket (a cloud volume's IOPS
	// and bandwidth caps, QEMU's throttling): its tables hold the service
	// times of the device behind the bucket, as an SSD's, and
	// Config.Throttle holds the caps, which the simulator applies before
	// service ([Throttle], [EstimateThrottle]).
	Throttled
)

// String returns the class name: "hdd", "ssd", "nvme" or "throttled".
func (c Class) String() string {
	switch c {
	case HDD:
		return "hdd"
	case SSD:
		return "ssd"
	case NVMe:
		return "nvme"
	case Throttled:
		return "throttled"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Valid reports whether c is one of HDD, SSD, NVMe, Throttled.
func (c Class) Valid() bool { return c >= HDD && c <= Throttled }

// ParseClass parses "hdd", "ssd", "nvme" or "throttled".
func ParseClass(s string) (Class, error) {
	switch s {
	case "hdd":
		return HDD, nil
	case "ssd":
		return SSD, nil
	case "nvme":
		return NVMe, nil
	case "throttled":
		return Throttled, nil
	}
	return 0, fmt.Errorf("unknown device class %q (want hdd, ssd, nvme or throttled)", s)
}

// MarshalText implements encoding.TextMarshaler (JSON uses the name).
func (c Class) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("invalid device class %d", uint8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Class) UnmarshalText(b []byte) error {
	v, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Table names one of the three service-time tables (DADS §3.1).
type Table uint8

// The tables. SSD and NVMe models never use ReadHit.
const (
	ReadMiss Table = iota // reads served from the medium
	ReadHit               // HDD reads served from the drive's cache
	Write                 // writes (immediate reporting or not: the table adapts, DADS §3.1)
	numTables
)

// String returns "read-miss", "read-hit" or "write" (the names used in JSON).
func (t Table) String() string {
	switch t {
	case ReadMiss:
		return "read-miss"
	case ReadHit:
		return "read-hit"
	case Write:
		return "write"
	}
	return fmt.Sprintf("Table(%d)", uint8(t))
}

func parseTable(s string) (Table, bool) {
	for t := ReadMiss; t < numTables; t++ {
		if t.String() == s {
			return t, true
		}
	}
	return 0, false
}

// Table geometry.
//
// Rows (request size). Rows 0…31 are the papers' rows: 1…32 blocks of 4 KiB
// (a request of n sectors falls in row ceil(n/8)−1, so sub-4 KiB requests
// share row 0 with 4 KiB ones, as in KDSim where the file system never
// issued less than a block). Above 128 KiB, where KDSim clamped, we add
// [NumRows]−32 = 32 log-spaced rows, four per octave: row 32+4·o+j−1 holds
// sizes in (32·2^o·(1+(j−1)/4), 32·2^o·(1+j/4)] blocks, o = 0…7, j = 1…4,
// i.e. upper bounds 160, 192, 224, 256, 320, … KiB up to 32 MiB; larger
// requests share the last row. Why: Linux merges requests up to
// max_sectors_kb (commonly 512–1280 KiB on SATA/SAS, up to several MiB on
// NVMe), and their transfer time is proportional to size, so clamping them
// to 128 KiB would under-predict them by up to 10× or more. Four rows per
// octave bound a row's size spread to ≤ 25 % (12.5–25 %), comparable with the
// papers' 4 KiB granularity around 16–32 KiB, while keeping the table
// small (64 rows instead of 8192 linear ones).
//
// Columns (inter-request distance d, sectors). Column 0 is d = 0. Columns
// 1…18 are [4·2^(n−1) KiB, 4·2^n KiB), i.e. [2^(n+2), 2^(n+3)) sectors; the
// distances below 4 KiB (1…7 sectors), which the papers leave out, join
// column 1. Column 19 onwards: one column per GiB, [1,2) GiB, [2,3) GiB, …
// up to the device capacity. A huge device would need thousands of GiB
// columns (a 20 TB disk: 18,600), so the GiB columns are capped at
// [MaxGiBColumns]: beyond that each column spans ceil(GiBs/MaxGiBColumns)
// GiB. Seek time is nearly linear and flat in that range (coast phase), so a
// column of a few tens of GiB on a multi-TB disk changes its seek time by
// well under 1 %. Distances past the capacity share the last column.
const (
	// RingSize is S, the number of most recent service times a cell keeps
	// and averages (KDSim §3.1.1, §6: S = 64).
	RingSize = 64
	// LinearRows is the number of 4 KiB-granular rows (sizes 4–128 KiB).
	LinearRows = 32
	// NumRows is the number of size rows: 32 linear + 8 octaves × 4
	// log-spaced (128 KiB – 32 MiB).
	NumRows = LinearRows + octavesAbove*rowsPerOctave
	// SmallColumns is the number of columns below 1 GiB: column 0 plus the
	// 18 power-of-two columns.
	SmallColumns = 19
	// MaxGiBColumns caps the number of distance columns of 1 GiB or more.
	MaxGiBColumns = 256
	// MaxCapacitySectors is the largest device a model accepts: 2^50
	// sectors (512 PiB).
	MaxCapacitySectors = 1 << 50

	blockSectors  = 8       // 4 KiB block in sectors
	gibSectors    = 1 << 21 // 1 GiB in sectors
	maxRowBlocks  = 32 << 8 // 8192 blocks = 32 MiB, upper bound of the last row
	octavesAbove  = 8       // 128 KiB · 2^8 = 32 MiB
	rowsPerOctave = 4
)

// RowOf returns the table row of a request of the given length in sectors.
// Zero-length requests (flushes) use row 0.
func RowOf(sectors uint32) int {
	b := (uint64(sectors) + blockSectors - 1) / blockSectors
	if b <= 1 {
		return 0
	}
	if b <= LinearRows {
		return int(b) - 1
	}
	if b > maxRowBlocks {
		return NumRows - 1
	}
	o := bits.Len64((b-1)/LinearRows) - 1 // (b−1)/32 ∈ [2^o, 2^(o+1))
	base := uint64(LinearRows) << o
	step := base / rowsPerOctave
	j := (b - base + step - 1) / step // 1…4
	return LinearRows + rowsPerOctave*o + int(j) - 1
}

// RowSectors returns the largest request length (sectors) of a row; the
// row holds lengths in (RowSectors(row−1), RowSectors(row)].
func RowSectors(row int) uint64 {
	if row < 0 {
		return 0
	}
	if row < LinearRows {
		return uint64(row+1) * blockSectors
	}
	if row >= NumRows {
		row = NumRows - 1
	}
	k := row - LinearRows
	o, j := k/rowsPerOctave, k%rowsPerOctave+1
	base := uint64(LinearRows) << o
	return (base + base/rowsPerOctave*uint64(j)) * blockSectors
}

// layout maps distances to columns for one capacity.
type layout struct {
	gibCols   int    // number of columns of ≥ 1 GiB (≥ 1)
	gibPerCol uint64 // GiB spanned by each of them
}

func newLayout(capacitySectors uint64) layout {
	gibs := capacitySectors / gibSectors // capacity in GiB, rounded up
	if capacitySectors%gibSectors != 0 {
		gibs++
	}
	n := uint64(1)
	if gibs > 2 {
		n = gibs - 1 // columns [1,2) … [gibs−1, gibs)
	}
	per := uint64(1)
	if n > MaxGiBColumns {
		per = (n + MaxGiBColumns - 1) / MaxGiBColumns
		n = (n + per - 1) / per
	}
	return layout{gibCols: int(n), gibPerCol: per}
}

func (l layout) columns() int { return SmallColumns + l.gibCols }

func (l layout) column(d uint64) int {
	if d == 0 {
		return 0
	}
	if d < gibSectors {
		n := bits.Len64(d) - 3 // d ∈ [2^(n+2), 2^(n+3))
		if n < 1 {
			n = 1
		}
		return n
	}
	c := (d/gibSectors - 1) / l.gibPerCol
	if c >= uint64(l.gibCols) {
		c = uint64(l.gibCols) - 1
	}
	return SmallColumns + int(c)
}

// columnRange returns the distances [lo, hi) of column c in sectors; the
// last column is open-ended (hi = max uint64).
func (l layout) columnRange(c int) (lo, hi uint64) {
	switch {
	case c <= 0:
		return 0, 1
	case c == 1:
		return 1, 16
	case c < SmallColumns:
		return 1 << (c + 2), 1 << (c + 3)
	}
	k := uint64(c - SmallColumns)
	lo = (1 + k*l.gibPerCol) * gibSectors
	if c == l.columns()-1 {
		return lo, ^uint64(0)
	}
	return lo, lo + l.gibPerCol*gibSectors
}

// Config is the set of per-device parameters of a Model. It is persisted
// with the tables.
type Config struct {
	// Class is the device class (required).
	Class Class
	// CapacitySectors is the device size in 512-byte sectors (required,
	// 1…MaxCapacitySectors). It sets the number of GiB distance columns and scales the
	// default seek curve.
	CapacitySectors uint64
	// Hit classifies measured HDD reads as cache hits (DADS §3.1). Ignored
	// for SSD and NVMe.
	Hit HitClassifier
	// Servers is k, the number of requests the device serves in parallel
	// (DESIGN §3; 1 for rotational devices). See [EstimateServers].
	Servers int
	// Cache configures the HDD disk-cache model (DADS §3.2). Ignored for
	// SSD and NVMe.
	Cache CacheConfig
	// Throttle is the token bucket of a Throttled device (required for
	// it, and only for it).
	Throttle Throttle
}

// DefaultConfig returns the documented defaults for a class: DADS's 1000 µs
// hit threshold with a transfer allowance at [DefaultHitBytesPerSec], k = 1
// for HDD and SSD (SATA/SAS devices are commonly modelled as one server
// for service time, their NCQ reordering is the scheduler model's job) and
// k = 4 for NVMe (until [EstimateServers] measures it), and
// [DefaultCacheConfig] for HDDs.
func DefaultConfig(class Class, capacitySectors uint64) Config {
	cfg := Config{
		Class:           class,
		CapacitySectors: capacitySectors,
		Hit:             DefaultHitClassifier(),
		Servers:         1,
	}
	switch class {
	case HDD:
		cfg.Cache = DefaultCacheConfig()
	case NVMe:
		cfg.Servers = 4
	}
	return cfg
}

func (c Config) validate() error {
	if !c.Class.Valid() {
		return fmt.Errorf("field \"class\": invalid device class %d", uint8(c.Class))
	}
	if c.CapacitySectors == 0 || c.CapacitySectors > MaxCapacitySectors {
		return fmt.Errorf("field \"capacitySectors\": must be in 1…%d, got %d", uint64(MaxCapacitySectors), c.CapacitySectors)
	}
	if c.Hit.ThresholdNs <= 0 {
		return fmt.Errorf("field \"hit.thresholdNs\": must be > 0, got %d", c.Hit.ThresholdNs)
	}
	if c.Hit.NsPerSector < 0 {
		return fmt.Errorf("field \"hit.nsPerSector\": must be ≥ 0, got %d", c.Hit.NsPerSector)
	}
	if c.Servers < 1 || c.Servers > 1<<16 {
		return fmt.Errorf("field \"servers\": must be in 1…65536, got %d", c.Servers)
	}
	if err := c.Throttle.validate(); err != nil {
		return err
	}
	if (c.Class == Throttled) != c.Throttle.Enabled() {
		return fmt.Errorf("field \"throttle\": a cap is required for class throttled and only for it (class %s, throttle %s)", c.Class, c.Throttle)
	}
	return c.Cache.validate()
}

// Model is the learned disk model of one device: three service-time tables
// plus the device's parameters. Create it with [New] or [Default], or
// [Load] a saved one.
type Model struct {
	cfg    Config
	lay    layout
	tables [numTables]table
}

// New returns a model with empty tables. Until cells are learned, lookups
// fall back to the class's parametric defaults (see [Default]).
func New(cfg Config) (*Model, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("model: config: %w", err)
	}
	m := &Model{cfg: cfg, lay: newLayout(cfg.CapacitySectors)}
	cols := m.lay.columns()
	for t := range m.tables {
		m.tables[t].init(cols)
	}
	return m, nil
}

// Default returns an empty model with [DefaultConfig]; its lookups return
// the class's parametric default service times (see [Prior]) until real
// service times are learned. It panics if class is invalid or Throttled
// (which needs its caps: [NewThrottled]), or capacity is 0 (programming
// errors).
func Default(class Class, capacitySectors uint64) *Model {
	m, err := New(DefaultConfig(class, capacitySectors))
	if err != nil {
		panic(err)
	}
	return m
}

// Config returns the model's parameters.
func (m *Model) Config() Config { return m.cfg }

// Class returns the device class.
func (m *Model) Class() Class { return m.cfg.Class }

// Servers returns k, the number of parallel servers the simulator should
// use for this device.
func (m *Model) Servers() int { return m.cfg.Servers }

// SetServers sets k (clamped to ≥ 1), e.g. from [EstimateServers].
func (m *Model) SetServers(k int) { m.cfg.Servers = max(k, 1) }

// Throttle returns a Throttled device's caps (zero for other classes).
func (m *Model) Throttle() Throttle { return m.cfg.Throttle }

// SetThrottle replaces a Throttled model's caps, e.g. from a newer
// [EstimateThrottle]. It returns an error for another class or for caps
// that are not valid or cap nothing.
func (m *Model) SetThrottle(t Throttle) error {
	cfg := m.cfg
	cfg.Throttle = t
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	m.cfg = cfg
	return nil
}

// NewThrottled returns an empty Throttled model of a device of
// capacitySectors behind the token bucket t: [DefaultConfig]'s
// parameters, one server until [EstimateServers] measures k, and the SSD
// prior behind the bucket. It returns an error when t caps nothing or is
// not valid.
func NewThrottled(capacitySectors uint64, t Throttle) (*Model, error) {
	cfg := DefaultConfig(Throttled, capacitySectors)
	cfg.Throttle = t
	return New(cfg)
}

// SetHitClassifier sets the HDD read hit/miss classifier, e.g. from
// [DeriveHitClassifier]. Already learned cells are not reclassified.
func (m *Model) SetHitClassifier(h HitClassifier) error {
	if h.ThresholdNs <= 0 || h.NsPerSector < 0 {
		return fmt.Errorf("model: hit classifier: threshold must be > 0 and per-sector allowance ≥ 0, got %d ns + %d ns/sector", h.ThresholdNs, h.NsPerSector)
	}
	m.cfg.Hit = h
	return nil
}

// SetCache sets the disk-cache parameters used by Disks created afterwards.
func (m *Model) SetCache(c CacheConfig) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("model: cache: %w", err)
	}
	m.cfg.Cache = c
	return nil
}

// Columns returns the number of distance columns of the model's tables.
func (m *Model) Columns() int { return m.lay.columns() }

// ColumnOf returns the column of an inter-request distance in sectors.
func (m *Model) ColumnOf(distanceSectors uint64) int { return m.lay.column(distanceSectors) }

// ColumnRange returns the distances [lo, hi) in sectors that column c
// holds; for the last column hi is the largest uint64.
func (m *Model) ColumnRange(c int) (lo, hi uint64) { return m.lay.columnRange(c) }

// GiBPerColumn returns how many GiB each column of ≥ 1 GiB spans (1 unless
// the device has more than MaxGiBColumns+1 GiB).
func (m *Model) GiBPerColumn() uint64 { return m.lay.gibPerCol }

// Clone returns a deep copy of the model.
func (m *Model) Clone() *Model {
	c := &Model{cfg: m.cfg, lay: m.lay}
	for t := range m.tables {
		c.tables[t] = m.tables[t].clone()
	}
	return c
}

// Samples returns the number of service times stored in one cell (0…RingSize).
func (m *Model) Samples(t Table, row, col int) int {
	if t >= numTables || row < 0 || row >= NumRows || col < 0 || col >= m.lay.columns() {
		return 0
	}
	return int(m.tables[t].cells[col*NumRows+row].n)
}

// tableFor returns the table that serves op; hit matters only for HDD reads.
func (m *Model) tableFor(op trace.Op, hit bool) Table {
	if op != trace.Read {
		return Write
	}
	if hit && m.cfg.Class == HDD {
		return ReadHit
	}
	return ReadMiss
}

// Predict returns the predicted service time in ns of a request of op and
// length sectors dispatched at distanceSectors from the end of the
// previously dispatched request, hit saying whether the drive's cache holds
// it (HDD reads only; ignored otherwise). It is the cell mean with the cold
// cell rules of [Model.Lookup]. Flushes and discards use the write table.
// Predict is pure, O(1) and does not allocate.
func (m *Model) Predict(op trace.Op, sectors uint32, distanceSectors uint64, hit bool) int64 {
	return m.Lookup(m.tableFor(op, hit), RowOf(sectors), m.lay.column(distanceSectors))
}

// Lookup returns the value of cell (t, row, col) in ns: the mean of its
// stored service times (KDSim §3.1.1). A cold (empty) cell returns the mean
// of the non-empty cells of its column; if that column is empty, the mean
// of the nearest column with data (ties go to the larger distance, the
// slower guess) (KDSim §3.3, DADS §3.1). If the whole table is empty:
// read-miss falls back to the write table and write to read-miss (both
// measure the medium), and when those are empty too, or for read-hit, the
// class's parametric default ([Prior]) of the cell is returned. O(1).
func (m *Model) Lookup(t Table, row, col int) int64 {
	row = min(max(row, 0), NumRows-1)
	col = min(max(col, 0), m.lay.columns()-1)
	if v, ok := m.tables[t].lookup(row, col); ok {
		return v
	}
	switch t {
	case ReadMiss:
		if v, ok := m.tables[Write].lookup(row, col); ok {
			return v
		}
	case Write:
		if v, ok := m.tables[ReadMiss].lookup(row, col); ok {
			return v
		}
	}
	return m.priorCell(t, row, col)
}

// sample returns the stored value of cell (t, row, col) picked by the
// uniform random number r (oldest…newest mapped onto [0, 2^64)), or the
// Lookup value of a cold cell.
func (m *Model) sample(t Table, row, col int, r uint64) int64 {
	c := &m.tables[t].cells[col*NumRows+row]
	if c.n == 0 {
		return m.Lookup(t, row, col)
	}
	i, _ := bits.Mul64(r, uint64(c.n)) // ⌊r·n/2^64⌋, unbiased
	return c.logical(int(i))
}

// Learn records one measured service time (ns) of a completed request in
// its cell: HDD reads go to read-hit or read-miss as classified by the
// model's [HitClassifier] (DADS §3.1), other reads to read-miss, writes,
// discards and flushes to write. Learn does not touch any Disk state; use
// [Disk.Observe] to also track position and the disk cache. Negative
// service times are ignored and times above one hour are clamped to it
// (they are certainly not service times). It reports the table that was
// updated (or would have been).
func (m *Model) Learn(op trace.Op, sectors uint32, distanceSectors uint64, serviceNs int64) Table {
	t := m.classify(op, sectors, serviceNs)
	if serviceNs >= 0 {
		m.tables[t].update(RowOf(sectors), m.lay.column(distanceSectors), min(serviceNs, maxSampleNs))
	}
	return t
}

func (m *Model) classify(op trace.Op, sectors uint32, serviceNs int64) Table {
	if op != trace.Read {
		return Write
	}
	if m.cfg.Class == HDD && m.cfg.Hit.IsHit(sectors, serviceNs) {
		return ReadHit
	}
	return ReadMiss
}

// learnCell adds a sample to an explicit cell (used by Load and tests).
func (m *Model) learnCell(t Table, row, col int, v int64) {
	m.tables[t].update(row, col, v)
}
