package replicator

// Status that cannot lie. Lag is computed at snapshot time from the log itself (its high
// watermark) and the durable cursor (moved only by the destination's acknowledgements), never
// from counters the sender keeps: a sender that stopped moving still shows the backlog growing.
// Lag in seconds is the age of the oldest entry the destination has not acknowledged, read from
// the log. A stream that is open and has a backlog but saw no acknowledgement for StallAfter is
// reported stalled, whatever its link says.

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// StreamStatus is one (partition, destination region) as the sending node sees it.
type StreamStatus struct {
	Topic string `json:"topic"`
	// Partition is the partition index, -1 for a non-partitioned topic.
	Partition   int         `json:"partition"`
	Destination string      `json:"destination"`
	Peer        string      `json:"peer,omitempty"`
	State       StreamState `json:"state"`
	// Cursor is the durable replication cursor: every local offset below it is acknowledged by
	// the destination or not meant for it.
	Cursor        int64 `json:"cursor"`
	HighWatermark int64 `json:"high_watermark"`
	// LagMessages is HighWatermark - Cursor.
	LagMessages int64 `json:"lag_messages"`
	// LagSeconds is the age of the oldest unacknowledged entry (0 without lag).
	LagSeconds    float64    `json:"lag_seconds"`
	OldestPending *time.Time `json:"oldest_pending,omitempty"`
	// LastTransfer is when the destination last acknowledged something.
	LastTransfer *time.Time `json:"last_transfer,omitempty"`
	// LastProgress is when the cursor last moved (or the stream opened).
	LastProgress time.Time  `json:"last_progress"`
	LastError    string     `json:"last_error,omitempty"`
	LastErrorAt  *time.Time `json:"last_error_at,omitempty"`
	// CreditBlocked is set while the sender waits for the receiver to grant credit: the
	// destination, not the network, limits the stream.
	CreditBlocked   bool   `json:"credit_blocked"`
	SentEntries     uint64 `json:"sent_entries"`
	SentMessages    uint64 `json:"sent_messages"`
	SentBytes       uint64 `json:"sent_bytes"`
	FilteredEntries uint64 `json:"filtered_entries"`
	// SkippedMessages counts messages of other regions passed over without reading them (a
	// full mesh sends only what was produced here).
	SkippedMessages uint64 `json:"skipped_messages"`
	// LostToRetention counts messages retention removed before they reached the destination.
	LostToRetention int64  `json:"lost_to_retention"`
	Opens           uint64 `json:"opens"`
}

// InboundStatus is one partition stream received from one node.
type InboundStatus struct {
	Topic      string `json:"topic"`
	Partition  int    `json:"partition"`
	FromNode   string `json:"from_node"`
	FromRegion string `json:"from_region"`
	Open       bool   `json:"open"`
	Opens      uint64 `json:"opens"`
	Entries    uint64 `json:"entries"`
	Messages   uint64 `json:"messages"`
	Bytes      uint64 `json:"bytes"`
	// Duplicates counts entries dropped by dedup (copies already held); Looped counts entries
	// that had already passed through this region.
	Duplicates  uint64     `json:"duplicates"`
	Looped      uint64     `json:"looped"`
	LastApplied *time.Time `json:"last_applied,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// LinkStatus is one mesh link, as LinkStats, in JSON-friendly units.
type LinkStatus struct {
	Peer          string     `json:"peer"`
	Region        string     `json:"region"`
	Addr          string     `json:"addr,omitempty"`
	State         string     `json:"state"`
	Since         time.Time  `json:"since"`
	LastError     string     `json:"last_error,omitempty"`
	LastErrorAt   *time.Time `json:"last_error_at,omitempty"`
	RTTMs         float64    `json:"rtt_ms"`
	Connects      uint64     `json:"connects"`
	Streams       int64      `json:"streams"`
	BytesSent     uint64     `json:"bytes_sent"`
	BytesReceived uint64     `json:"bytes_received"`
	PacketsLost   uint64     `json:"packets_lost"`
}

// StatusSummary rolls the streams up for a one-line health check.
type StatusSummary struct {
	Streams          int                 `json:"streams"`
	ByState          map[StreamState]int `json:"by_state"`
	TotalLagMessages int64               `json:"total_lag_messages"`
	MaxLagSeconds    float64             `json:"max_lag_seconds"`
	// Healthy is false when a stream is stalled, refused, disconnected with a backlog, or lost
	// messages to retention.
	Healthy bool `json:"healthy"`
	// ReadAheadRuns is how many runs of entries the senders hold read ahead of their sending,
	// beyond the one each may hold: at most 16 MiB of them together, in runs of read_bytes.
	ReadAheadRuns int `json:"read_ahead_runs"`
}

// Status is the node's replication as a plain snapshot: GET /api/v1/replication, tern status and
// the metrics adapter all render it.
type Status struct {
	Node              string          `json:"node"`
	Region            string          `json:"region"`
	Transport         string          `json:"transport"`
	StallAfterSeconds float64         `json:"stall_after_seconds"`
	Summary           StatusSummary   `json:"summary"`
	Streams           []StreamStatus  `json:"streams"`
	Inbound           []InboundStatus `json:"inbound"`
	Links             []LinkStatus    `json:"links"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Status takes a snapshot.
func (e *Engine) Status() Status {
	now := e.now()
	out := Status{Node: e.cfg.NodeName, Region: e.cfg.Region, Transport: "on", StallAfterSeconds: e.cfg.StallAfter.Seconds()}
	links := map[string]LinkStats{}
	if e.transport == nil {
		out.Transport = ErrTransportOff.Error()
	} else {
		for _, ls := range e.transport.Stats() {
			links[ls.Peer] = ls
			out.Links = append(out.Links, LinkStatus{
				Peer: ls.Peer, Region: ls.Region, Addr: ls.Addr, State: ls.State.String(), Since: ls.Since,
				LastError: ls.LastError, LastErrorAt: timePtr(ls.LastErrorAt),
				RTTMs:    float64(ls.SmoothedRTT.Microseconds()) / 1000,
				Connects: ls.Connects, Streams: ls.Streams, BytesSent: ls.BytesSent, BytesReceived: ls.BytesReceived,
				PacketsLost: ls.PacketsLost,
			})
		}
	}
	e.mu.Lock()
	senders := make([]*sender, 0, len(e.mu.senders))
	for _, s := range e.mu.senders {
		senders = append(senders, s)
	}
	inbound := make(map[inboundKey]*inbound, len(e.mu.inbound))
	for k, in := range e.mu.inbound {
		inbound[k] = in
	}
	e.mu.Unlock()

	out.Summary = StatusSummary{ByState: map[StreamState]int{}, Healthy: true, ReadAheadRuns: len(e.ahead)}
	for _, s := range senders {
		ss := s.status(now, links)
		out.Streams = append(out.Streams, ss)
		out.Summary.Streams++
		out.Summary.ByState[ss.State]++
		out.Summary.TotalLagMessages += ss.LagMessages
		out.Summary.MaxLagSeconds = max(out.Summary.MaxLagSeconds, ss.LagSeconds)
		switch {
		case ss.State == StreamStalled || ss.State == StreamRefused || ss.LostToRetention > 0:
			out.Summary.Healthy = false
		case ss.LagMessages > 0 && (ss.State == StreamDisconnected || ss.State == StreamWaiting || ss.State == StreamOff):
			// Data waits for a link that is down, a region with no node, or a node that
			// cannot replicate.
			out.Summary.Healthy = false
		}
	}
	slices.SortFunc(out.Streams, func(a, b StreamStatus) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Destination, b.Destination))
	})
	for k, in := range inbound {
		in.mu.Lock()
		is := InboundStatus{
			Topic: k.topic, Partition: k.partition, FromNode: k.from, FromRegion: in.fromRegion,
			Open: in.open.Load() > 0, Opens: in.mu.opens,
			Entries: in.ctr.entries.Load(), Messages: in.ctr.messages.Load(), Bytes: in.ctr.bytes.Load(),
			Duplicates: in.ctr.duplicates.Load(), Looped: in.ctr.looped.Load(),
			LastApplied: timePtr(in.mu.lastApplied), LastErrorAt: timePtr(in.mu.lastErrAt),
		}
		if in.mu.lastErr != nil {
			is.LastError = in.mu.lastErr.Error()
		}
		in.mu.Unlock()
		out.Inbound = append(out.Inbound, is)
	}
	slices.SortFunc(out.Inbound, func(a, b InboundStatus) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.FromNode, b.FromNode))
	})
	return out
}

// status is one sender's snapshot.
func (s *sender) status(now time.Time, links map[string]LinkStats) StreamStatus {
	s.mu.Lock()
	ss := StreamStatus{
		Topic: s.spec.topic.String(), Partition: s.spec.index, Destination: s.spec.dest, Peer: s.mu.peer,
		State: s.mu.state, Cursor: s.mu.cursor, LastTransfer: timePtr(s.mu.transfer), LastProgress: s.mu.progress,
		LastErrorAt: timePtr(s.mu.lastErrAt), LostToRetention: s.mu.lost, Opens: s.mu.opens,
	}
	loaded, lastErrAt, since := s.mu.loaded, s.mu.lastErrAt, s.mu.since
	if s.mu.lastErr != nil {
		ss.LastError = s.mu.lastErr.Error()
	}
	if st := s.mu.stream; st != nil {
		ss.CreditBlocked = st.Blocked()
	}
	s.mu.Unlock()
	ss.SentEntries = s.ctr.entries.Load()
	ss.SentMessages = s.ctr.messages.Load()
	ss.SentBytes = s.ctr.bytes.Load()
	ss.FilteredEntries = s.ctr.filtered.Load()
	ss.SkippedMessages = s.ctr.skipped.Load()

	st := s.e.host.Store()
	start, hw, err := st.Offsets(s.spec.pid)
	if err != nil {
		ss.LastError = err.Error()
		return ss
	}
	ss.HighWatermark = hw
	if !loaded {
		ss.Cursor = start // not created yet: nothing of the log was sent
	}
	ss.LagMessages = max(hw-ss.Cursor, 0)
	var oldest time.Time
	if ss.LagMessages > 0 {
		// The entry's append time, from the log's index: the stamp in its envelope, without
		// reading it (reading each lagging stream's entry made a status of a region catching up
		// on 100 partitions read 10 MB).
		if at, ok, err := st.AppendTimeAt(s.spec.pid, max(ss.Cursor, start)); err == nil && ok {
			oldest = time.UnixMilli(at)
		}
		if !oldest.IsZero() {
			ss.OldestPending = &oldest
			ss.LagSeconds = max(now.Sub(oldest).Seconds(), 0)
		}
	}
	if ss.State == StreamConnecting {
		ls, ok := links[ss.Peer]
		switch {
		case ok && ls.State == LinkDown:
			ss.State = StreamDisconnected
			if ss.LastError == "" || ls.LastErrorAt.After(lastErrAt) {
				ss.LastError = "link down: " + ls.LastError
				ss.LastErrorAt = timePtr(ls.LastErrorAt)
			}
		case ok && ls.State == LinkUp && ss.LagMessages > 0 && now.Sub(since) > s.e.cfg.StallAfter:
			// The link is up but the destination has not taken the stream: as stuck as a
			// stream that stopped acknowledging.
			ss.State = StreamStalled
			ss.LastError = fmt.Sprintf("the link to %s is up but %s has not accepted the stream for %v", ss.Peer, ss.Peer, now.Sub(since).Round(time.Second))
		}
	}
	if ss.State == StreamActive && ss.LagMessages > 0 {
		since := ss.LastProgress
		if oldest.After(since) {
			since = oldest
		}
		if now.Sub(since) > s.e.cfg.StallAfter {
			ss.State = StreamStalled
		}
	}
	return ss
}

// PartitionStatus is the status of every stream of one partition (index -1 for a non-partitioned
// topic), for per-topic views such as Pulsar's topic stats.
func (e *Engine) PartitionStatus(topic string, index int) []StreamStatus {
	now := e.now()
	links := map[string]LinkStats{}
	if e.transport != nil {
		for _, ls := range e.transport.Stats() {
			links[ls.Peer] = ls
		}
	}
	e.mu.Lock()
	var senders []*sender
	for _, s := range e.mu.senders {
		if s.spec.topic.String() == topic && s.spec.index == index {
			senders = append(senders, s)
		}
	}
	e.mu.Unlock()
	out := make([]StreamStatus, 0, len(senders))
	for _, s := range senders {
		out = append(out, s.status(now, links))
	}
	slices.SortFunc(out, func(a, b StreamStatus) int { return cmp.Compare(a.Destination, b.Destination) })
	return out
}
