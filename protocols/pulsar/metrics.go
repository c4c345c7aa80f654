package pulsar

import (
	"sync/atomic"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// Metrics is a snapshot of the front end's figures. The node adapts it to
// Prometheus; this package does not export metrics itself.
type Metrics struct {
	// OpenConnections are connected now; Connections were accepted since
	// start.
	OpenConnections int64
	Connections     int64
	// ProtocolErrors counts connections closed for a bad frame or a
	// command that breaks the protocol.
	ProtocolErrors int64
	// Producers and Consumers are attached now, over every connection.
	Producers int64
	Consumers int64
	// Commands counts commands received, by type (CONNECT, SEND, ACK...).
	Commands map[string]int64
	// PublishedEntries are SENDs appended to the log, PublishedMessages
	// their messages (resends found to be duplicates excluded).
	PublishedEntries  int64
	PublishedMessages int64
	// DispatchedMessages were sent to consumers in MESSAGE frames.
	DispatchedMessages int64
	// HeldConsumers counts the times a consumer with permits was sent
	// nothing more because its connection's queue of unsent deliveries
	// was full, until the connection wrote it down.
	HeldConsumers int64
	// QueuedBytes is what deliveries queued on every connection and not
	// yet encoded hold: each connection's is bounded near 4 MiB.
	QueuedBytes int64
}

// maxCommand bounds the command types counted per type.
const maxCommand = 128

type counters struct {
	accepted, protocolErrors atomic.Int64
	commands                 [maxCommand]atomic.Int64
	entries, messages, out   atomic.Int64
	held                     atomic.Int64
}

func (s *counters) command(t pb.BaseCommand_Type) {
	if t >= 0 && t < maxCommand {
		s.commands[t].Add(1)
	}
}

// Metrics returns the current figures.
func (s *Server) Metrics() Metrics {
	m := Metrics{
		Connections:        s.stats.accepted.Load(),
		ProtocolErrors:     s.stats.protocolErrors.Load(),
		Commands:           map[string]int64{},
		PublishedEntries:   s.stats.entries.Load(),
		PublishedMessages:  s.stats.messages.Load(),
		DispatchedMessages: s.stats.out.Load(),
		HeldConsumers:      s.stats.held.Load(),
	}
	for t := range s.stats.commands {
		if v := s.stats.commands[t].Load(); v > 0 {
			m.Commands[pb.BaseCommand_Type(t).String()] = v
		}
	}
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	m.OpenConnections = int64(len(conns))
	for _, c := range conns {
		c.mu.Lock()
		m.Producers += int64(len(c.mu.producers))
		m.Consumers += int64(len(c.mu.consumers))
		m.QueuedBytes += c.outBytes.Load()
		c.mu.Unlock()
	}
	return m
}
