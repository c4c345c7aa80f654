package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A connection has one reader goroutine and one writer goroutine. The
// reader decodes a request, runs its handler, and queues the reply; the
// writer takes replies in queue order, waits for deferred ones (a produce
// waiting for its fsync, a fetch long-poll, a join waiting for the
// rebalance) and writes them. So responses leave in request order while the
// reader goes on with the next request: pipelined produce requests are
// started (offsets assigned, writes submitted) one after another and share
// their fsyncs. Handlers that change state do so in the reader, in request
// order; only waiting happens in the writer.

// reply is a request's answer, ready or deferred.
type reply struct {
	key     int16
	version int16
	corr    int32
	// resp is the ready response; wait, if set, computes it instead.
	// Neither set, or wait returning nil, means no response (acks=0).
	resp kmsg.Response
	wait func(ctx context.Context) kmsg.Response
	// poll marks a wait that may last long (a fetch's long poll, a
	// group's join): the answers written before it go out first.
	poll bool
	// ready, if set, reports whether wait would return at once (a
	// produce whose appends are durable). The answers written before a
	// wait that is not ready go out first, so none is held for another
	// request's fsync.
	ready func() bool
	// sent is a fetch response's batches sent from their read buffers,
	// recycled once it is written (encodeSpliced).
	sent []sentBatch
	// size is the request's frame size, counted against the in-flight
	// budget until the reply is written.
	size int
	// closeAfter closes the connection once the reply is handled (acks=0
	// produce errors, as Kafka does).
	closeAfter bool
	// For the request time observer: when the frame's first bytes were
	// read, when its last were, and when the handler returned.
	started, received, handled time.Time
}

// conn is one client connection.
type conn struct {
	s      *Server
	nc     net.Conn
	remote string

	ctx    context.Context
	cancel context.CancelFunc

	queue    chan *reply
	inflight atomic.Int64
	freed    chan struct{}
	stopping atomic.Bool

	clientID string
	// dec validates compressed batches; used by the reader goroutine only.
	dec protocols.Decompressor
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		s:      s,
		nc:     nc,
		remote: nc.RemoteAddr().String(),
		queue:  make(chan *reply, s.cfg.MaxInflightRequests),
		freed:  make(chan struct{}, 1),
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c
}

// stopReading makes the reader stop after the request it is on; queued
// replies are still written.
func (c *conn) stopReading() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

func (c *conn) serve() {
	defer c.s.dropConn(c)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.writeLoop()
	}()
	if err := c.readLoop(); err != nil {
		c.s.stats.protocolErrors.Add(1)
		c.s.log.Warn("closing connection", "remote", c.remote, "client", c.clientID, "err", err)
		// A protocol violation ends the connection now; replies queued
		// before it are not written.
		c.cancel()
	}
	close(c.queue)
	wg.Wait()
	c.cancel()
	_ = c.nc.Close()
}

// maxSpareFrame bounds the Produce frame buffer a connection keeps for its
// next frames; larger frames take buffers from the node's pool. A producer
// of one partition sends frames of a batch, up to a megabyte by default.
// (With spares of up to 16 MiB on the heap, and larger frames allocated
// for each request, a producer of 100 partitions, whose requests average
// 7 MB, had its node collect 118-133 times in 10 s: see framebuf.go.)
const maxSpareFrame = 2 << 20

func (c *conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var sizeBuf [4]byte
	var spare []byte
	for {
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			return c.readErr(err)
		}
		started := time.Now()
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 8 || int(size) > c.s.cfg.MaxRequestBytes {
			return fmt.Errorf("%w: frame of %d bytes; frames are 8 to %d bytes (raise kafka MaxRequestBytes for larger requests)", errProtocol, size, c.s.cfg.MaxRequestBytes)
		}
		if !c.acquire(int(size)) {
			return nil
		}
		// A Produce request's bytes are copied into the log before its
		// handler returns, so its frame buffer is used again: a small
		// frame's is the connection's spare, a large one's comes from the
		// node's pool (framebuf.go) and goes back to it once the handler
		// is done. Other requests may keep slices of theirs (group
		// metadata, assignments) and get a fresh one.
		produce := false
		if key, err := br.Peek(2); err == nil {
			produce = int16(binary.BigEndian.Uint16(key)) == kmsg.Produce.Int16()
		}
		var (
			buf    []byte
			fb     frameBuf
			pooled = produce && int(size) > maxSpareFrame
		)
		switch {
		case pooled:
			fb = produceFrames.get(int(size))
			buf = fb.b[:size:size]
		case !produce:
			buf = make([]byte, size)
		case cap(spare) >= int(size):
			buf, spare = spare[:size], nil
		default:
			buf, spare = make([]byte, size, min(maxSpareFrame, 1<<bits.Len(uint(size-1)))), nil
		}
		if _, err := io.ReadFull(br, buf); err != nil {
			if pooled {
				produceFrames.put(fb)
			}
			if err == io.ErrUnexpectedEOF {
				return fmt.Errorf("%w: connection ended inside a %d-byte frame", errProtocol, size)
			}
			return c.readErr(err)
		}
		received := time.Now()
		r, err := c.handle(buf)
		switch {
		case pooled:
			produceFrames.put(fb)
		case produce:
			spare = buf
		}
		if err != nil {
			return err
		}
		r.started, r.received, r.handled = started, received, time.Now()
		select {
		case c.queue <- r:
		case <-c.ctx.Done():
			return nil
		}
		if r.closeAfter {
			return nil
		}
	}
}

func (c *conn) readErr(err error) error {
	if c.stopping.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || c.ctx.Err() != nil {
		return nil
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return nil
	}
	return fmt.Errorf("read: %w", err)
}

// acquire counts n request bytes against the in-flight budget, waiting for
// responses to be written when the budget is spent. One request is always
// let through, so a frame larger than the budget still gets served.
func (c *conn) acquire(n int) bool {
	max := int64(c.s.cfg.MaxInflightBytes)
	for {
		cur := c.inflight.Load()
		if cur == 0 || cur+int64(n) <= max {
			c.inflight.Add(int64(n))
			return true
		}
		select {
		case <-c.freed:
		case <-c.ctx.Done():
			return false
		}
	}
}

func (c *conn) release(n int) {
	c.inflight.Add(-int64(n))
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

// handle decodes one request frame and runs its handler.
func (c *conn) handle(frame []byte) (*reply, error) {
	h, req, fallback, err := decodeRequest(frame)
	if err != nil {
		return nil, err
	}
	if h.clientID != "" && c.clientID == "" {
		c.clientID = h.clientID
	}
	r := &reply{key: h.key, version: h.version, corr: h.corr, size: len(frame)}
	if h.key >= 0 && h.key < maxKey {
		c.s.stats.requests[h.key].Add(1)
	}
	if fallback != nil {
		r.resp = fallback
		return r, nil
	}
	if err := apis[h.key].handle(c, req, r); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeRequest parses a request frame: its header and its body at the
// header's version. An ApiVersions request at a version not served gets
// the fallback response instead of a body; anything else that cannot be
// served is a protocol violation.
func decodeRequest(frame []byte) (header, kmsg.Request, kmsg.Response, error) {
	h, body, err := parseHeader(frame)
	if err != nil {
		return h, nil, nil, err
	}
	api, ok := apis[h.key]
	if !ok {
		return h, nil, nil, fmt.Errorf("%w: API key %d (%s) is not served", errProtocol, h.key, kmsg.NameForKey(h.key))
	}
	if h.version < api.min || h.version > api.max {
		if h.key == kmsg.ApiVersions.Int16() {
			return h, nil, apiVersionsFallback(h.version), nil
		}
		return h, nil, nil, fmt.Errorf("%w: %s version %d; versions %d to %d are served", errProtocol, kmsg.NameForKey(h.key), h.version, api.min, api.max)
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipHeaderTags(body); err != nil {
			return h, nil, nil, err
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return h, nil, nil, fmt.Errorf("%w: %s v%d body: %v", errProtocol, kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil, nil
}

// respBufs holds the buffers responses are encoded into, shared by every
// connection's write loop: a fetch response of megabytes is encoded into a
// buffer another connection used before, and memory follows the responses
// being written, not the connections open.
var respBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledResp bounds the buffers respBufs keeps.
const maxPooledResp = 16 << 20

// fetchRespSize is about the encoded size of a fetch response: its record
// batches and a generous allowance for the fields around them.
func fetchRespSize(fr *kmsg.FetchResponse) int {
	n := 64
	for i := range fr.Topics {
		n += 64 + len(fr.Topics[i].Topic)
		for j := range fr.Topics[i].Partitions {
			p := &fr.Topics[i].Partitions[j]
			n += 128 + len(p.RecordBatches) + 32*len(p.AbortedTransactions)
		}
	}
	return n
}

// sentTimes is a written answer's times, waiting for its bytes to leave
// the write buffer to be observed with its send.
type sentTimes struct {
	key    int16
	t      RequestTimes
	waited time.Time
}

func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	broken := false
	// An answer's send ends when its bytes reach the socket: at the
	// flush after it, which may come after later answers were written.
	var unsent []sentTimes
	flush := func() error {
		err := bw.Flush()
		if obs := c.s.cfg.ObserveRequest; obs != nil {
			now := time.Now()
			for _, u := range unsent {
				u.t.Send = now.Sub(u.waited)
				obs(u.key, u.t)
			}
		}
		unsent = unsent[:0]
		return err
	}
	for r := range c.queue {
		resp := r.resp
		picked := time.Now()
		waited := picked
		if r.wait != nil {
			// What is written goes out before a wait that will block.
			// Flushed only once the queue was empty, a produce pipelined
			// ahead of a long-polling fetch was answered when the poll
			// ended, and a producer's answer waited in the buffer for
			// the fsync of its next request. Answers whose fsyncs are
			// done still go out together.
			if bw.Buffered() > 0 && !broken && (r.poll || (r.ready != nil && !r.ready())) {
				if err := flush(); err != nil {
					broken = true
					c.cancel()
				}
			}
			resp = r.wait(c.ctx)
			waited = time.Now()
		}
		c.release(r.size)
		if broken || c.ctx.Err() != nil {
			continue // drain so the reader never blocks
		}
		if resp != nil {
			resp.SetVersion(r.version)
			bp := respBufs.Get().(*[]byte)
			buf := append((*bp)[:0], 0, 0, 0, 0)
			buf = binary.BigEndian.AppendUint32(buf, uint32(r.corr))
			// The ApiVersions response header is always v0, even for
			// flexible versions, so old clients can read the fallback.
			if resp.IsFlexible() && r.key != kmsg.ApiVersions.Int16() {
				buf = append(buf, 0)
			}
			fr, isFetch := resp.(*kmsg.FetchResponse)
			var (
				pieces  [][]byte
				spliced bool
			)
			if isFetch && len(r.sent) > 0 {
				pieces, buf, spliced = encodeSpliced(buf, fr, r.sent)
			}
			if isFetch && !spliced {
				// One allocation of the whole size, not append's
				// growth in steps of a quarter (a dozen buffers,
				// copied in turn, for a 10 MiB fetch whose pooled
				// buffer a collection took).
				buf = slices.Grow(buf, fetchRespSize(fr))
			}
			var err error
			if spliced {
				// What is buffered goes first, then the pieces in one
				// writev: through bw, batches smaller than its buffer
				// would be copied into it after all.
				if err = flush(); err == nil {
					bufs := net.Buffers(pieces)
					_, err = bufs.WriteTo(c.nc)
				}
			} else {
				buf = resp.AppendTo(buf)
				binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
				_, err = bw.Write(buf)
			}
			if isFetch {
				// Written (or in bw's buffer): the read buffers
				// may go back.
				recycleSent(r.sent)
				putFetchBufs(fr)
			}
			if c.s.cfg.ObserveRequest != nil {
				unsent = append(unsent, sentTimes{key: r.key, waited: waited, t: RequestTimes{
					Receive: r.received.Sub(r.started),
					Local:   r.handled.Sub(r.received),
					Queue:   picked.Sub(r.handled),
					Wait:    waited.Sub(picked),
				}})
			}
			if cap(buf) <= maxPooledResp {
				*bp = buf
				respBufs.Put(bp)
			}
			if err != nil {
				broken = true
				c.cancel()
				continue
			}
		}
		if r.closeAfter {
			broken = true
			c.cancel()
			_ = flush()
			_ = c.nc.Close()
			continue
		}
		if len(c.queue) == 0 {
			if err := flush(); err != nil {
				broken = true
				c.cancel()
			}
		}
	}
	if !broken {
		_ = flush()
	}
}
