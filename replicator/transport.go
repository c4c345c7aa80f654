package replicator

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// Transport is this node's end of the replication mesh: one UDP socket, one QUIC endpoint that
// both listens and dials, and one link per remote node. The replication logic opens partition
// streams to peers with OpenPartitionStream and receives them through its Handler.
type Transport struct {
	cfg         Config
	log         *slog.Logger
	handler     Handler
	tls         *meshTLS
	quicConf    *quic.Config
	pc          net.PacketConn
	qt          *quic.Transport
	ln          *quic.Listener
	incarnation uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		links  map[string]*link
	}
}

// Handler receives the partition streams peers open to this node. Accept runs on its own
// goroutine per stream and owns the stream until it returns; ctx ends when the stream, its
// connection or the transport ends, and Accept must return then (Close waits for it). Returning
// nil ends the stream normally; returning an error sends it to the sender as an ERROR frame,
// with the code of a *LinkError or CodeRejected otherwise.
type Handler interface {
	Accept(ctx context.Context, s *RecvStream) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, s *RecvStream) error

// Accept calls f.
func (f HandlerFunc) Accept(ctx context.Context, s *RecvStream) error { return f(ctx, s) }

// New listens on cfg.ListenAddr and starts the transport. h may be nil for a node that only
// sends; streams opened to it are then refused with CodeNoReceiver.
func New(cfg Config, h Handler) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pc, err := net.ListenPacket("udp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("replicator: listen on ListenAddr %q: %w", cfg.ListenAddr, err)
	}
	t, err := NewWithConn(cfg, h, pc)
	if err != nil {
		_ = pc.Close()
		return nil, err
	}
	return t, nil
}

// NewWithConn starts the transport on a socket the caller made, for example a SeverableConn in
// tests that cut links. cfg.ListenAddr is ignored. The transport owns pc from now on and closes
// it in Close (also when NewWithConn fails).
func NewWithConn(cfg Config, h Handler, pc net.PacketConn) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		_ = pc.Close()
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	mt, err := loadMeshTLS(cfg)
	if err != nil {
		_ = pc.Close()
		return nil, err
	}
	resetKey, err := mt.statelessResetKey(cfg.NodeName)
	if err != nil {
		_ = pc.Close()
		return nil, err
	}
	var inc [8]byte
	_, _ = rand.Read(inc[:])
	t := &Transport{
		cfg:         cfg,
		log:         cfg.Logger.With("node", cfg.NodeName),
		handler:     h,
		tls:         mt,
		pc:          pc,
		incarnation: binary.BigEndian.Uint64(inc[:]),
	}
	t.mu.links = make(map[string]*link)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.quicConf = cfg.quicConfig()
	srk := quic.StatelessResetKey(resetKey)
	t.qt = &quic.Transport{Conn: pc, StatelessResetKey: &srk, ConnContext: t.connContext}
	t.ln, err = t.qt.Listen(mt.serverConfig(), t.quicConf)
	if err != nil {
		_ = t.qt.Close()
		_ = pc.Close()
		t.cancel()
		return nil, fmt.Errorf("replicator: start QUIC listener: %w", err)
	}
	t.goFn(t.acceptLoop)
	t.log.Info("replicator: mesh transport listening", "addr", pc.LocalAddr().String(), "region", cfg.Region)
	return t, nil
}

// Addr is the local UDP address, what peers dial (with the host the membership layer advertises).
func (t *Transport) Addr() net.Addr { return t.pc.LocalAddr() }

// NodeName is this node's name in the mesh.
func (t *Transport) NodeName() string { return t.cfg.NodeName }

// enter registers a goroutine with the transport, or refuses once Close started, so that
// Close's Wait never races with an Add.
func (t *Transport) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// goFn runs fn on a goroutine Close waits for; false if the transport is closing.
func (t *Transport) goFn(fn func()) bool {
	if !t.enter() {
		return false
	}
	go func() {
		defer t.wg.Done()
		fn()
	}()
	return true
}

type probeKey struct{}

// inboundProbe follows one inbound connection attempt so a failed handshake can be logged:
// quic-go never hands such a connection to Accept, but it ends the context made here with the
// reason (a bad or missing client certificate, a foreign CA, a wrong ALPN).
type inboundProbe struct {
	accepted atomic.Bool
}

func (t *Transport) connContext(ctx context.Context, info *quic.ClientInfo) (context.Context, error) {
	p := &inboundProbe{}
	ctx = context.WithValue(ctx, probeKey{}, p)
	remote := info.RemoteAddr.String()
	context.AfterFunc(ctx, func() {
		if p.accepted.Load() || !t.enter() {
			return
		}
		defer t.wg.Done()
		t.log.Warn("replicator: refused incoming connection during the TLS handshake",
			"addr", remote, "err", context.Cause(ctx))
	})
	return ctx, nil
}

func (t *Transport) acceptLoop() {
	for {
		qc, err := t.ln.Accept(t.ctx)
		if err != nil {
			if t.ctx.Err() == nil {
				t.log.Error("replicator: accept loop stopped", "err", err)
			}
			return
		}
		if p, ok := qc.Context().Value(probeKey{}).(*inboundProbe); ok {
			p.accepted.Store(true)
		}
		if !t.goFn(func() { t.serveInbound(qc) }) {
			_ = qc.CloseWithError(quic.ApplicationErrorCode(CodeShuttingDown), "node shutting down")
			return
		}
	}
}

// AddPeer tells the transport about a remote node, or updates its region and address; the
// transport keeps a link to it and dials it when it has an address. The membership layer calls
// this on join and on tag updates.
func (t *Transport) AddPeer(p Peer) error {
	if err := checkName("Peer.Name", p.Name); err != nil {
		return err
	}
	if p.Name == t.cfg.NodeName {
		return fmt.Errorf("replicator: peer %q has this node's own name", p.Name)
	}
	if p.Addr != "" {
		if _, _, err := net.SplitHostPort(p.Addr); err != nil {
			return fmt.Errorf("replicator: peer %s address %q is not host:port: %w", p.Name, p.Addr, err)
		}
	}
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	l, ok := t.mu.links[p.Name]
	if !ok {
		l = newLink(t, p)
		t.mu.links[p.Name] = l
		t.wg.Add(1)
		go func() { defer t.wg.Done(); l.run() }()
		t.mu.Unlock()
		return nil
	}
	t.mu.Unlock()
	l.post(peerEv{p: p})
	return nil
}

// RemovePeer drops the link to a node that left the mesh, closing its connection. A node that
// connects again later gets a new, passive link.
func (t *Transport) RemovePeer(name string) {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return // Close stops every link
	}
	l, ok := t.mu.links[name]
	if ok {
		delete(t.mu.links, name)
	}
	t.mu.Unlock()
	if ok {
		close(l.stop)
		<-l.done
	}
}

// linkFor returns the link for an inbound connection's node, creating a passive one (no address,
// never dialed) for a node nobody told us about yet.
func (t *Transport) linkFor(name, region string) (*link, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil, ErrClosed
	}
	l, ok := t.mu.links[name]
	if !ok {
		l = newLink(t, Peer{Name: name, Region: region})
		t.mu.links[name] = l
		t.wg.Add(1)
		go func() { defer t.wg.Done(); l.run() }()
	}
	return l, nil
}

func (t *Transport) link(name string) (*link, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil, ErrClosed
	}
	l, ok := t.mu.links[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (add it with AddPeer)", ErrUnknownPeer, name)
	}
	return l, nil
}

// OpenPartitionStream opens a stream for one replicated partition to a peer, waiting (until
// ctx ends) for the link to be up, and returns once the receiver answered the OPEN: with its
// first ACK or CREDIT (the stream is accepted), or with an ERROR (returned as a *LinkError with
// Remote set, e.g. CodePartitionCountMismatch).
func (t *Transport) OpenPartitionStream(ctx context.Context, peer string, req OpenRequest) (*SendStream, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	l, err := t.link(peer)
	if err != nil {
		return nil, err
	}
	mc, err := l.waitConn(ctx)
	if err != nil {
		return nil, err
	}
	qs, err := mc.qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("replicator: open stream to %s: %w", peer, err)
	}
	ss := newSendStream(mc, qs, req)
	if err := ss.start(ctx); err != nil {
		return nil, err
	}
	return ss, nil
}

// Ping measures one round trip to a peer over the link's control stream.
func (t *Transport) Ping(ctx context.Context, peer string) (time.Duration, error) {
	l, err := t.link(peer)
	if err != nil {
		return 0, err
	}
	mc, err := l.waitConn(ctx)
	if err != nil {
		return 0, err
	}
	return mc.ping(ctx)
}

// Stats returns a snapshot of every link, sorted by peer name.
func (t *Transport) Stats() []LinkStats {
	t.mu.Lock()
	links := make([]*link, 0, len(t.mu.links))
	for _, l := range t.mu.links {
		links = append(links, l)
	}
	t.mu.Unlock()
	out := make([]LinkStats, 0, len(links))
	for _, l := range links {
		out = append(out, l.stats())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer < out[j].Peer })
	return out
}

// LinkStats returns the snapshot of one link.
func (t *Transport) LinkStats(peer string) (LinkStats, bool) {
	t.mu.Lock()
	l, ok := t.mu.links[peer]
	t.mu.Unlock()
	if !ok {
		return LinkStats{}, false
	}
	return l.stats(), true
}

// Close closes every connection (peers see CodeShuttingDown), ends every stream, and waits for
// every goroutine the transport started, including running Handler calls.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.closed = true
	links := make([]*link, 0, len(t.mu.links))
	for _, l := range t.mu.links {
		links = append(links, l)
	}
	t.mu.Unlock()

	for _, l := range links {
		close(l.stop)
	}
	for _, l := range links {
		<-l.done
	}
	t.cancel()
	errs := []error{t.ln.Close()}
	t.wg.Wait()
	errs = append(errs, t.qt.Close(), t.pc.Close())
	for i, err := range errs {
		if errors.Is(err, net.ErrClosed) {
			errs[i] = nil // quic-go closes the socket it was given
		}
	}
	return errors.Join(errs...)
}

func (c Config) quicConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           c.HandshakeTimeout / 2, // quic-go allows twice this for the whole handshake
		MaxIdleTimeout:                 c.IdleTimeout,
		KeepAlivePeriod:                c.KeepAlivePeriod,
		InitialStreamReceiveWindow:     c.InitialStreamReceiveWindow,
		MaxStreamReceiveWindow:         c.MaxStreamReceiveWindow,
		InitialConnectionReceiveWindow: c.InitialConnectionReceiveWindow,
		MaxConnectionReceiveWindow:     c.MaxConnectionReceiveWindow,
		MaxIncomingStreams:             c.MaxIncomingStreams,
		MaxIncomingUniStreams:          -1,
	}
}
