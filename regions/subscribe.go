package regions

import (
	"context"
	"sync"
	"time"
)

// Fan-out. serf hands events to one channel that must never block (serf
// sends on it while holding its member lock, and its snapshotter drops
// events when the channel is full). So:
//
//	serf EventCh -> pump goroutine -> intake queue -> run goroutine
//	                                                   |  applies to the directory
//	                                                   v
//	                          per-subscriber queue -> subscriber goroutine -> chan Event
//
// The pump only appends to a slice; the run goroutine only does map
// updates and appends to subscriber queues. Neither waits on a subscriber.
// Each subscriber has its own goroutine that waits on the subscriber's
// channel; a subscriber that falls more than Config.SubscriberBuffer events
// behind gets EventOverflow and a closed channel instead of unbounded
// memory.

// subscriber is one Subscribe call.
type subscriber struct {
	out  chan Event
	wake chan struct{}
	ctx  context.Context

	mu struct {
		sync.Mutex
		queue    []Event
		overflow bool
		lastSeq  uint64
	}
}

// push queues events for delivery; it never blocks.
func (s *subscriber) push(events []Event, limit int) {
	s.mu.Lock()
	if !s.mu.overflow {
		if len(s.mu.queue)+len(events) > limit {
			s.mu.overflow = true
			s.mu.queue = nil
			s.mu.lastSeq = events[len(events)-1].Seq
		} else {
			s.mu.queue = append(s.mu.queue, events...)
		}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Subscribe delivers every later change of the region directory on the
// returned channel, each exactly once and in order (Event.Seq increases by
// one). The channel closes when ctx ends, when the mesh closes, or after
// an EventOverflow. A subscriber that needs the starting state too should
// use SubscribeWithDirectory.
func (m *Mesh) Subscribe(ctx context.Context) <-chan Event {
	_, ch := m.SubscribeWithDirectory(ctx)
	return ch
}

// SubscribeWithDirectory returns the directory and a channel of every
// change after it, taken atomically: applying the events in order to the
// directory (upsert Event.Node by name, delete it on EventReap) gives the
// mesh's later directories, with nothing missed and nothing twice.
func (m *Mesh) SubscribeWithDirectory(ctx context.Context) (Directory, <-chan Event) {
	s := &subscriber{out: make(chan Event), wake: make(chan struct{}, 1), ctx: ctx}
	m.mu.Lock()
	dir := m.mu.dir.directory(m.cfg.Region)
	if m.mu.subs == nil { // closed
		m.mu.Unlock()
		close(s.out)
		return dir, s.out
	}
	m.mu.subs[s] = struct{}{}
	m.subWG.Add(1)
	m.mu.Unlock()
	go m.serveSubscriber(s)
	return dir, s.out
}

// publish hands events to every subscriber. Called by the run goroutine
// with m.mu held, which orders it with SubscribeWithDirectory.
func (m *Mesh) publishLocked(events []Event) {
	if len(events) == 0 {
		return
	}
	for s := range m.mu.subs {
		s.push(events, m.cfg.SubscriberBuffer)
	}
}

func (m *Mesh) serveSubscriber(s *subscriber) {
	defer m.subWG.Done()
	defer close(s.out)
	defer func() {
		m.mu.Lock()
		delete(m.mu.subs, s)
		m.mu.Unlock()
	}()
	send := func(ev Event) bool {
		select {
		case s.out <- ev:
			return true
		case <-s.ctx.Done():
		case <-m.subsDone:
		}
		return false
	}
	for {
		s.mu.Lock()
		batch, overflow, lastSeq := s.mu.queue, s.mu.overflow, s.mu.lastSeq
		s.mu.queue = nil
		s.mu.Unlock()
		for _, ev := range batch {
			if !send(ev) {
				return
			}
		}
		if overflow {
			m.log.Warn("directory subscriber fell behind; ending its subscription", "limit", m.cfg.SubscriberBuffer)
			send(Event{Seq: lastSeq, Kind: EventOverflow, Time: time.Now()})
			return
		}
		if len(batch) == 0 {
			select {
			case <-s.wake:
			case <-s.ctx.Done():
				return
			case <-m.subsDone:
				return
			}
		}
	}
}
