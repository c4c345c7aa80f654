package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ternmq/tern/protocols"
)

// Backend is what the Kafka front end needs from the node.
type Backend interface {
	protocols.Broker
	protocols.ProducerIDs
	protocols.TopicConfigValidator
	protocols.GroupMembership
}

// Server serves the Kafka protocol on listeners handed to Serve.
type Server struct {
	cfg    Config
	b      Backend
	log    *slog.Logger
	ns     protocols.NamespaceName
	groups *coordinator
	// sessions are the fetch sessions (KIP-227).
	sessions *fetchSessions

	// ctx ends when Close gives up waiting: in-flight work is cancelled.
	ctx    context.Context
	cancel context.CancelFunc
	// drain ends when Close starts: long-poll fetches answer at once.
	drain      context.Context
	startDrain context.CancelFunc

	mu struct {
		sync.Mutex
		closed bool
		lns    map[net.Listener]struct{}
		conns  map[*conn]struct{}
	}
	wg    sync.WaitGroup
	stats counters
}

// New builds a server over b.
func New(cfg Config, b Backend) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ns, _ := protocols.ParseNamespace(cfg.Namespace)
	s := &Server{cfg: cfg, b: b, log: cfg.Logger.With("component", "kafka"), ns: ns}
	s.sessions = newFetchSessions(cfg.FetchSessionSlots, cfg.Now)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.drain, s.startDrain = context.WithCancel(s.ctx)
	s.mu.lns = map[net.Listener]struct{}{}
	s.mu.conns = map[*conn]struct{}{}
	s.groups = newCoordinator(s)
	if err := s.groups.load(s.ctx); err != nil {
		s.groups.close()
		s.cancel()
		return nil, fmt.Errorf("kafka: restore consumer groups: %w", err)
	}
	return s, nil
}

// Serve accepts connections on ln until Close. It returns nil after Close
// and the accept error otherwise.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.mu.lns[ln] = struct{}{}
	s.mu.Unlock()
	for {
		nc, err := protocols.Accept(ln, s.ctx.Done())
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed || s.ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("kafka: accept: %w", err)
		}
		s.mu.Lock()
		if s.mu.closed || len(s.mu.conns) >= s.cfg.MaxConnections {
			full := !s.mu.closed
			s.mu.Unlock()
			if full {
				s.log.Warn("connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max", s.cfg.MaxConnections)
			}
			_ = nc.Close()
			continue
		}
		c := newConn(s, nc)
		s.mu.conns[c] = struct{}{}
		s.stats.accepted.Add(1)
		s.stats.open.Add(1)
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

func (s *Server) dropConn(c *conn) {
	s.stats.open.Add(-1)
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Close stops accepting, stops reading new requests, lets in-flight ones
// finish and waits for every connection to end, or for ctx to expire, in
// which case in-flight work is cancelled and connections are closed.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.mu.closed = true
	for ln := range s.mu.lns {
		_ = ln.Close()
	}
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.stopReading()
	}
	// Parked JoinGroup and SyncGroup requests are answered
	// (COORDINATOR_NOT_AVAILABLE, so clients find the coordinator again)
	// and long-poll fetches return what they have.
	s.startDrain()
	s.groups.close()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("kafka: connections still open: %w", ctx.Err())
		s.cancel()
		s.mu.Lock()
		for c := range s.mu.conns {
			_ = c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
	s.cancel()
	return err
}
