package pulsar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ternmq/tern/protocols"
)

// Server is the Pulsar binary protocol front end: it accepts connections
// and serves each with the command handlers of this package (cmd_*.go),
// reaching the node only through protocols.Messaging.
//
// Per connection one goroutine reads and handles commands in order, one
// writes (coalescing every frame queued since its last write into one
// write), and one waits for appends to become durable and queues their
// receipts in the order the SENDs arrived. Handlers never block on the
// network: they queue frames for the writer.
type Server struct {
	cfg    Config
	b      protocols.Messaging
	codec  *Codec
	log    *slog.Logger
	nextID uint64
	stats  counters

	mu struct {
		sync.Mutex
		ln      net.Listener
		conns   map[*conn]struct{}
		closing bool
	}
	wg sync.WaitGroup
}

// Config configures the Pulsar front end.
type Config struct {
	// MaxMessageSize is the largest message (metadata plus payload) a
	// client may send, announced in CONNECTED. Default 5 MiB.
	MaxMessageSize int
	// MaxConnections bounds open connections; more are closed at once.
	// Default 10000.
	MaxConnections int
	// MaxInflightBytes bounds the SEND bytes of one connection waiting to
	// become durable; past it the connection is not read until appends
	// complete. Default 64 MiB.
	MaxInflightBytes int
	// KeepAliveInterval is how often an idle connection is pinged; one
	// that stays silent for twice as long is closed. Default 30s.
	KeepAliveInterval time.Duration
	// HandshakeTimeout bounds the wait for CONNECT. Default 10s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds one write to a client. Default 30s.
	WriteTimeout time.Duration
	// ServerVersion is announced in CONNECTED. Default "tern".
	ServerVersion string
	// AutoCreateTopics creates a non-partitioned topic when a producer or
	// consumer names one that does not exist, as Pulsar does by default.
	// Default true.
	AutoCreateTopics bool
	// StoreCompressed keeps a compressed SEND compressed in the log, with
	// the Kafka codec of the same family (LZ4 -> lz4, ZLIB -> gzip, ZSTD ->
	// zstd, SNAPPY -> snappy), so disk use follows the producer's choice.
	// When false every entry is stored uncompressed, which is cheaper to
	// produce and to read back. Default true.
	StoreCompressed bool
	// Logger receives connection-level events. Default slog.Default().
	Logger *slog.Logger
	// ObservePublish, if set, is told each appended SEND's time from its
	// frame being read to its receipt being queued for the writer: the
	// broker's publish latency, with the fsync under sync durability. It
	// runs on the connection's receipt goroutine and must not block.
	ObservePublish func(d time.Duration)
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		MaxMessageSize:    DefaultMaxMessageSize,
		MaxConnections:    10000,
		MaxInflightBytes:  64 << 20,
		KeepAliveInterval: 30 * time.Second,
		HandshakeTimeout:  10 * time.Second,
		WriteTimeout:      30 * time.Second,
		ServerVersion:     "tern",
		AutoCreateTopics:  true,
		StoreCompressed:   true,
	}
}

// Validate reports every problem at once, naming the field.
func (c Config) Validate() error {
	var errs []error
	if c.MaxMessageSize < 1024 || c.MaxMessageSize > 1<<30 {
		errs = append(errs, fmt.Errorf("MaxMessageSize %d: want 1 KiB to 1 GiB", c.MaxMessageSize))
	}
	if c.MaxConnections <= 0 {
		errs = append(errs, fmt.Errorf("MaxConnections %d: want a positive number", c.MaxConnections))
	}
	if c.MaxInflightBytes < c.MaxMessageSize {
		errs = append(errs, fmt.Errorf("MaxInflightBytes %d is below MaxMessageSize %d; raise it", c.MaxInflightBytes, c.MaxMessageSize))
	}
	if c.KeepAliveInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("KeepAliveInterval %v: want at least 100ms", c.KeepAliveInterval))
	}
	if c.HandshakeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("HandshakeTimeout %v: want a positive duration", c.HandshakeTimeout))
	}
	if c.WriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("WriteTimeout %v: want a positive duration", c.WriteTimeout))
	}
	return errors.Join(errs...)
}

// NewServer returns a server for the node b.
func NewServer(cfg Config, b protocols.Messaging) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pulsar: config: %w", err)
	}
	cc := DefaultCodecConfig()
	cc.MaxFrameSize = cfg.MaxMessageSize + FramePadding
	// A client never sends more than max_message_size uncompressed (it
	// chunks or fails larger messages), so a SEND that announces more is
	// refused before anything of that size is allocated.
	cc.MaxUncompressedSize = cfg.MaxMessageSize
	codec, err := NewCodec(cc)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, b: b, codec: codec, log: cfg.Logger}
	s.mu.conns = map[*conn]struct{}{}
	return s, nil
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.mu.ln = ln
	s.mu.Unlock()
	for {
		// Close closes ln: the next Accept fails, at most a second later
		// when it is pausing after transient failures.
		nc, err := protocols.Accept(ln, nil)
		if err != nil {
			s.mu.Lock()
			closing := s.mu.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			return fmt.Errorf("pulsar: accept: %w", err)
		}
		s.mu.Lock()
		if s.mu.closing || len(s.mu.conns) >= s.cfg.MaxConnections {
			full := !s.mu.closing
			s.mu.Unlock()
			if full {
				s.log.Warn("connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max", s.cfg.MaxConnections)
			}
			_ = nc.Close()
			continue
		}
		s.nextID++
		s.stats.accepted.Add(1)
		c := newConn(s, nc, s.nextID)
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.mu.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, lets in-flight sends finish and answers them, closes
// every connection and waits for them, or for ctx.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.mu.closing = true
	if s.mu.ln != nil {
		_ = s.mu.ln.Close()
	}
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.stopReading()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		for _, c := range conns {
			c.abort()
		}
		<-done
		err = ctx.Err()
	}
	return errors.Join(err, s.codec.Close())
}
