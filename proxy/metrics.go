package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newRegistry builds the node's own Prometheus registry (not the global
// one, so several nodes can run in one process).
func (n *Node) newRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	n.kafka.reqTimeVec = newKafkaRequestTime(n.cfg.Node.Name, n.cfg.Node.Region)
	n.kafka.reqPhaseVec = newKafkaRequestPhases(n.cfg.Node.Name, n.cfg.Node.Region)
	r.MustRegister(
		n.kafka.reqTimeVec,
		n.kafka.reqPhaseVec,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&storeCollector{n: n},
		&replicationCollector{n: n},
		kafkaCollector{n: n},
	)
	return r
}

// storeCollector adapts localstore.Metrics to Prometheus at scrape time.
type storeCollector struct{ n *Node }

var (
	labels   = []string{"node", "region"}
	descs    = map[string]*prometheus.Desc{}
	descList = []struct {
		name, help string
		counter    bool
	}{
		{"tern_storage_topics", "Topics in the registry.", false},
		{"tern_storage_partitions", "Partition logs in the registry.", false},
		{"tern_storage_appended_entries_total", "Entries appended since start.", true},
		{"tern_storage_appended_bytes_total", "Entry bytes appended since start.", true},
		{"tern_storage_appended_records_total", "Records appended since start.", true},
		{"tern_storage_fsync_waits_total", "Appends that waited for an fsync (the segments', or pebble's WAL for entries kept in pebble): sync appends, and async ones held back by storage.async_backlog.", true},
		{"tern_storage_async_backlog_bytes", "Bytes of async appends acknowledged and not yet durable: what a crash now would lose (at most storage.async_backlog).", false},
		{"tern_storage_log_bytes", "Bytes of retained entries in every log.", false},
		{"tern_storage_disk_bytes", "Bytes pebble uses on disk.", false},
		{"tern_storage_memtable_bytes", "Bytes in pebble memtables.", false},
		{"tern_storage_wal_written_bytes_total", "Bytes pebble wrote to its WAL.", true},
		{"tern_storage_flushes_total", "Pebble memtable flushes.", true},
		{"tern_storage_compactions_total", "Pebble compactions.", true},
		{"tern_storage_write_stalls_total", "Pebble write stalls.", true},
		{"tern_storage_segments", "Segment files holding log entries.", false},
		{"tern_storage_segment_written_bytes_total", "Bytes written to segment files.", true},
		{"tern_storage_segment_cache_bytes", "The bound storage.segment_cache puts on the newest segment data kept in the page cache (auto resolved); 0: every page kept.", false},
		{"tern_storage_segment_cache_dropped_bytes_total", "Bytes of segment data whose pages were dropped from the page cache once more than storage.segment_cache behind the newest.", true},
		{"tern_storage_segment_direct_read_bytes_total", "Bytes of segment data read straight from the disk, past the page cache: data older than storage.segment_cache, or written before the node started.", true},
		{"tern_storage_read_ahead_hits_total", "Reads of a reader behind the high watermark (a consumer reading a backlog) served by a read the node started before the reader asked: as the reader's previous read ended, or where it said it would read next.", true},
		{"tern_storage_read_ahead_asked_hits_total", "The read-ahead hits of reads started where the reader said it would read next: a Kafka fetch session's next fetch, read while the answer before it goes out.", true},
		{"tern_subscription_reads_total", "Reads of new entries by Pulsar and WebSocket subscriptions.", true},
		{"tern_subscription_read_buffers_reused_total", "Subscription reads into a buffer that an earlier read's entries and deliveries had all given back, rather than a new one.", true},
		{"tern_storage_failed", "1 when a write error stopped storage.", false},
		{"tern_ready", "1 when the node is ready.", false},
	}
)

var (
	walFsyncDesc = prometheus.NewDesc("tern_storage_wal_fsync_seconds",
		"Latency of pebble's WAL fsyncs: on an interval, for truncation and deletion, and for each sync append of entries kept in pebble.", labels, nil)
	segmentFsyncDesc = prometheus.NewDesc("tern_storage_segment_fsync_seconds",
		"Latency of the segment files' fdatasyncs; an append in sync durability waits for one.", labels, nil)
	appendCommitDesc = prometheus.NewDesc("tern_storage_append_commit_seconds",
		"Each append's time from its write to its commit (durable and visible to readers), which a sync append's producer waits for: the segment fdatasyncs weighted by the appends each held, with the wait for the one in progress.", labels, nil)
)

func init() {
	for _, d := range descList {
		descs[d.name] = prometheus.NewDesc(d.name, d.help, labels, nil)
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
	ch <- walFsyncDesc
	ch <- segmentFsyncDesc
	ch <- appendCommitDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.n.store.Metrics()
	subs := &c.n.messaging().subs
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	vals := map[string]float64{
		"tern_storage_topics":                            float64(m.Topics),
		"tern_storage_partitions":                        float64(m.Partitions),
		"tern_storage_appended_entries_total":            float64(m.AppendedEntries),
		"tern_storage_appended_bytes_total":              float64(m.AppendedBytes),
		"tern_storage_appended_records_total":            float64(m.AppendedRecords),
		"tern_storage_fsync_waits_total":                 float64(m.SyncWaits),
		"tern_storage_async_backlog_bytes":               float64(m.AsyncBacklog),
		"tern_storage_log_bytes":                         float64(m.LogBytes),
		"tern_storage_disk_bytes":                        float64(m.DiskBytes),
		"tern_storage_memtable_bytes":                    float64(m.MemtableBytes),
		"tern_storage_wal_written_bytes_total":           float64(m.WALBytesWritten),
		"tern_storage_flushes_total":                     float64(m.Flushes),
		"tern_storage_compactions_total":                 float64(m.Compactions),
		"tern_storage_write_stalls_total":                float64(m.WriteStalls),
		"tern_storage_segments":                          float64(m.Segments),
		"tern_storage_segment_written_bytes_total":       float64(m.SegmentBytesWritten),
		"tern_storage_segment_cache_bytes":               float64(c.n.segmentCache),
		"tern_storage_segment_cache_dropped_bytes_total": float64(m.SegmentCacheDropped),
		"tern_storage_segment_direct_read_bytes_total":   float64(m.SegmentDirectReadBytes),
		"tern_storage_read_ahead_hits_total":             float64(m.ReadAheadHits),
		"tern_storage_read_ahead_asked_hits_total":       float64(m.ReadAheadAskedHits),
		"tern_subscription_reads_total":                  float64(subs.reads.Load()),
		"tern_subscription_read_buffers_reused_total":    float64(subs.bufReused.Load()),
		"tern_storage_failed":                            b(m.Failed),
		"tern_ready":                                     b(c.n.Ready()),
	}
	for _, d := range descList {
		typ := prometheus.GaugeValue
		if d.counter {
			typ = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(descs[d.name], typ, vals[d.name], c.n.cfg.Node.Name, c.n.cfg.Node.Region)
	}
	if h := m.WALFsync; h.Buckets != nil {
		ch <- prometheus.MustNewConstHistogram(walFsyncDesc, h.Count, h.Sum, h.Buckets, c.n.cfg.Node.Name, c.n.cfg.Node.Region)
	}
	if h := m.SegmentFsync; h.Buckets != nil {
		ch <- prometheus.MustNewConstHistogram(segmentFsyncDesc, h.Count, h.Sum, h.Buckets, c.n.cfg.Node.Name, c.n.cfg.Node.Region)
	}
	if h := m.AppendCommit; h.Buckets != nil {
		ch <- prometheus.MustNewConstHistogram(appendCommitDesc, h.Count, h.Sum, h.Buckets, c.n.cfg.Node.Name, c.n.cfg.Node.Region)
	}
}
