package localstore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/sstable/block"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Durability says when an append is acknowledged.
type Durability string

const (
	// DurabilitySync acknowledges after the fsync; concurrent appends
	// share fsyncs (with segments, the segments' fdatasync through the
	// committer; inline, the WAL's through pebble's group commit).
	DurabilitySync Durability = "sync"
	// DurabilityAsync acknowledges after the write, before the fsync, so
	// a machine crash may lose acknowledged appends. With segments the
	// committer's next fdatasync makes the append durable, and readers see
	// it from then on (a few milliseconds); kept in pebble, the WAL's
	// fsync every Config.AsyncSyncInterval does.
	DurabilityAsync Durability = "async"
)

// Valid reports whether d is a known durability; the empty value means the
// store default.
func (d Durability) Valid() bool { return d == "" || d == DurabilitySync || d == DurabilityAsync }

// Compression names a block compression for the store's files.
type Compression string

// The compressions a store can write with.
const (
	CompressionNone   Compression = "none"
	CompressionSnappy Compression = "snappy"
	CompressionMinLZ  Compression = "minlz"
	CompressionZstd   Compression = "zstd"
)

// profile is pebble's built-in profile for c. Only built-in profiles are
// used: pebble records the name in its OPTIONS file and looks it up again
// when it reads that file.
func (c Compression) profile() (*block.CompressionProfile, bool) {
	switch c {
	case "", CompressionNone:
		return block.NoCompression, true
	case CompressionSnappy:
		return block.SnappyCompression, true
	case CompressionMinLZ:
		return block.MinLZCompression, true
	case CompressionZstd:
		return block.ZstdCompression, true
	}
	return nil, false
}

// Config configures a Store.
type Config struct {
	// Dir is the directory pebble lives in. Required.
	Dir string
	// FS overrides the filesystem (tests use a crashable in-memory FS).
	// Default: the OS filesystem.
	FS vfs.FS
	// MemTableSize is pebble's memtable size in bytes. Default 64 MiB;
	// pebble's own 4 MiB default stalls writes under log workloads.
	MemTableSize uint64
	// CacheSize is pebble's block cache in bytes. Default 64 MiB.
	CacheSize int64
	// Compression is the block compression of what pebble writes to its
	// files: CompressionNone (the default), CompressionSnappy,
	// CompressionMinLZ or CompressionZstd. Entries arrive as clients
	// batched them, often compressed already; compressing them again
	// costs the flush CPU and garbage and saves nothing on such data.
	Compression Compression
	// BlobMinSize is the smallest value kept in blob files outside the
	// LSM (pebble's value separation): log entries of at least this many
	// bytes are written once at flush and never rewritten by compactions.
	// Negative disables it. Default 256.
	BlobMinSize int
	// Durability is the default for appends that do not name one.
	// Default sync.
	Durability Durability
	// InlineEntries keeps every entry in pebble, as before segments: each
	// entry is then written twice (WAL and flush). By default entries are
	// written once, to segment files beside pebble (see segments.go);
	// they stay in pebble when Compression is set (segments are not
	// compressed).
	InlineEntries bool
	// AsyncBacklog bounds the bytes of async appends acknowledged and not
	// yet durable: an async append beyond it is acknowledged only once
	// durable, as a sync one, so a disk slower than the producers holds
	// them back instead of letting the unsynced data, and how far readers
	// trail the acknowledgements, grow without end. Default 32 MiB.
	AsyncBacklog int64
	// SegmentSize is the size at which a segment file is closed and the
	// next begun. Default 64 MiB.
	SegmentSize int64
	// SegmentCache is how many of the newest bytes written to segments
	// stay in the page cache once durable; the pages of older ones are
	// dropped from it (POSIX_FADV_DONTNEED on Linux), so the write stream
	// reuses the pages it frees instead of taking new ones. A reader
	// further behind keeps the pages from its place on while it reads, up
	// to four times SegmentCache behind the newest; one further back reads
	// from the disk. 0 keeps them all (the kernel decides).
	SegmentCache int64
	// AsyncSyncInterval is how often the WAL is fsynced when async appends
	// kept in pebble are pending, or appends made durable in segments
	// (which bounds what a replay after a crash applies). Default 100ms.
	AsyncSyncInterval time.Duration
	// GroupCommitInterval is the least time between the starts of two
	// segment fdatasyncs: appends that arrive sooner after one began wait
	// for the next and share it. 0 (the default) starts each as soon as
	// the one before allows (at most two at once): the least latency,
	// and at moderate rates about one fdatasync per append. An interval
	// bounds the fdatasyncs, which cost CPU and wear flash storage, to one
	// per interval, and adds up to one interval to an append's latency
	// (none when the disk has been idle that long). Where fdatasyncs take
	// over twice the interval it changes nothing (two run at once); near
	// that, a producer whose rate is bounded by its latency (a Kafka
	// client's requests in flight) is slowed. At most 1s.
	GroupCommitInterval time.Duration
	// Now is the clock (append times, retention). Default time.Now.
	Now func() time.Time
	// Logger receives storage events. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig is the configuration tern serves with.
func DefaultConfig() Config {
	return Config{
		Dir:               "data",
		MemTableSize:      64 << 20,
		CacheSize:         64 << 20,
		Durability:        DurabilitySync,
		AsyncSyncInterval: 100 * time.Millisecond,
		BlobMinSize:       256,
		SegmentSize:       64 << 20,
		AsyncBacklog:      32 << 20,
	}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("localstore: dir is empty: set the data directory"))
	}
	if c.MemTableSize != 0 && c.MemTableSize < 1<<20 {
		errs = append(errs, fmt.Errorf("localstore: memtable size %d is below 1 MiB", c.MemTableSize))
	}
	if c.SegmentSize != 0 && (c.SegmentSize < 1<<20 || c.SegmentSize > 1<<31) {
		errs = append(errs, fmt.Errorf("localstore: segment size %d is outside 1 MiB to 2 GiB", c.SegmentSize))
	}
	if c.SegmentCache < 0 {
		errs = append(errs, fmt.Errorf("localstore: segment cache %d is negative: give bytes, or 0 to keep every page", c.SegmentCache))
	}
	if !c.Durability.Valid() {
		errs = append(errs, fmt.Errorf("localstore: durability %q: want sync or async", c.Durability))
	}
	if _, ok := c.Compression.profile(); !ok {
		errs = append(errs, fmt.Errorf("localstore: compression %q: want none, snappy, minlz or zstd", c.Compression))
	}
	if c.AsyncSyncInterval < 0 {
		errs = append(errs, fmt.Errorf("localstore: async sync interval %v is negative", c.AsyncSyncInterval))
	}
	if c.GroupCommitInterval < 0 || c.GroupCommitInterval > time.Second {
		errs = append(errs, fmt.Errorf("localstore: group commit interval %v is outside 0 to 1s", c.GroupCommitInterval))
	}
	if c.AsyncBacklog < 0 {
		errs = append(errs, fmt.Errorf("localstore: async backlog %d is negative", c.AsyncBacklog))
	}
	return errors.Join(errs...)
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.MemTableSize == 0 {
		c.MemTableSize = d.MemTableSize
	}
	if c.CacheSize == 0 {
		c.CacheSize = d.CacheSize
	}
	if c.BlobMinSize == 0 {
		c.BlobMinSize = d.BlobMinSize
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = d.SegmentSize
	}
	if c.AsyncBacklog == 0 {
		c.AsyncBacklog = d.AsyncBacklog
	}
	if c.Durability == "" {
		c.Durability = d.Durability
	}
	if c.AsyncSyncInterval == 0 {
		c.AsyncSyncInterval = d.AsyncSyncInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
