package localstore

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// With segments, appends reach pebble through one committer, in the order
// they were started: a pointer may become durable only after its record
// (the committer fdatasyncs the segments first), and the batches of one
// partition, each carrying the partition's head, must be applied in
// offset order. Writes that must be ordered after the appends before them
// (truncation, topic deletion) go the same way.

// commitItem is one batch waiting for the committer.
type commitItem struct {
	b      *pebble.Batch
	ptr    segPointer
	hasPtr bool
	sync   bool
	// early marks an async append, acknowledged once its records are
	// written: the committer closes its batch and moves p's high
	// watermark to end once the batch is applied.
	early bool
	p     *partition
	end   int64
	size  int64 // the entry's bytes, counted in Store.asyncBacklog
	held  bool  // acknowledged once durable: it took the backlog past its bound
	done  chan error
	// queued is when enqueue took it (Store.commitTime).
	queued time.Time
}

type committer struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*commitItem
	closed bool
}

// enqueue hands it to the committer; false if the store is closing.
func (c *committer) enqueue(it *commitItem) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	it.queued = time.Now()
	c.queue = append(c.queue, it)
	c.cond.Signal()
	return true
}

// take waits for items; nil once closed and drained. Items that come
// before notBefore are held until then, with those that join them
// meanwhile, so that they share one fdatasync (Config.GroupCommitInterval).
func (c *committer) take(notBefore time.Time) []*commitItem {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) == 0 && !c.closed {
		c.cond.Wait()
	}
	if rest := time.Until(notBefore); rest > 0 && len(c.queue) > 0 && !c.closed {
		c.mu.Unlock()
		time.Sleep(rest)
		c.mu.Lock()
	}
	q := c.queue
	c.queue = nil
	return q
}

func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
}

// commitLoop is the committer's first stage: it takes each group of items
// and starts the fdatasync of the segments their records are in, while
// the group before may still be in its own; applyStage then applies the
// groups' batches in order, each once its fdatasync and every earlier
// group's are done, and hands them to walStage, which fsyncs pebble's WAL
// once if an item without a segment record asked for durability. So an
// append waits for about one fdatasync, not for the rest of the one in
// progress when it came and then its own, and a group's WAL fsync
// overlaps the next group's segment fdatasync.
func (s *Store) commitLoop() {
	defer s.cwg.Done()
	synced := make(chan syncingGroup, 1)
	s.cwg.Add(1)
	go s.applyStage(synced)
	defer close(synced)
	var next time.Time // the earliest the next fdatasync may start
	for {
		items := s.cmt.take(next)
		if items == nil {
			return
		}
		var err error
		if e := s.failed.Load(); e != nil {
			err = *e
		}
		// An append with a segment record is made durable by the segment
		// fdatasync alone: its batch is in the record stream behind its
		// entry, and replay applies it after a crash. Only the group's
		// other writes that ask for durability need the WAL's fsync. An
		// async append is acknowledged before (see PendingAppend.Wait),
		// but its pointer too waits for its record's fdatasync, so no
		// pointer in pebble ever refers to a record a crash could lose.
		g := syncingGroup{items: items, err: err}
		for _, it := range items {
			g.durable = g.durable || (it.sync && !it.hasPtr)
			g.seg = g.seg || it.hasPtr
		}
		if err != nil || !g.seg {
			synced <- g
			continue
		}
		// Sent before its fdatasync starts, so no more than two run at
		// once: this group's and the one applyStage waits for.
		g.done = make(chan error, 1)
		synced <- g
		if iv := s.cfg.GroupCommitInterval; iv > 0 {
			next = time.Now().Add(iv)
		}
		go func() { g.done <- s.segs.sync() }()
	}
}

// syncingGroup is one group of items between commitLoop and applyStage:
// done gives the result of its segment fdatasync, when it has one.
type syncingGroup struct {
	items        []*commitItem
	durable, seg bool
	done         chan error
	err          error
}

// applyStage is the committer's second stage: it applies each group's
// batches once its segments are durable. A group's fdatasync covers the
// records written before it started; one written earlier, into a file the
// fdatasync of the group before had already taken, is durable once that
// one returns, which applyStage has waited for.
func (s *Store) applyStage(synced <-chan syncingGroup) {
	defer s.cwg.Done()
	groups := make(chan commitGroup, 2)
	s.cwg.Add(1)
	go s.walStage(groups)
	defer close(groups)
	for g := range synced {
		err := g.err
		if g.done != nil {
			if e := <-g.done; err == nil {
				err = e
			}
		}
		if err == nil {
			if e := s.failed.Load(); e != nil {
				err = *e
			}
		}
		if g.seg && err == nil {
			// Where replay starts: every record not yet in pebble is in
			// this segment or a later one. It rides in the group's first
			// append, so pebble holds it whenever it holds the append.
			from := s.segs.lowestUncommitted()
			for _, it := range g.items {
				if it.hasPtr {
					_ = it.b.Set(replayFromKey(), binary.BigEndian.AppendUint32(nil, from), nil)
					break
				}
			}
		}
		for _, it := range g.items {
			if err != nil {
				break
			}
			err = s.db.Apply(it.b, pebble.NoSync)
		}
		if err != nil {
			s.fail(err)
		}
		groups <- commitGroup{items: g.items, durable: g.durable, err: err}
	}
}

// syncWAL fsyncs pebble's WAL: everything applied before the call is
// durable when it returns.
func (s *Store) syncWAL() error { return s.db.LogData(nil, pebble.Sync) }

// commitGroup is one group of items between the committer's stages.
type commitGroup struct {
	items   []*commitItem
	durable bool
	err     error
}

// walStage is the committer's second stage: it makes each group's batches
// durable in pebble, in order, and answers the group's items.
func (s *Store) walStage(groups <-chan commitGroup) {
	defer s.cwg.Done()
	for g := range groups {
		err := g.err
		if err == nil {
			if g.durable {
				err = s.syncWAL()
			} else {
				// Appends made durable in segments reach pebble's WAL
				// at the next sync (AsyncSyncInterval), which bounds
				// what replay has to read after a crash.
				s.markUnsynced()
			}
			if err != nil {
				s.fail(err)
			}
		}
		now := time.Now()
		for _, it := range g.items {
			if it.hasPtr {
				s.segs.committed(it.ptr)
				if err == nil {
					s.commitTime.Observe(now.Sub(it.queued).Seconds())
				}
			}
			if it.early {
				// Out of the backlog before readers can see it, so
				// the gauge never counts what they already read.
				s.asyncBacklog.Add(-it.size)
				if err == nil {
					it.p.advance(it.end)
				}
				_ = it.b.Close()
			}
			it.done <- err
		}
	}
}

// commitOrdered applies b after every append started before it, durably
// if sync, and waits. Without segments it is commit.
func (s *Store) commitOrdered(b *pebble.Batch, sync bool) error {
	if !s.segWrites {
		return s.commit(b, sync)
	}
	it := &commitItem{b: b, sync: sync, done: make(chan error, 1)}
	if !s.cmt.enqueue(it) {
		return ErrClosed
	}
	return <-it.done
}
