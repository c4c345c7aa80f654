package websocket

import "sync/atomic"

// Metrics is a snapshot of the front end's counters; the node exports it
// to Prometheus.
type Metrics struct {
	// Open sessions by endpoint.
	Producers, Consumers, Readers, PingPongs int64
	// Sessions counts sessions opened since start; Refused counts upgrades
	// answered with an HTTP error.
	Sessions, Refused int64
	// FramesIn and FramesOut count WebSocket messages read and written;
	// Writes counts the writes to the connections that carried them (a
	// consumer's pushed messages leave several to a write).
	FramesIn, FramesOut, Writes int64
	// Produced counts messages made durable; Delivered counts messages
	// pushed to consumers and readers; Acked counts acknowledgements.
	Produced, Delivered, Acked int64
	// BadInput counts client messages refused: undecodable JSON, bad
	// base64, oversized or binary frames.
	BadInput int64
	// DeadLettered counts messages moved to a dead-letter topic.
	DeadLettered int64
}

// counters are the live counters behind Metrics.
type counters struct {
	producers, consumers, readers, pingpongs atomic.Int64
	sessions, refused                        atomic.Int64
	framesIn, framesOut                      atomic.Int64
	writes                                   atomic.Int64
	produced, delivered, acked               atomic.Int64
	badInput, deadLettered                   atomic.Int64
}

func (c *counters) opened(kind endpoint, d int64) {
	if d > 0 {
		c.sessions.Add(1)
	}
	switch kind {
	case epProducer:
		c.producers.Add(d)
	case epConsumer:
		c.consumers.Add(d)
	case epReader:
		c.readers.Add(d)
	default:
		c.pingpongs.Add(d)
	}
}

// Metrics returns the current counters.
func (s *Server) Metrics() Metrics {
	c := &s.m
	return Metrics{
		Producers: c.producers.Load(), Consumers: c.consumers.Load(), Readers: c.readers.Load(), PingPongs: c.pingpongs.Load(),
		Sessions: c.sessions.Load(), Refused: c.refused.Load(),
		FramesIn: c.framesIn.Load(), FramesOut: c.framesOut.Load(), Writes: c.writes.Load(),
		Produced: c.produced.Load(), Delivered: c.delivered.Load(), Acked: c.acked.Load(),
		BadInput: c.badInput.Load(), DeadLettered: c.deadLettered.Load(),
	}
}
