package kafka

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics is a snapshot of the front end's counters. The node adapts it to
// Prometheus; this package does not export metrics itself.
type Metrics struct {
	// OpenConnections are connected now; Connections were accepted since
	// start.
	OpenConnections int64
	Connections     int64
	// ProtocolErrors counts connections closed for a protocol violation.
	ProtocolErrors int64
	// Requests counts requests by API name.
	Requests map[string]int64
	// ProducedBatches and ProducedRecords were appended (duplicates of
	// idempotent resends excluded).
	ProducedBatches int64
	ProducedRecords int64
	// FetchedBytes are record bytes sent in Fetch responses.
	FetchedBytes int64
	// FetchSessions are open now and hold FetchSessionPartitions;
	// IncrementalFetches were served on a session, and
	// FetchSessionEvictions closed a session to open another.
	FetchSessions, FetchSessionPartitions     int64
	IncrementalFetches, FetchSessionEvictions int64
}

// maxKey bounds the API keys counted per key.
const maxKey = 128

type counters struct {
	open, accepted, protocolErrors atomic.Int64
	requests                       [maxKey]atomic.Int64
	batches, records, fetched      atomic.Int64
}

// Metrics returns the current counters.
func (s *Server) Metrics() Metrics {
	m := Metrics{
		OpenConnections: s.stats.open.Load(),
		Connections:     s.stats.accepted.Load(),
		ProtocolErrors:  s.stats.protocolErrors.Load(),
		Requests:        map[string]int64{},
		ProducedBatches: s.stats.batches.Load(),
		ProducedRecords: s.stats.records.Load(),
		FetchedBytes:    s.stats.fetched.Load(),

		IncrementalFetches:    s.sessions.incremental.Load(),
		FetchSessionEvictions: s.sessions.evictions.Load(),
	}
	m.FetchSessions, m.FetchSessionPartitions = s.sessions.stats()
	for key := range apis {
		if key >= 0 && key < maxKey {
			if v := s.stats.requests[key].Load(); v > 0 {
				m.Requests[kmsg.NameForKey(key)] = v
			}
		}
	}
	return m
}
