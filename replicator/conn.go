package replicator

// A meshConn is one QUIC connection to a peer after a successful HELLO exchange. It owns three
// goroutines: the control-stream reader (answers PING, records PONG), the heartbeat loop (sends
// PING, closes the connection when the peer went silent, and reports the loss to the link when
// the connection ends for any reason), and the stream acceptor (one goroutine per partition
// stream the peer opens).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// PeerInfo is what a peer said about itself in HELLO.
type PeerInfo struct {
	Name   string
	Region string
	// Incarnation is random per process start of the peer: a change means the peer restarted.
	Incarnation uint64
	// Version is the link protocol version in use on the connection.
	Version uint64
}

type meshConn struct {
	t     *Transport
	l     *link
	qc    *quic.Conn
	ctrl  *quic.Stream
	ctrlR *frameReader
	ctrlW *frameWriter
	peer  PeerInfo
	// maxFrame is the peer's announced frame limit: ENTRIES we send must fit it.
	maxFrame      int
	dialedByLocal bool
	log           *slog.Logger

	ctx    context.Context // ends when the connection or the transport ends
	cancel context.CancelCauseFunc

	lastHeard atomic.Int64 // unix nanoseconds of the last control frame received
	nonce     atomic.Uint64
	started   atomic.Bool
	closeOnce sync.Once

	pingMu sync.Mutex
	pings  map[uint64]chan struct{}
}

func (t *Transport) newMeshConn(l *link, qc *quic.Conn, ctrl *quic.Stream, fr *frameReader, h helloFrame, version uint64, dialed bool) *meshConn {
	ctx, cancel := context.WithCancelCause(t.ctx)
	stop := context.AfterFunc(qc.Context(), func() { cancel(context.Cause(qc.Context())) })
	context.AfterFunc(ctx, func() { stop() })
	mc := &meshConn{
		t: t, l: l, qc: qc, ctrl: ctrl, ctrlR: fr,
		ctrlW:         &frameWriter{s: ctrl, ctr: &l.ctr},
		peer:          PeerInfo{Name: h.Node, Region: h.Region, Incarnation: h.Incarnation, Version: version},
		maxFrame:      int(h.MaxFrame),
		dialedByLocal: dialed,
		log:           t.log.With("peer", h.Node, "region", h.Region, "addr", qc.RemoteAddr().String()),
		ctx:           ctx,
		cancel:        cancel,
		pings:         make(map[uint64]chan struct{}),
	}
	mc.lastHeard.Store(time.Now().UnixNano())
	return mc
}

// dialerName is the node that dialed this connection; the both-sides-dial race keeps the
// connection whose dialer has the lower name.
func (mc *meshConn) dialerName() string {
	if mc.dialedByLocal {
		return mc.t.cfg.NodeName
	}
	return mc.peer.Name
}

// close ends the connection with a code the peer sees. reason is what the local link records;
// it is set before the QUIC close so the link reports it rather than the generic close error.
// Only the first close counts, so the peer sees the first reason given.
func (mc *meshConn) close(code ErrorCode, msg string, reason error) {
	mc.closeOnce.Do(func() {
		mc.cancel(reason)
		_ = mc.qc.CloseWithError(quic.ApplicationErrorCode(code), msg)
	})
}

// start launches the connection's goroutines once the link adopted it.
func (mc *meshConn) start() {
	if !mc.started.CompareAndSwap(false, true) {
		return
	}
	// An inbound connection may have been held while our own dial was in flight; the peer only
	// starts its heartbeats once it has our HELLO, so silence is measured from now.
	mc.lastHeard.Store(time.Now().UnixNano())
	mc.t.goFn(mc.heartbeatLoop)
	mc.t.goFn(mc.controlLoop)
	mc.t.goFn(mc.acceptLoop)
}

func (mc *meshConn) heartbeatLoop() {
	tick := time.NewTicker(mc.t.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-mc.ctx.Done():
			err := context.Cause(mc.ctx)
			if errors.Is(err, context.Canceled) {
				err = ErrClosed
			}
			// Make sure QUIC is closed whatever ended the context (a no-op after close).
			mc.close(CodeShuttingDown, "node shutting down", err)
			mc.l.post(lostEv{mc: mc, err: err})
			return
		case now := <-tick.C:
			silent := now.Sub(time.Unix(0, mc.lastHeard.Load()))
			if silent > mc.t.cfg.HeartbeatTimeout {
				mc.log.Warn("replicator: peer silent, closing link", "silent", silent.Round(time.Millisecond))
				mc.close(CodeHeartbeatTimeout, "no heartbeat", fmt.Errorf("%w for %v", ErrHeartbeatTimeout, silent.Round(time.Millisecond)))
				continue
			}
			_ = mc.ctrlW.write(mc.ctx, pingFrame{Nonce: mc.nonce.Add(1)})
		}
	}
}

func (mc *meshConn) controlLoop() {
	for {
		f, n, err := mc.ctrlR.next()
		if err != nil {
			if mc.ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrMalformedFrame) || errors.Is(err, ErrFrameTooLarge) {
				// The control stream carries liveness; without it the link cannot be trusted,
				// so a bad control frame ends the connection (partition streams only close
				// themselves).
				mc.log.Warn("replicator: malformed control frame, closing connection", "err", err)
				mc.close(CodeProtocolViolation, truncate(err.Error()), err)
				return
			}
			if err == io.EOF {
				err = errors.New("peer closed the control stream")
			}
			mc.close(CodeProtocolViolation, "control stream ended", fmt.Errorf("replicator: control stream: %w", err))
			return
		}
		mc.l.ctr.recv(n)
		mc.lastHeard.Store(time.Now().UnixNano())
		switch f := f.(type) {
		case pingFrame:
			_ = mc.ctrlW.write(mc.ctx, pongFrame(f))
		case pongFrame:
			mc.pingMu.Lock()
			if ch, ok := mc.pings[f.Nonce]; ok {
				close(ch)
				delete(mc.pings, f.Nonce)
			}
			mc.pingMu.Unlock()
		case errorFrame:
			le := &LinkError{Code: f.Code, Message: f.Message, Remote: true}
			mc.log.Warn("replicator: peer reported a link error", "err", le)
			mc.close(f.Code, "acknowledged", le)
			return
		default:
			err := fmt.Errorf("%w: unexpected %s frame on the control stream", ErrMalformedFrame, f.frameType())
			mc.log.Warn("replicator: closing connection", "err", err)
			mc.close(CodeProtocolViolation, err.Error(), err)
			return
		}
	}
}

// ping measures one application-level round trip over the control stream.
func (mc *meshConn) ping(ctx context.Context) (time.Duration, error) {
	n := mc.nonce.Add(1)
	ch := make(chan struct{})
	mc.pingMu.Lock()
	mc.pings[n] = ch
	mc.pingMu.Unlock()
	defer func() {
		mc.pingMu.Lock()
		delete(mc.pings, n)
		mc.pingMu.Unlock()
	}()
	start := time.Now()
	if err := mc.ctrlW.write(ctx, pingFrame{Nonce: n}); err != nil {
		return 0, err
	}
	select {
	case <-ch:
		return time.Since(start), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-mc.ctx.Done():
		return 0, fmt.Errorf("replicator: link to %s lost: %w", mc.peer.Name, context.Cause(mc.ctx))
	}
}

func (mc *meshConn) acceptLoop() {
	for {
		s, err := mc.qc.AcceptStream(mc.ctx)
		if err != nil {
			return
		}
		if !mc.t.enter() {
			s.CancelRead(quic.StreamErrorCode(CodeShuttingDown))
			s.CancelWrite(quic.StreamErrorCode(CodeShuttingDown))
			return
		}
		go func() {
			defer mc.t.wg.Done()
			mc.serveStream(s)
		}()
	}
}

// serveStream reads a new stream's OPEN and hands the stream to the handler.
func (mc *meshConn) serveStream(s *quic.Stream) {
	cfg := &mc.t.cfg
	log := mc.log.With("stream", int64(s.StreamID()))
	w := &frameWriter{s: s, ctr: &mc.l.ctr}
	refuse := func(code ErrorCode, msg string) {
		log.Warn("replicator: refusing stream", "code", code, "reason", msg)
		_ = w.write(mc.ctx, errorFrame{Code: code, Message: truncate(msg)})
		w.closeStream()
		s.CancelRead(quic.StreamErrorCode(code))
	}
	_ = s.SetReadDeadline(time.Now().Add(cfg.HandshakeTimeout))
	fr := newFrameReader(s, cfg.MaxFrameBytes)
	f, n, err := fr.next()
	_ = s.SetReadDeadline(time.Time{})
	mc.l.ctr.recv(n)
	if err != nil {
		if errors.Is(err, ErrMalformedFrame) || errors.Is(err, ErrFrameTooLarge) {
			refuse(CodeProtocolViolation, err.Error())
			return
		}
		if mc.ctx.Err() == nil {
			log.Warn("replicator: stream ended before OPEN", "err", err)
		}
		s.CancelRead(quic.StreamErrorCode(CodeProtocolViolation))
		s.CancelWrite(quic.StreamErrorCode(CodeProtocolViolation))
		return
	}
	open, ok := f.(openFrame)
	if !ok {
		refuse(CodeProtocolViolation, fmt.Sprintf("a partition stream must start with OPEN, got %s", f.frameType()))
		return
	}
	req := open.Req
	if req.DestRegion != cfg.Region {
		refuse(CodeWrongRegion, fmt.Sprintf("node %s serves region %q, not %q: the sender's membership view is stale or a node is misconfigured",
			cfg.NodeName, cfg.Region, req.DestRegion))
		return
	}
	if mc.t.handler == nil {
		refuse(CodeNoReceiver, fmt.Sprintf("node %s accepts no replication streams", cfg.NodeName))
		return
	}
	rs := newRecvStream(mc, s, fr, w, req, log.With("topic", req.Topic, "partition", req.Partition))
	rs.start()
	herr := mc.t.handler.Accept(rs.ctx, rs)
	rs.finish(herr)
}

// dialPeer dials p and runs the HELLO exchange as the initiating side.
func (t *Transport) dialPeer(ctx context.Context, l *link, p Peer) (*meshConn, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	addr, err := net.ResolveUDPAddr("udp", p.Addr)
	if err != nil {
		return nil, fmt.Errorf("replicator: resolve %s address %q: %w", p.Name, p.Addr, err)
	}
	qc, err := t.qt.Dial(ctx, addr, t.tls.clientConfig(), t.quicConf)
	if err != nil {
		return nil, fmt.Errorf("replicator: dial %s at %s: %w", p.Name, p.Addr, err)
	}
	fail := func(code ErrorCode, err error) (*meshConn, error) {
		_ = qc.CloseWithError(quic.ApplicationErrorCode(code), truncate(err.Error()))
		return nil, err
	}
	ctrl, err := qc.OpenStreamSync(ctx)
	if err != nil {
		return fail(CodeInternal, fmt.Errorf("replicator: open control stream to %s: %w", p.Name, err))
	}
	w := &frameWriter{s: ctrl, ctr: &l.ctr}
	if err := w.write(ctx, t.hello(ProtocolVersionMin, ProtocolVersionMax)); err != nil {
		return fail(CodeInternal, fmt.Errorf("replicator: send HELLO to %s: %w", p.Name, err))
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = ctrl.SetReadDeadline(dl)
	}
	fr := newFrameReader(ctrl, maxControlPayload)
	f, n, err := fr.next()
	_ = ctrl.SetReadDeadline(time.Time{})
	l.ctr.recv(n)
	if err != nil {
		return fail(CodeProtocolViolation, fmt.Errorf("replicator: read HELLO from %s: %w", p.Name, err))
	}
	switch f := f.(type) {
	case errorFrame:
		return fail(f.Code, &LinkError{Code: f.Code, Message: f.Message, Remote: true})
	case helloFrame:
		if f.MinVersion != f.MaxVersion || f.MinVersion < ProtocolVersionMin || f.MinVersion > ProtocolVersionMax {
			return fail(CodeIncompatibleVersion, &LinkError{Code: CodeIncompatibleVersion,
				Message: fmt.Sprintf("peer %s chose link protocol version %d..%d, this node speaks %d..%d",
					f.Node, f.MinVersion, f.MaxVersion, ProtocolVersionMin, ProtocolVersionMax)})
		}
		if f.Node != p.Name {
			return fail(CodeRejected, fmt.Errorf("%w: dialed %s at %s but node %s answered", ErrPeerMismatch, p.Name, p.Addr, f.Node))
		}
		mc := t.newMeshConn(l, qc, ctrl, fr, f, f.MinVersion, true)
		mc.ctrlW = w
		if p.Region != "" && p.Region != f.Region {
			mc.log.Warn("replicator: peer reports a different region than the membership data", "expected_region", p.Region)
		}
		return mc, nil
	default:
		return fail(CodeProtocolViolation, fmt.Errorf("%w: %s answered HELLO with %s", ErrMalformedFrame, p.Name, f.frameType()))
	}
}

func (t *Transport) hello(minV, maxV uint64) helloFrame {
	return helloFrame{
		MinVersion: minV, MaxVersion: maxV,
		Node: t.cfg.NodeName, Region: t.cfg.Region,
		MaxFrame:    uint64(t.cfg.MaxFrameBytes),
		Incarnation: t.incarnation,
	}
}

// serveInbound runs the HELLO exchange as the accepting side and hands the connection to the
// peer's link.
func (t *Transport) serveInbound(qc *quic.Conn) {
	log := t.log.With("addr", qc.RemoteAddr().String())
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	refuse := func(code ErrorCode, msg string) {
		log.Warn("replicator: refusing connection", "code", code, "reason", msg)
		_ = qc.CloseWithError(quic.ApplicationErrorCode(code), truncate(msg))
	}
	ctrl, err := qc.AcceptStream(ctx)
	if err != nil {
		refuse(CodeProtocolViolation, fmt.Sprintf("no control stream within %v: %v", t.cfg.HandshakeTimeout, err))
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = ctrl.SetReadDeadline(dl)
	}
	fr := newFrameReader(ctrl, maxControlPayload)
	f, _, err := fr.next()
	_ = ctrl.SetReadDeadline(time.Time{})
	if err != nil {
		refuse(CodeProtocolViolation, fmt.Sprintf("reading HELLO: %v", err))
		return
	}
	h, ok := f.(helloFrame)
	if !ok {
		refuse(CodeProtocolViolation, fmt.Sprintf("the control stream must start with HELLO, got %s", f.frameType()))
		return
	}
	w := &frameWriter{s: ctrl}
	sendErr := func(code ErrorCode, msg string) {
		log.Warn("replicator: refusing connection", "peer", h.Node, "code", code, "reason", msg)
		_ = w.write(ctx, errorFrame{Code: code, Message: truncate(msg)})
		w.closeStream()
		// Give the ERROR frame a moment to leave before the connection close overtakes it:
		// wait for the peer to close (it does on reading ERROR) or the handshake deadline.
		select {
		case <-qc.Context().Done():
		case <-ctx.Done():
		}
		_ = qc.CloseWithError(quic.ApplicationErrorCode(code), truncate(msg))
	}
	version := min(h.MaxVersion, uint64(ProtocolVersionMax))
	if version < h.MinVersion || version < ProtocolVersionMin {
		sendErr(CodeIncompatibleVersion, fmt.Sprintf("node %s speaks link protocol versions %d..%d, %s offered %d..%d: run tern releases with overlapping versions",
			t.cfg.NodeName, ProtocolVersionMin, ProtocolVersionMax, h.Node, h.MinVersion, h.MaxVersion))
		return
	}
	if h.Node == t.cfg.NodeName {
		sendErr(CodeNameConflict, fmt.Sprintf("node name %q is already used by the node at %s: give every node a unique name",
			h.Node, qc.LocalAddr()))
		return
	}
	l, err := t.linkFor(h.Node, h.Region)
	if err != nil {
		refuse(CodeShuttingDown, err.Error())
		return
	}
	mc := t.newMeshConn(l, qc, ctrl, fr, h, version, false)
	w.ctr = &l.ctr
	mc.ctrlW = w
	if !l.offer(ctx, mc) {
		sendErr(CodeDuplicateConnection, fmt.Sprintf("already connected to %s over the connection dialed by %s", t.cfg.NodeName, l.currentDialer()))
		// If offer gave up on its deadline just as the link adopted the connection, the
		// connection's loops must still run to report its end to the link.
		mc.start()
		return
	}
	if err := w.write(ctx, t.hello(version, version)); err != nil {
		mc.close(CodeInternal, "HELLO failed", fmt.Errorf("replicator: send HELLO to %s: %w", h.Node, err))
	}
	mc.start()
}

func truncate(s string) string {
	if len(s) > maxMessageLength {
		return s[:maxMessageLength]
	}
	return s
}
