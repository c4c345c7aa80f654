package localstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// A reader behind the high watermark (a consumer reading a backlog, a
// replication link catching up) sends one read's entries on and only then
// asks for the next: its reads and the store's work alternate, and each
// read waits for its bytes to be copied out of the page cache, or for the
// disk where the pages were dropped. ReadOn starts the next read as soon
// as one stops short of the high watermark, so it runs while the reader
// sends and the reader's next call finds it done. A Kafka consumer reading
// a backlog of 1 KiB messages through one partition, the disk serving half
// of it, read 1.09-1.19 million a second without it and 1.48-1.52 with it
// (bench/results, thirty-fourth run). The read after that one starts as
// soon as the first is done: with one read ahead, the disk waited for
// each of the reader's fetches, and a fetch waited 149-179 us on average
// for its read, against 70-112 us with two.

// Bounds on what read-ahead holds: the reads started and not taken, and
// the bytes they may hold. A read not taken within readAheadAge (its
// reader went away or moved) makes room when a new one needs it.
//
// The buffers are on Go's heap, whose soft limit is 72 MiB by default
// (limits.heap_limit). With room for 64 MiB, a consumer catching up on 10
// or 100 partitions filled it: its fetches give each partition a share of
// the response budget, so they seldom ask where a read ahead starts, and
// those reads stayed until readAheadAge. The live heap then stood at the
// soft limit, the runtime collected continuously (4,000 collections in a
// 10 s run, 40 % of the node's CPU) and each collection emptied the pools
// of read buffers, so every read allocated anew. 8 MiB holds two reads
// ahead of the largest Kafka read (kafka.fetch_max_bytes, 4 MiB) or of
// four 1 MiB readers. The reads of a fetch of several partitions behind
// already overlap (the Kafka front end starts them together), so reading
// further ahead for them gained nothing measurable (bench/results,
// fifty-second run).
const (
	readAheadSlots = 64
	readAheadBytes = 8 << 20
	readAheadAge   = 5 * time.Second
	// readAheadSpares is how many buffers readers gave up are kept for
	// reads started later, each of at most readAheadSpareMax.
	readAheadSpares   = 4
	readAheadSpareMax = 4 << 20
)

// readAhead is the store's reads started ahead of their readers, by
// partition and the offset they read from.
type readAhead struct {
	mu      sync.Mutex
	slots   map[readAheadKey]*readAheadSlot
	bytes   int  // the maxBytes of the reads in slots
	closing bool // the store is closing: start no more
	spares  [][]byte
	wg      sync.WaitGroup
	hits    atomic.Int64 // reads served from a read started ahead
	// askedHits counts the hits of reads started by ReadAheadAt.
	askedHits atomic.Int64
}

type readAheadKey struct {
	pid  PartitionID
	from int64
}

// readAheadSlot is one read started ahead; es, buf and err are set
// before done is closed.
type readAheadSlot struct {
	maxBytes int
	made     time.Time
	done     chan struct{}
	es       []Entry
	buf      []byte
	err      error
	// Guarded by readAhead.mu: chain starts the read after this one once
	// it is done; finished says it is, and next and nextOK where the read
	// after it starts and whether to start it (readAheadFrom).
	chain, finished, nextOK bool
	next                    int64
	// asked: started by ReadAheadAt.
	asked bool
}

// ReadOn reads as ReadInto does, for a reader that reads on from where
// this read ends. When a read stops short of the high watermark, the store
// starts the next one at once, and the reader's next call at that offset
// takes it instead of reading (up to that call's maxBytes). The
// entries are the ones ReadInto would return; a read started ahead is
// dropped, and the call reads afresh, if the partition was deleted or its
// start moved past it since (partition ids are never used again).
//
// buf is the store's once the call returns (a read started ahead fills
// it later): the caller must not keep using it, but the returned buffer,
// which holds the entries. So a reader that passes back the buffer of its
// last call allocates nothing per read: two buffers take turns.
func (s *Store) ReadOn(pid PartitionID, from int64, maxBytes int, buf []byte) ([]Entry, []byte, error) {
	return s.readTaking(pid, from, maxBytes, buf, true)
}

// ReadHere reads as ReadOn does, and takes a read started ahead at from
// as it does (ReadAheadAt), but starts none after it: for a reader whose
// next read of the partition is not where this one ends, such as a Kafka
// consumer of many partitions, which reads the others before it comes
// back to this one.
func (s *Store) ReadHere(pid PartitionID, from int64, maxBytes int, buf []byte) ([]Entry, []byte, error) {
	return s.readTaking(pid, from, maxBytes, buf, false)
}

// ReadAheadAt starts a read of up to maxBytes at (pid, from) for a ReadOn
// or ReadHere call there soon: a reader
// that knows where it reads next (a Kafka fetch session knows where its
// next fetch starts) has that read done while it sends. Nothing is started
// if a read there was started already or read-ahead has no room.
func (s *Store) ReadAheadAt(pid PartitionID, from int64, maxBytes int) {
	ra := &s.ra
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if sl := s.startReadLocked(pid, from, maxBytes, nil, false); sl != nil {
		sl.asked = true
	}
}

// readTaking serves a read from one started ahead at from if there is one
// worth serving, and reads afresh otherwise; with on, it starts the read
// after it (readAheadAfter).
func (s *Store) readTaking(pid PartitionID, from int64, maxBytes int, buf []byte, on bool) ([]Entry, []byte, error) {
	var spare []byte
	if sl := s.ra.take(pid, from); sl != nil {
		<-sl.done
		if p, err := s.partition(pid); sl.err == nil && err == nil && from >= p.start.Load() && sl.enough(p.hw.Load()) {
			s.ra.hits.Add(1)
			if sl.asked {
				s.ra.askedHits.Add(1)
			}
			es := fitEntries(sl.es, maxBytes)
			if on {
				s.readAheadAfter(pid, es, maxBytes, buf, true)
			} else {
				s.ra.keep(buf)
			}
			return es, sl.buf, nil
		}
		spare = sl.buf
	}
	es, keep, err := s.ReadInto(pid, from, maxBytes, buf)
	if err == nil && on {
		s.readAheadAfter(pid, es, maxBytes, spare, true)
	} else {
		s.ra.keep(spare)
	}
	return es, keep, err
}

// enough says whether the read started ahead is worth serving with the
// high watermark at hw: it reached hw, or it read at least half of its
// room. One started just short of the high watermark of its time read
// little, and a fresh read gives the reader what arrived since.
func (sl *readAheadSlot) enough(hw int64) bool {
	if len(sl.es) == 0 {
		return false
	}
	last := sl.es[len(sl.es)-1]
	if last.BaseOffset+last.Count >= hw {
		return true
	}
	n := 0
	for _, e := range sl.es {
		n += len(e.Value)
	}
	return 2*n >= sl.maxBytes
}

// fitEntries is the entries of es a read of maxBytes returns: ReadInto's
// bound, whole entries up to maxBytes and at least one. A read started
// ahead with more room than its taker asks for serves it with these.
func fitEntries(es []Entry, maxBytes int) []Entry {
	read := 0
	for i, e := range es {
		if i > 0 && read+len(e.Value) > maxBytes {
			return es[:i]
		}
		read += len(e.Value)
		if read >= maxBytes {
			return es[:i+1]
		}
	}
	return es
}

// take removes and returns the read started ahead at (pid, from); nil if
// there is none. Its entries are served up to the taker's maxBytes
// (fitEntries).
func (ra *readAhead) take(pid PartitionID, from int64) *readAheadSlot {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	k := readAheadKey{pid, from}
	sl := ra.slots[k]
	if sl == nil {
		return nil
	}
	delete(ra.slots, k)
	ra.bytes -= sl.maxBytes
	return sl
}

// readAheadAfter starts reading after es, into spare, if es stops short
// of the partition's high watermark and read-ahead has room. With chain,
// the read after that one starts as soon as it is done, or at once if
// that read was started already and is done: a reader behind has two
// reads ahead, and the disk goes on reading while the reader sends.
func (s *Store) readAheadAfter(pid PartitionID, es []Entry, maxBytes int, spare []byte, chain bool) {
	next, ok := s.readAheadFrom(pid, es)
	if !ok {
		s.ra.keep(spare)
		return
	}
	ra := &s.ra
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.closing {
		return
	}
	if sl := ra.slots[readAheadKey{pid, next}]; sl != nil {
		ra.keepLocked(spare)
		if chain && !sl.chain && sl.maxBytes == maxBytes {
			sl.chain = true
			if sl.finished && sl.nextOK {
				s.startReadLocked(pid, sl.next, maxBytes, nil, false)
			}
		}
		return
	}
	s.startReadLocked(pid, next, maxBytes, spare, chain)
}

// readAheadFrom returns where a read after es starts, and whether to start
// it: es stops short of the partition's high watermark with at least
// another read like it waiting. A reader closer to the high watermark would
// find the read started ahead short of what arrives meanwhile (enough);
// one at the end waits for appends, not reads.
func (s *Store) readAheadFrom(pid PartitionID, es []Entry) (int64, bool) {
	if len(es) == 0 {
		return 0, false
	}
	last := es[len(es)-1]
	next := last.BaseOffset + last.Count
	p, err := s.partition(pid)
	return next, err == nil && p.hw.Load()-next >= next-es[0].BaseOffset
}

// startReadLocked starts the read at (pid, next) into spare, if there is
// none there and read-ahead has room, and returns its slot (nil if none
// was started); ra.mu is held. With chain, the read after it starts as
// soon as it is done, before its reader can take it, so never behind the
// reader.
func (s *Store) startReadLocked(pid PartitionID, next int64, maxBytes int, spare []byte, chain bool) *readAheadSlot {
	ra := &s.ra
	k := readAheadKey{pid, next}
	if ra.closing || ra.slots[k] != nil {
		ra.keepLocked(spare)
		return nil
	}
	now := time.Now()
	if len(ra.slots) >= readAheadSlots || ra.bytes+maxBytes > readAheadBytes {
		for k, sl := range ra.slots {
			select {
			case <-sl.done:
				if now.Sub(sl.made) > readAheadAge {
					delete(ra.slots, k)
					ra.bytes -= sl.maxBytes
				}
			default:
			}
		}
		if len(ra.slots) >= readAheadSlots || ra.bytes+maxBytes > readAheadBytes {
			ra.keepLocked(spare)
			return nil
		}
	}
	if spare == nil && len(ra.spares) > 0 {
		spare = ra.spares[len(ra.spares)-1]
		ra.spares = ra.spares[:len(ra.spares)-1]
	}
	if ra.slots == nil {
		ra.slots = map[readAheadKey]*readAheadSlot{}
	}
	sl := &readAheadSlot{maxBytes: maxBytes, made: now, done: make(chan struct{}), chain: chain}
	ra.slots[k] = sl
	ra.bytes += maxBytes
	ra.wg.Add(1)
	go func() {
		defer ra.wg.Done()
		es, buf, err := s.ReadInto(pid, next, maxBytes, spare)
		var after int64
		var more bool
		if err == nil {
			after, more = s.readAheadFrom(pid, es)
		}
		ra.mu.Lock()
		sl.es, sl.buf, sl.err = es, buf, err
		sl.next, sl.nextOK, sl.finished = after, more, true
		if sl.chain && more {
			s.startReadLocked(pid, after, maxBytes, nil, false)
		}
		ra.mu.Unlock()
		close(sl.done)
	}()
	return sl
}

// close stops read-ahead and waits for the reads in progress, before the
// store closes what they read.
func (ra *readAhead) close() {
	ra.mu.Lock()
	ra.closing = true
	ra.slots, ra.bytes, ra.spares = nil, 0, nil
	ra.mu.Unlock()
	ra.wg.Wait()
}

// keep holds buf, which a reader gave up and no read started ahead took,
// for the next read started without one: a reader that comes back to the
// high watermark gives up its buffer once, and one that falls behind again
// would otherwise start its next read ahead in a new buffer.
func (ra *readAhead) keep(buf []byte) {
	if buf == nil {
		return
	}
	ra.mu.Lock()
	ra.keepLocked(buf)
	ra.mu.Unlock()
}

func (ra *readAhead) keepLocked(buf []byte) {
	if buf != nil && cap(buf) <= readAheadSpareMax && !ra.closing && len(ra.spares) < readAheadSpares {
		ra.spares = append(ra.spares, buf[:0])
	}
}
