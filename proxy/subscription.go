package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Subscriptions (protocols.Subscriptions) live here and in dispatch.go.
//
// Every subscription that has been used since the node started is a
// *subscription with one goroutine (run) that owns all of its state: the
// cursor, the read position, what each consumer holds, what waits to be
// redelivered or delivered later. Consumers, the admin API and the
// subscription's own helper goroutine (which waits for new entries) reach it
// only through its command channel, so none of that state needs a lock.
//
// A durable subscription's cursor is saved to localstore a short while after
// it changes (saveDelay), when the subscription stops and when the node shuts
// down; a crash can therefore redeliver the last fraction of a second of
// acknowledged messages, never lose an unacknowledged one. A non-durable
// subscription (a reader) keeps its cursor in memory and ends with its last
// consumer.

// saveDelay bounds how long an acknowledgement stays unsaved.
const saveDelay = 100 * time.Millisecond

// subKey names a subscription: a partition log and a name.
type subKey struct {
	pid  localstore.PartitionID
	name string
}

// subRegistry holds the node's loaded subscriptions.
type subRegistry struct {
	mu     sync.Mutex
	subs   map[subKey]*subscription
	closed bool
	wg     sync.WaitGroup
	nextID atomic.Uint64
	// loadedN is len(subs), for the subscriptions' shares of the entry
	// caches' bytes, read without mu.
	loadedN atomic.Int32
	// reads counts the subscriptions' reads of new entries, and
	// bufReused those into a buffer freed by an earlier one (readbuf.go).
	reads, bufReused atomic.Int64
}

// errSubGone is returned by a subscription that ended while a caller was
// about to use it; the caller looks it up again.
var errSubGone = errors.New("proxy: subscription ended")

// consumer is one attached consumer, owned by its subscription's goroutine
// except for the gone flag.
type consumer struct {
	id   uint64
	req  protocols.SubscribeRequest
	sink protocols.ConsumerSink

	permits int64
	// full is the sink when it bounds what it holds unsent.
	full protocols.FullSink
	// pending holds what was delivered to this consumer and is not
	// acknowledged or handed back yet.
	pending offsetSet
	// timeouts lists deliveries in order, for the ack timeout.
	timeouts []ackDeadline
	// gone is set once the consumer is closed or ended; read by handles.
	gone atomic.Bool
}

type ackDeadline struct {
	from, to int64
	at       time.Time
}

// subscription is one subscription's state machine.
type subscription struct {
	n    *Node
	reg  *subRegistry
	key  subKey
	part protocols.Partition
	name string

	durable bool
	typ     protocols.SubscriptionType
	props   map[string]string

	cmds    chan func()
	wakeCh  chan error
	waitReq chan int64
	stopCh  chan struct{}
	done    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc

	// Owned by run.
	cursor       localstore.Cursor
	dirty        bool
	readPos      int64
	ahead        []*readEntry
	cache        entryCache
	free         bufFree
	replay       offsetSet
	delayed      delayQueue
	consumers    []*consumer
	rr           int
	active       *consumer
	keys         *keySelector
	units        map[int64]int64 // delivery start -> end, durable only
	redeliveries map[int64]int32 // offset -> redelivery count
	// Key_Shared: which consumer holds each delivered, unacknowledged
	// message, and how many messages of each key hash each consumer holds.
	held    map[int64]heldMsg
	holders map[uint32]map[*consumer]int
	waiting bool
	ending  bool
	endErr  error

	saveTimer, delayTimer, ackTimer *time.Timer
	saveArmed, delayArmed, ackArmed bool
}

// Subscribe implements protocols.Subscriptions.
func (n *Node) Subscribe(ctx context.Context, p protocols.Partition, req protocols.SubscribeRequest, sink protocols.ConsumerSink) (protocols.Consumer, error) {
	if err := validateSubscribe(&req); err != nil {
		return nil, err
	}
	if sink == nil {
		return nil, fmt.Errorf("%w: no consumer sink", protocols.ErrInvalidSubscription)
	}
	pid, err := n.pid(p)
	if err != nil {
		return nil, err
	}
	m := n.messaging()
	for attempt := 0; ; attempt++ {
		s, err := m.subs.get(n, pid, p, req.Subscription, &req)
		if err != nil {
			return nil, err
		}
		var h protocols.Consumer
		err = s.call(ctx, func() error {
			c, err := s.attach(req, sink)
			if err == nil {
				h = &consumerHandle{s: s, c: c}
			}
			return err
		})
		if errors.Is(err, errSubGone) && attempt < 100 {
			continue
		}
		return h, err
	}
}

// Incarnation implements protocols.Subscriptions: the partition id, which
// is never reused.
func (n *Node) Incarnation(ctx context.Context, p protocols.Partition) (int64, error) {
	pid, err := n.pid(p)
	return int64(pid), err
}

func validateSubscribe(req *protocols.SubscribeRequest) error {
	var errs []error
	if req.Subscription == "" {
		errs = append(errs, errors.New("the subscription name is empty"))
	}
	if req.Type < protocols.SubExclusive || req.Type > protocols.SubKeyShared {
		errs = append(errs, fmt.Errorf("subscription type %d: want Exclusive (0), Shared (1), Failover (2) or Key_Shared (3)", req.Type))
	}
	if req.Start.Kind == protocols.StartAtOffset && req.Start.Offset < 0 {
		errs = append(errs, fmt.Errorf("start offset %d is negative", req.Start.Offset))
	}
	if req.AckTimeout < 0 {
		errs = append(errs, fmt.Errorf("ack timeout %v is negative", req.AckTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", protocols.ErrInvalidSubscription, errors.Join(errs...))
	}
	return nil
}

// get returns the loaded subscription, loading or creating it. req, when
// not nil, creates a missing subscription; nil only loads a durable one
// from storage (admin use) and fails with ErrSubscriptionNotFound.
func (r *subRegistry) get(n *Node, pid localstore.PartitionID, p protocols.Partition, name string, req *protocols.SubscribeRequest) (*subscription, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, protocols.ErrClosed
	}
	k := subKey{pid: pid, name: name}
	if s := r.subs[k]; s != nil {
		return s, nil
	}
	s, err := newSubscription(n, r, k, p, req)
	if err != nil {
		return nil, err
	}
	r.subs[k] = s
	r.loadedN.Store(int32(len(r.subs)))
	r.wg.Add(2)
	go s.run()
	go s.waiter()
	return s, nil
}

// lookup returns a loaded subscription without loading one.
func (r *subRegistry) lookup(pid localstore.PartitionID, name string) *subscription {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subs[subKey{pid: pid, name: name}]
}

// loaded lists the loaded subscriptions of a partition.
func (r *subRegistry) loaded(pid localstore.PartitionID) []*subscription {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*subscription
	for k, s := range r.subs {
		if k.pid == pid {
			out = append(out, s)
		}
	}
	return out
}

// forget removes s from the registry (called by s itself when it ends).
func (r *subRegistry) forget(s *subscription) {
	r.mu.Lock()
	if r.subs[s.key] == s {
		delete(r.subs, s.key)
		r.loadedN.Store(int32(len(r.subs)))
	}
	r.mu.Unlock()
}

// close stops every subscription, saving durable cursors, and waits.
func (r *subRegistry) close() {
	r.mu.Lock()
	r.closed = true
	subs := make([]*subscription, 0, len(r.subs))
	for _, s := range r.subs {
		subs = append(subs, s)
	}
	r.mu.Unlock()
	for _, s := range subs {
		s.stop(protocols.ErrClosed)
	}
	r.wg.Wait()
}

// newSubscription loads or creates the subscription's cursor. It runs
// under the registry lock, before the goroutine starts.
func newSubscription(n *Node, r *subRegistry, k subKey, p protocols.Partition, req *protocols.SubscribeRequest) (*subscription, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscription{
		n: n, reg: r, key: k, part: p, name: k.name,
		durable:      true,
		cmds:         make(chan func(), 256),
		wakeCh:       make(chan error, 1),
		waitReq:      make(chan int64, 1),
		stopCh:       make(chan struct{}),
		done:         make(chan struct{}),
		ctx:          ctx,
		cancel:       cancel,
		units:        map[int64]int64{},
		redeliveries: map[int64]int32{},
		held:         map[int64]heldMsg{},
		holders:      map[uint32]map[*consumer]int{},
		saveTimer:    stoppedTimer(),
		delayTimer:   stoppedTimer(),
		ackTimer:     stoppedTimer(),
	}
	s.cache.init()
	if req != nil {
		s.durable = req.Durable
		s.typ = req.Type
	}
	start, hw, err := n.store.Offsets(k.pid)
	if err != nil {
		cancel()
		return nil, mapStoreErr(err)
	}
	var found bool
	if s.durable {
		c, ok, err := n.store.LoadCursor(k.pid, k.name)
		if err != nil {
			cancel()
			return nil, mapStoreErr(err)
		}
		if ok {
			found = true
			s.cursor = c
			s.props = c.Props
			if t, ok := parseSubType(c.Props[propType]); ok && req == nil {
				s.typ = t
			}
		}
	}
	if !found {
		if req == nil {
			cancel()
			return nil, fmt.Errorf("%w: %q on %s", protocols.ErrSubscriptionNotFound, k.name, p.Name())
		}
		md := hw
		switch req.Start.Kind {
		case protocols.StartEarliest:
			md = start
		case protocols.StartAtOffset:
			md = min(max(req.Start.Offset, start), hw)
			if !s.durable {
				// Readers begin with the whole entry holding the offset;
				// the client drops what comes before its start.
				if base, _, ok := n.entryAt(k.pid, md); ok {
					md = base
				}
			}
		}
		s.cursor = localstore.Cursor{MarkDelete: md}
		s.props = map[string]string{propType: req.Type.String()}
		for k, v := range req.Properties {
			s.props[propUserPrefix+k] = v
		}
		s.cursor.Props = s.props
		if s.durable {
			if err := n.store.SaveCursor(k.pid, k.name, s.cursor); err != nil {
				cancel()
				return nil, mapStoreErr(err)
			}
		}
	}
	s.readPos = max(s.cursor.MarkDelete, start)
	if s.cursor.MarkDelete < start {
		s.cursor.AckUpTo(start)
	}
	return s, nil
}

// Cursor property names.
const (
	propType       = "type"
	propUserPrefix = "p."
)

func parseSubType(s string) (protocols.SubscriptionType, bool) {
	for t := protocols.SubExclusive; t <= protocols.SubKeyShared; t++ {
		if t.String() == s {
			return t, true
		}
	}
	return 0, false
}

// entryAt returns the bounds of the entry holding off.
func (n *Node) entryAt(pid localstore.PartitionID, off int64) (base, count int64, ok bool) {
	es, err := n.store.Read(pid, off, 1)
	if err != nil || len(es) == 0 {
		return 0, 0, false
	}
	return es[0].BaseOffset, es[0].Count, true
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// call runs f on the subscription's goroutine and waits for its result.
func (s *subscription) call(ctx context.Context, f func() error) error {
	errc := make(chan error, 1)
	select {
	case s.cmds <- func() { errc <- f() }:
	case <-s.done:
		return errSubGone
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-errc:
		return err
	case <-s.done:
		// The goroutine may have run f before ending.
		select {
		case err := <-errc:
			return err
		default:
			return errSubGone
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// post runs f on the subscription's goroutine without waiting.
func (s *subscription) post(f func()) {
	select {
	case s.cmds <- f:
	case <-s.done:
	}
}

// stop asks the goroutine to end every consumer with err and exit.
func (s *subscription) stop(err error) {
	s.post(func() { s.beginEnd(err) })
}

// consumerHandle is the protocols.Consumer a front end holds.
type consumerHandle struct {
	s *subscription
	c *consumer
}

func (h *consumerHandle) live() error {
	if h.c.gone.Load() {
		return protocols.ErrConsumerClosed
	}
	return nil
}

func (h *consumerHandle) do(ctx context.Context, f func() error) error {
	if err := h.live(); err != nil {
		return err
	}
	err := h.s.call(ctx, func() error {
		if h.c.gone.Load() {
			return protocols.ErrConsumerClosed
		}
		return f()
	})
	if errors.Is(err, errSubGone) {
		return protocols.ErrConsumerClosed
	}
	return err
}

func (h *consumerHandle) Flow(n int) {
	if n < 0 || h.c.gone.Load() {
		return
	}
	h.s.post(func() {
		if n > 0 && !h.c.gone.Load() {
			h.c.permits += int64(n)
		}
		// Flow(0) only wakes run, which dispatches after every command.
	})
}

func (h *consumerHandle) Ack(ctx context.Context, acks []protocols.AckPosition, cumulative bool) error {
	if cumulative && (h.s.typ == protocols.SubShared || h.s.typ == protocols.SubKeyShared) {
		return fmt.Errorf("%w: cumulative acknowledgement is not allowed on a %s subscription; acknowledge messages individually",
			protocols.ErrInvalidAck, h.s.typ)
	}
	return h.do(ctx, func() error { return h.s.ack(h.c, acks, cumulative) })
}

func (h *consumerHandle) Redeliver(ctx context.Context, offsets []int64) error {
	return h.do(ctx, func() error { h.s.redeliver(h.c, offsets, true); return nil })
}

func (h *consumerHandle) Seek(ctx context.Context, t protocols.SeekTarget) error {
	return h.do(ctx, func() error { return h.s.seek(t) })
}

func (h *consumerHandle) Unsubscribe(ctx context.Context, force bool) error {
	return h.do(ctx, func() error { return h.s.unsubscribe(h.c, force) })
}

func (h *consumerHandle) MarkDelete(ctx context.Context) (int64, error) {
	var md int64
	err := h.do(ctx, func() error { md = h.s.cursor.MarkDelete; return nil })
	return md, err
}

func (h *consumerHandle) Close() error {
	if h.c.gone.Load() {
		return nil
	}
	err := h.s.call(context.Background(), func() error {
		h.s.detach(h.c, nil)
		return nil
	})
	if errors.Is(err, errSubGone) {
		return nil
	}
	return err
}
