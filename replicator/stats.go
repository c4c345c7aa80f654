package replicator

import "time"

// LinkStats is a plain snapshot of one link for the admin API, the CLI and metrics adapters.
type LinkStats struct {
	Peer   string
	Region string
	// Addr is the address the link dials; empty for a peer that only connects to us.
	Addr  string
	State LinkState
	// Since is when the link entered State.
	Since time.Time
	// LastError is the most recent failure (dial, handshake, loss), kept after recovery so
	// an operator sees why the link flapped; LastErrorAt says when.
	LastError   string
	LastErrorAt time.Time
	// DialedByLocal says which side dialed the current connection (meaningful while up).
	DialedByLocal bool
	// PeerIncarnation changes when the peer process restarted.
	PeerIncarnation uint64
	// Connects counts how often the link came up (including connection replacements).
	Connects uint64
	// Streams is the number of partition streams open on the link, both directions.
	Streams int64
	// Link-protocol traffic (frame headers included) over the link's lifetime.
	BytesSent, BytesReceived, FramesSent, FramesReceived uint64
	// SmoothedRTT, MinRTT and LatestRTT are QUIC's estimates for the current connection;
	// zero while down.
	SmoothedRTT, MinRTT, LatestRTT time.Duration
	// PacketsLost is QUIC's count for the current connection.
	PacketsLost uint64
}

func (l *link) stats() LinkStats {
	l.mu.Lock()
	s := LinkStats{
		Peer:     l.name,
		Region:   l.mu.peer.Region,
		Addr:     l.mu.peer.Addr,
		State:    l.mu.state,
		Since:    l.mu.since,
		Connects: l.mu.connects,
		Streams:  l.mu.streams,
	}
	if l.mu.lastErr != nil {
		s.LastError = l.mu.lastErr.Error()
		s.LastErrorAt = l.mu.lastErrAt
	}
	cur := l.mu.cur
	l.mu.Unlock()
	if cur != nil {
		s.DialedByLocal = cur.dialedByLocal
		s.PeerIncarnation = cur.peer.Incarnation
		if s.Region == "" {
			s.Region = cur.peer.Region
		}
		qs := cur.qc.ConnectionStats()
		s.SmoothedRTT, s.MinRTT, s.LatestRTT = qs.SmoothedRTT, qs.MinRTT, qs.LatestRTT
		s.PacketsLost = qs.PacketsLost
	}
	s.BytesSent = l.ctr.bytesSent.Load()
	s.BytesReceived = l.ctr.bytesRecv.Load()
	s.FramesSent = l.ctr.framesSent.Load()
	s.FramesReceived = l.ctr.framesRecv.Load()
	return s
}

func (l *link) streamDelta(d int64) {
	l.mu.Lock()
	l.mu.streams += d
	l.mu.Unlock()
}
