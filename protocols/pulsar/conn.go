package pulsar

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// conn is one client connection.
//
// The reader goroutine (serve) owns the decoding state and handles commands
// in arrival order. Frames to the client go through an unbounded queue to
// the writer goroutine: handlers, the receipt goroutine and subscription
// goroutines (deliveries) queue and never wait for the network. The queue
// is bounded in practice by permits (deliveries) and by MaxInflightBytes
// (receipts).
type conn struct {
	s      *Server
	nc     net.Conn
	id     uint64
	log    *slog.Logger
	fr     *FrameReader
	remote string

	// Negotiated in CONNECT.
	version   int32
	entryMeta bool

	out struct {
		sync.Mutex
		items  []outItem
		closed bool
	}
	outSig     chan struct{}
	writerDone chan struct{}
	// outBytes is what the queued deliveries hold (their messages' bytes
	// and a frame's worth of metadata each), which bounds dispatch to
	// this connection (consumerState.Full); starving says a consumer
	// was refused for it and waits for the writer's Flow(0).
	outBytes atomic.Int64
	starving atomic.Bool

	receipts     chan receiptItem
	receiptsDone chan struct{}
	inflight     atomic.Int64
	drained      chan struct{}

	lastRead  atomic.Int64 // Unix ns
	stopping  atomic.Bool
	aborted   chan struct{}
	abortOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc

	mu struct {
		sync.Mutex
		producers map[uint64]*producer
		consumers map[uint64]*consumerState
	}

	// Reader-goroutine state, reused across frames.
	cmd  pb.BaseCommand
	send sendScratch
}

// outItem is one frame to write: a command, or a delivery encoded as
// MESSAGE by the writer.
type outItem struct {
	cmd *pb.BaseCommand
	msg *outMessage
}

// receiptItem is one answer that must keep SEND order: an append to wait
// for, or a command to queue once every earlier append is answered.
type receiptItem struct {
	pending   protocols.PendingProduce
	producer  *producer
	seq       uint64
	highest   uint64
	size      int64
	read      int64 // when the SEND's frame was read, Unix ns
	cmd       *pb.BaseCommand
	onWritten func()
}

func newConn(s *Server, nc net.Conn, id uint64) *conn {
	c := &conn{
		s: s, nc: nc, id: id,
		remote:       nc.RemoteAddr().String(),
		outSig:       make(chan struct{}, 1),
		writerDone:   make(chan struct{}),
		receipts:     make(chan receiptItem, 4096),
		receiptsDone: make(chan struct{}),
		drained:      make(chan struct{}, 1),
		aborted:      make(chan struct{}),
	}
	c.log = s.log.With("conn", id, "remote", c.remote)
	c.fr = s.codec.NewFrameReader(nc)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.producers = map[uint64]*producer{}
	c.mu.consumers = map[uint64]*consumerState{}
	c.lastRead.Store(time.Now().UnixNano())
	return c
}

// serve runs the connection to its end.
func (c *conn) serve() {
	go c.writer()
	go c.receipter()
	defer c.teardown()
	if err := c.handshake(); err != nil {
		c.handshakeFailed(err)
		return
	}
	for {
		payload, err := c.fr.ReadCommand(&c.cmd)
		if err != nil {
			var ce *ChecksumError
			if errors.As(err, &ce) && c.cmd.GetType() == pb.BaseCommand_SEND {
				c.lastRead.Store(time.Now().UnixNano())
				c.sendChecksumError(c.cmd.GetSend(), ce)
				continue
			}
			c.readFailed(err)
			return
		}
		c.lastRead.Store(time.Now().UnixNano())
		c.s.stats.command(c.cmd.GetType())
		if err := c.handle(&c.cmd, payload); err != nil {
			c.s.stats.protocolErrors.Add(1)
			c.log.Warn("closing the connection", "command", c.cmd.GetType().String(), "err", err)
			return
		}
	}
}

// handshakeFailed counts and logs a connection that never completed its
// CONNECT: a frame that is not Pulsar's, or another first command, is a
// protocol error (often a client of another protocol, or TLS, pointed at
// this port); a connection closed or silent before it is not (a TCP
// health check, a port scan).
func (c *conn) handshakeFailed(err error) {
	var ne net.Error
	switch {
	case c.stopping.Load() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
	case errors.As(err, &ne) && ne.Timeout():
		c.log.Debug("closing a connection that sent no CONNECT in time", "timeout", c.s.cfg.HandshakeTimeout)
	default:
		c.s.stats.protocolErrors.Add(1)
		c.log.Warn("closing a connection that did not start with a Pulsar CONNECT; is a client of another protocol, or TLS, pointed at the Pulsar port?", "err", err)
	}
}

// readFailed logs why reading stopped, unless it is an ordinary end.
func (c *conn) readFailed(err error) {
	if c.stopping.Load() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// The client closed the connection in the middle of a frame: the
		// Go client does so on a SEND_ERROR while it is still writing the
		// SENDs behind the one refused.
		c.log.Debug("the client closed the connection inside a frame", "err", err)
		return
	}
	var ne net.Error
	if errors.As(err, &ne) {
		if ne.Timeout() {
			c.log.Info("closing an idle connection: the client stopped answering keep-alives")
			return
		}
		// The connection broke (a client resetting it, say, even in the
		// middle of a frame): its end, not a bad frame. A client that
		// reconnects after every SEND_ERROR made hundreds of these a
		// second, each logged and counted as a protocol error.
		c.log.Debug("the connection broke", "err", err)
		return
	}
	c.s.stats.protocolErrors.Add(1)
	c.log.Warn("closing the connection after a bad frame", "err", err)
}

// handle runs one command.
func (c *conn) handle(cmd *pb.BaseCommand, payload Payload) error {
	switch cmd.GetType() {
	case pb.BaseCommand_CONNECT:
		return errorf("CONNECT received twice on one connection")
	case pb.BaseCommand_PING:
		c.queue(NewCommand(&pb.CommandPong{}))
	case pb.BaseCommand_PONG:
	case pb.BaseCommand_PARTITIONED_METADATA:
		c.handlePartitionedMetadata(cmd.GetPartitionMetadata())
	case pb.BaseCommand_LOOKUP:
		c.handleLookup(cmd.GetLookupTopic())
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		c.handleTopicsOfNamespace(cmd.GetGetTopicsOfNamespace())
	case pb.BaseCommand_PRODUCER:
		c.handleProducer(cmd.GetProducer())
	case pb.BaseCommand_SEND:
		return c.handleSend(cmd.GetSend(), payload)
	case pb.BaseCommand_CLOSE_PRODUCER:
		c.handleCloseProducer(cmd.GetCloseProducer())
	case pb.BaseCommand_SUBSCRIBE:
		c.handleSubscribe(cmd.GetSubscribe())
	case pb.BaseCommand_FLOW:
		c.handleFlow(cmd.GetFlow())
	case pb.BaseCommand_ACK:
		c.handleAck(cmd.GetAck())
	case pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES:
		c.handleRedeliver(cmd.GetRedeliverUnacknowledgedMessages())
	case pb.BaseCommand_SEEK:
		c.handleSeek(cmd.GetSeek())
	case pb.BaseCommand_GET_LAST_MESSAGE_ID:
		c.handleGetLastMessageID(cmd.GetGetLastMessageId())
	case pb.BaseCommand_UNSUBSCRIBE:
		c.handleUnsubscribe(cmd.GetUnsubscribe())
	case pb.BaseCommand_CLOSE_CONSUMER:
		c.handleCloseConsumer(cmd.GetCloseConsumer())
	case pb.BaseCommand_GET_SCHEMA:
		c.handleGetSchema(cmd.GetGetSchema())
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA:
		c.handleGetOrCreateSchema(cmd.GetGetOrCreateSchema())
	case pb.BaseCommand_AUTH_RESPONSE:
		// Authentication is off; a refresh needs no answer.
	default:
		c.unsupported(cmd)
	}
	return nil
}

// unsupported answers a request tern does not serve with an ERROR when it
// carries a request id, so the client fails fast instead of timing out.
func (c *conn) unsupported(cmd *pb.BaseCommand) {
	body := CommandBody(cmd)
	if body == nil {
		return
	}
	m := body.ProtoReflect()
	fd := m.Descriptor().Fields().ByName("request_id")
	if fd == nil || fd.Kind() != protoreflect.Uint64Kind || !m.Has(fd) {
		c.log.Debug("ignoring an unsupported command", "command", cmd.GetType().String())
		return
	}
	c.queue(errorCommand(m.Get(fd).Uint(), pb.ServerError_NotAllowedError,
		cmd.GetType().String()+" is not supported by this broker"))
}

// queue hands a command to the writer.
func (c *conn) queue(cmd *pb.BaseCommand) { c.enqueue(outItem{cmd: cmd}) }

func (c *conn) enqueue(it outItem) {
	c.out.Lock()
	if c.out.closed {
		c.out.Unlock()
		return
	}
	c.out.items = append(c.out.items, it)
	c.out.Unlock()
	select {
	case c.outSig <- struct{}{}:
	default:
	}
}

// writer writes queued frames and keeps the connection alive.
func (c *conn) writer() {
	defer close(c.writerDone)
	ka := c.s.cfg.KeepAliveInterval
	tick := time.NewTicker(ka)
	defer tick.Stop()
	var buf []byte
	var items []outItem
	for {
		select {
		case <-c.outSig:
		case <-tick.C:
			idle := time.Since(time.Unix(0, c.lastRead.Load()))
			if idle > 2*ka {
				c.log.Info("closing the connection: nothing received for two keep-alive intervals", "idle", idle.Round(time.Millisecond))
				c.abort()
				return
			}
			if idle >= ka {
				c.queue(NewCommand(&pb.CommandPing{}))
			}
		case <-c.aborted:
			return
		}
		c.out.Lock()
		items, c.out.items = c.out.items, items[:0]
		closed := c.out.closed
		c.out.Unlock()
		// Frames go out whenever writeChunk bytes are encoded, so the
		// buffer stays near that size and is reused: a consumer with
		// thousands of permits gets megabytes per wake-up, and a buffer
		// regrown from nothing each time copied and cleared them twice.
		buf = buf[:0]
		ok := true
		for _, it := range items {
			buf = c.encode(buf, it)
			if len(buf) >= writeChunk && ok {
				ok = c.write(buf)
				buf = buf[:0]
			}
		}
		clear(items)
		if len(buf) > 0 && ok {
			ok = c.write(buf)
		}
		if ok {
			c.makeRoom()
		}
		if !ok {
			return
		}
		if cap(buf) > 4*writeChunk {
			buf = nil // one huge frame; do not keep its buffer
		}
		if closed {
			c.out.Lock()
			left := len(c.out.items)
			c.out.Unlock()
			if left == 0 {
				return
			}
		}
	}
}

// writeChunk is how many encoded bytes the writer collects before it
// writes them.
const writeChunk = 1 << 20

// The bounds on the deliveries queued for the writer. A consumer takes
// no more deliveries while its connection's queue holds outHigh bytes or
// more, and the writer wakes it once it holds less than outLow. Bounded
// by permits alone, the queue held up to a client's receiver queues'
// worth of messages (a Go client's default is 50,000 over a partitioned
// topic's partitions, 50 MB of 1 KiB messages), and each delivery kept
// the whole read buffer its entry lies in.
const (
	outHigh = 4 << 20
	outLow  = 1 << 20
)

// Full implements protocols.FullSink.
func (cs *consumerState) Full() bool {
	c := cs.c
	if c.outBytes.Load() < outHigh {
		return false
	}
	// Flag first, look again after: either the writer sees the flags,
	// or this sees what the writer drained (makeRoom).
	if !cs.starved.Swap(true) {
		c.s.stats.held.Add(1)
	}
	c.starving.Store(true)
	return c.outBytes.Load() >= outHigh
}

// makeRoom wakes the consumers refused for a full queue once it holds
// less than outLow.
func (c *conn) makeRoom() {
	if c.outBytes.Load() >= outLow || !c.starving.Swap(false) {
		return
	}
	var wake []protocols.Consumer
	c.mu.Lock()
	for _, cs := range c.mu.consumers {
		if cs.starved.Swap(false) && cs.cons != nil {
			wake = append(wake, cs.cons)
		}
	}
	c.mu.Unlock()
	for _, cons := range wake {
		cons.Flow(0)
	}
}

// write sends encoded frames, or aborts the connection and reports false.
func (c *conn) write(buf []byte) bool {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	if _, err := c.nc.Write(buf); err != nil {
		if !c.stopping.Load() {
			c.log.Debug("write failed; closing the connection", "err", err)
		}
		c.abort()
		return false
	}
	return true
}

// encode appends one frame.
func (c *conn) encode(buf []byte, it outItem) []byte {
	var err error
	start := len(buf)
	switch {
	case it.cmd != nil:
		buf, err = AppendCommand(buf, it.cmd)
	case it.msg != nil:
		buf, err = c.appendMessage(buf, it.msg)
		if err == nil && len(buf) > start {
			c.s.stats.out.Add(int64(len(it.msg.d.Messages)))
		}
		// The frame holds copies of what it sends: the node may read
		// into the delivery's buffer again.
		if rb := it.msg.d.Buffer; rb != nil {
			it.msg.d = protocols.Delivery{}
			rb.Release()
		}
		c.outBytes.Add(-it.msg.size)
	}
	if err != nil {
		c.log.Error("cannot encode a frame; it is dropped", "err", err)
		return buf[:start]
	}
	return buf
}

// stopReading makes the reader finish: used by Server.Close, after which
// in-flight SENDs are still answered.
func (c *conn) stopReading() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

// abort closes the socket at once.
func (c *conn) abort() {
	c.abortOnce.Do(func() {
		c.stopping.Store(true)
		close(c.aborted)
		c.cancel()
		_ = c.nc.Close()
	})
}

// teardown detaches every producer and consumer, answers the SENDs still in
// flight, flushes the writer and closes the socket.
func (c *conn) teardown() {
	c.mu.Lock()
	consumers := c.mu.consumers
	c.mu.consumers = map[uint64]*consumerState{}
	c.mu.Unlock()
	for _, cs := range consumers {
		cs.close()
	}
	close(c.receipts)
	<-c.receiptsDone
	c.mu.Lock()
	producers := c.mu.producers
	c.mu.producers = map[uint64]*producer{}
	c.mu.Unlock()
	for _, p := range producers {
		p.close()
	}
	c.out.Lock()
	c.out.closed = true
	c.out.Unlock()
	select {
	case c.outSig <- struct{}{}:
	default:
	}
	select {
	case <-c.writerDone:
	case <-time.After(c.s.cfg.WriteTimeout):
	}
	c.abort()
	<-c.writerDone
}

// receipter answers SENDs in order.
func (c *conn) receipter() {
	defer close(c.receiptsDone)
	for it := range c.receipts {
		if it.cmd != nil {
			c.queue(it.cmd)
			if it.onWritten != nil {
				it.onWritten()
			}
			continue
		}
		// A resend recognised as a duplicate is answered once its original
		// is durable: the log waits for that before Wait returns.
		res, err := it.pending.Wait()
		c.release(it.size)
		if err != nil {
			code, msg := sendErrorFor(err)
			c.queue(NewCommand(&pb.CommandSendError{
				ProducerId: proto.Uint64(it.producer.id), SequenceId: proto.Uint64(it.seq),
				Error: code.Enum(), Message: proto.String(msg),
			}))
			continue
		}
		id := &pb.MessageIdData{LedgerId: proto.Uint64(uint64(it.producer.ledger)), EntryId: proto.Uint64(uint64(res.BaseOffset))}
		if res.BaseOffset < 0 {
			id = &pb.MessageIdData{LedgerId: proto.Uint64(^uint64(0)), EntryId: proto.Uint64(^uint64(0))}
		}
		if it.producer.part.Index >= 0 {
			id.Partition = proto.Int32(int32(it.producer.part.Index))
		}
		c.queue(NewCommand(&pb.CommandSendReceipt{
			ProducerId: proto.Uint64(it.producer.id), SequenceId: proto.Uint64(it.seq),
			MessageId: id, HighestSequenceId: proto.Uint64(it.highest),
		}))
		if !res.Duplicate && res.BaseOffset >= 0 {
			c.s.stats.entries.Add(1)
			c.s.stats.messages.Add(res.LastOffset - res.BaseOffset + 1)
		}
		if obs := c.s.cfg.ObservePublish; obs != nil {
			obs(time.Since(time.Unix(0, it.read)))
		}
	}
}

// acquire reserves in-flight bytes for a SEND, waiting while the
// connection has too much in flight.
func (c *conn) acquire(n int64) bool {
	for {
		cur := c.inflight.Load()
		if cur == 0 || cur+n <= int64(c.s.cfg.MaxInflightBytes) {
			c.inflight.Add(n)
			return true
		}
		select {
		case <-c.drained:
		case <-c.aborted:
			return false
		}
	}
}

func (c *conn) release(n int64) {
	c.inflight.Add(-n)
	select {
	case c.drained <- struct{}{}:
	default:
	}
}

// inOrder queues cmd behind every SEND received before it.
func (c *conn) inOrder(cmd *pb.BaseCommand, onWritten func()) {
	select {
	case c.receipts <- receiptItem{cmd: cmd, onWritten: onWritten}:
	case <-c.aborted:
	}
}

func errorCommand(requestID uint64, code pb.ServerError, msg string) *pb.BaseCommand {
	return NewCommand(&pb.CommandError{RequestId: proto.Uint64(requestID), Error: code.Enum(), Message: proto.String(msg)})
}

func successCommand(requestID uint64) *pb.BaseCommand {
	return NewCommand(&pb.CommandSuccess{RequestId: proto.Uint64(requestID)})
}

// replyError answers a request with the ERROR its failure maps to.
func (c *conn) replyError(requestID uint64, err error) {
	code, msg := serverError(err)
	c.queue(errorCommand(requestID, code, msg))
}

type protoError string

func (e protoError) Error() string { return "pulsar: " + string(e) }

func errorf(msg string) error { return protoError(msg) }
