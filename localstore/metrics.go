package localstore

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics is a snapshot of storage figures for /metrics and the admin API.
type Metrics struct {
	Topics     int
	Partitions int
	// Appended counts entries, their bytes and records since open.
	AppendedEntries int64
	AppendedBytes   int64
	AppendedRecords int64
	// SyncWaits counts appends that waited for an fsync (the segments',
	// or, inline, the WAL's): sync appends, and async ones held back by
	// Config.AsyncBacklog.
	SyncWaits int64
	// AsyncBacklog is the bytes of async appends acknowledged and not
	// yet durable: what a crash now would lose, bounded by
	// Config.AsyncBacklog.
	AsyncBacklog int64
	// LogBytes is the size of every retained entry.
	LogBytes int64
	// DiskBytes is the store's size on disk: pebble's (sstables, WAL,
	// manifests) and the segment files'.
	DiskBytes uint64
	// MemtableBytes is the memory in memtables.
	MemtableBytes uint64
	// WALBytesWritten is what pebble wrote to its WAL since open.
	WALBytesWritten uint64
	Flushes         int64
	Compactions     int64
	WriteStalls     int64
	// Failed is set when a write error stopped the store.
	Failed bool
	// WALFsync is pebble's WAL fsync latency since open; its Buckets are
	// nil when the store is closed or pebble keeps no histogram.
	WALFsync FsyncHistogram
	// Segments is the number of segment files; SegmentBytesWritten what
	// was written to them since open; SegmentFsync their fdatasyncs'
	// latency (one per group commit of appends in segments);
	// SegmentCacheDropped how many of the bytes written since open have
	// had their pages dropped from the page cache (Config.SegmentCache).
	Segments            int
	SegmentBytesWritten int64
	SegmentFsync        FsyncHistogram
	// AppendCommit is each segment append's time from its write to its
	// commit (durable, and visible to readers): a sync append's producer
	// waits that long. It is the fdatasyncs' latency weighted by the
	// appends each made wait, and the wait for the one in progress.
	AppendCommit        FsyncHistogram
	SegmentCacheDropped int64
	// SegmentDirectReadBytes is how many bytes reads took straight from
	// the disk since open, past the page cache: those of segments whose
	// pages were dropped, or written before open.
	SegmentDirectReadBytes int64
	// ReadAheadHits is how many ReadOn and ReadHere calls a read started
	// ahead of them served; ReadAheadAskedHits is those of them started by
	// ReadAheadAt, where the reader said it would read next.
	ReadAheadHits, ReadAheadAskedHits int64
	// SegmentPoolBytes is the part of DiskBytes that removed segments
	// kept for reuse take: space new segments are written into before
	// any more is taken.
	SegmentPoolBytes uint64
}

// newLatencyHistogram is the histogram of the store's latencies, in
// seconds: 30 buckets from 50 us to 10 s.
func newLatencyHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Buckets: prometheus.ExponentialBucketsRange(50e-6, 10, 30),
	})
}

// Metrics returns current figures.
func (s *Store) Metrics() Metrics {
	m := Metrics{
		AppendedEntries:        s.stats.appends.Load(),
		AppendedBytes:          s.stats.appendBytes.Load(),
		AppendedRecords:        s.stats.records.Load(),
		SyncWaits:              s.stats.syncWaits.Load(),
		AsyncBacklog:           s.asyncBacklog.Load(),
		WriteStalls:            s.writeStalls.Load(),
		Failed:                 s.failed.Load() != nil,
		Segments:               s.segs.count(),
		SegmentBytesWritten:    s.segs.written.Load(),
		SegmentFsync:           fsyncHistogram(s.segs.fsync, 1),
		AppendCommit:           fsyncHistogram(s.commitTime, 1),
		SegmentCacheDropped:    s.segs.droppedBytes(),
		SegmentDirectReadBytes: s.segs.directBytes.Load(),
		ReadAheadHits:          s.ra.hits.Load(),
		ReadAheadAskedHits:     s.ra.askedHits.Load(),
	}
	s.mu.RLock()
	m.Topics = len(s.mu.topics)
	m.Partitions = len(s.mu.partitions)
	parts := make([]*partition, 0, len(s.mu.partitions))
	for _, p := range s.mu.partitions {
		parts = append(parts, p)
	}
	s.mu.RUnlock()
	for _, p := range parts {
		p.mu.Lock()
		m.LogBytes += p.head.Bytes
		p.mu.Unlock()
	}
	if s.closed.Load() {
		return m
	}
	pm := s.db.Metrics()
	segs, pool := s.segs.diskBytes()
	m.DiskBytes = pm.DiskSpaceUsage() + segs
	m.SegmentPoolBytes = pool
	m.MemtableBytes = pm.MemTable.Size
	m.WALBytesWritten = pm.WAL.BytesWritten
	m.Flushes = pm.Flush.Count
	m.Compactions = pm.Compact.Count
	m.WALFsync = fsyncHistogram(pm.LogWriter.FsyncLatency, 1e9)
	return m
}

// AppendedBytes is the total of entry bytes appended since the store
// opened: one atomic load, for callers that estimate growth between the
// (costlier) Metrics samples.
func (s *Store) AppendedBytes() int64 { return s.stats.appendBytes.Load() }

// FsyncHistogram is a latency distribution since open (an fsync's, an
// append commit's): cumulative counts per upper bound in seconds, as
// Prometheus histograms are built.
type FsyncHistogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// fsyncHistogram converts a fsync histogram observing units per second
// (pebble's observes nanoseconds); a nil or unreadable one gives the zero
// value.
func fsyncHistogram(h prometheus.Histogram, units float64) FsyncHistogram {
	if h == nil {
		return FsyncHistogram{}
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil || m.Histogram == nil {
		return FsyncHistogram{}
	}
	out := FsyncHistogram{
		Count:   m.Histogram.GetSampleCount(),
		Sum:     m.Histogram.GetSampleSum() / units,
		Buckets: make(map[float64]uint64, len(m.Histogram.Bucket)),
	}
	for _, b := range m.Histogram.Bucket {
		out.Buckets[b.GetUpperBound()/units] = b.GetCumulativeCount()
	}
	return out
}
