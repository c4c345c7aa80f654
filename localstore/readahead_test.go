package localstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
)

// appendEntries appends n entries of 4 offsets and size-byte values each
// to pid.
func appendEntries(t *testing.T, s *Store, pid PartitionID, n, size int) {
	t.Helper()
	for i := range n {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, fmt.Sprintf("e%d", i), 4, size, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadOnReadsWhatReadIntoReads: a reader reading a log on from its
// start, passing back each call's buffer, gets the entries ReadInto gives,
// byte for byte, and all but its first read are served by reads started
// ahead. At the high watermark nothing is started.
func TestReadOnReadsWhatReadIntoReads(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			s, pid := openTopic(t, Config{InlineEntries: inline}, "on")
			appendEntries(t, s, pid, 200, 3000)
			const max = 40 << 10 // three or four entries a read
			var buf []byte
			reads, ahead := 0, 0
			for from := int64(0); from < 800; {
				es, got, err := s.ReadOn(pid, from, max, buf)
				if err != nil {
					t.Fatal(err)
				}
				want, err := s.Read(pid, from, max)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) != len(want) {
					t.Fatalf("read at %d: %d entries, ReadInto gives %d", from, len(es), len(want))
				}
				for i := range es {
					if es[i].BaseOffset != want[i].BaseOffset || es[i].Count != want[i].Count || !bytes.Equal(es[i].Value, want[i].Value) {
						t.Fatalf("read at %d: entry %d is %d+%d, ReadInto gives %d+%d (values equal: %v)", from, i,
							es[i].BaseOffset, es[i].Count, want[i].BaseOffset, want[i].Count, bytes.Equal(es[i].Value, want[i].Value))
					}
				}
				last := es[len(es)-1]
				next := last.BaseOffset + last.Count
				if 800-next >= next-from {
					ahead++ // another read like this one is left
				}
				from, buf = next, got
				reads++
			}
			if hits := s.Metrics().ReadAheadHits; hits != int64(ahead) || ahead < reads-3 {
				t.Errorf("%d of %d reads served ahead, want %d: all but the first and those near the end", hits, reads, ahead)
			}
			s.ra.mu.Lock()
			left := len(s.ra.slots)
			s.ra.mu.Unlock()
			if left != 0 {
				t.Errorf("%d reads started past the high watermark", left)
			}
		})
	}
}

// TestReadOnKeepsTwoReadsAhead: a reader behind has the next two reads
// started: the one after its read, and the one after that once the first
// is done, so the disk reads on while the reader sends.
func TestReadOnKeepsTwoReadsAhead(t *testing.T) {
	s, pid := openTopic(t, Config{}, "two")
	appendEntries(t, s, pid, 200, 3000)
	const max = 40 << 10
	end := func(es []Entry) int64 { return es[len(es)-1].BaseOffset + es[len(es)-1].Count }
	var buf []byte
	from := int64(0)
	for step := range 6 {
		es, got, err := s.ReadOn(pid, from, max, buf)
		if err != nil {
			t.Fatal(err)
		}
		next := end(es)
		after, err := s.Read(pid, next, max)
		if err != nil {
			t.Fatal(err)
		}
		want := []int64{next, end(after)}
		var have []int64
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			s.ra.mu.Lock()
			have = have[:0]
			for k := range s.ra.slots {
				have = append(have, k.from)
			}
			s.ra.mu.Unlock()
			slices.Sort(have)
			if slices.Equal(have, want) || time.Now().After(deadline) {
				break
			}
		}
		if !slices.Equal(have, want) {
			t.Fatalf("read %d, at %d: reads started ahead at %v, want %v", step, from, have, want)
		}
		from, buf = next, got
	}
	if hits := s.Metrics().ReadAheadHits; hits != 5 {
		t.Errorf("%d reads served ahead, want all 5 after the first", hits)
	}
}

// TestReadOnDropsWhatChangedUnderIt: a read started ahead is not served
// once the log's start moved past it, nor once its topic was deleted; the
// reader gets what ReadInto gives then. A reader with less room than the
// read started ahead is served the part of it that fits.
func TestReadOnDropsWhatChangedUnderIt(t *testing.T) {
	s, pid := openTopic(t, Config{}, "moved")
	appendEntries(t, s, pid, 40, 1000)
	es, _, err := s.ReadOn(pid, 0, 8<<10, nil)
	if err != nil {
		t.Fatal(err)
	}
	// One entry a read: reads start ahead at next and, once that one is
	// done, at next+4. The start moves past both.
	next := es[len(es)-1].BaseOffset + 4
	if _, err := s.TruncateBefore(pid, next+8); err != nil {
		t.Fatal(err)
	}
	var oor *protocols.OffsetOutOfRangeError
	for _, at := range []int64{next, next + 4} {
		if _, _, err := s.ReadOn(pid, at, 8<<10, nil); !errors.As(err, &oor) {
			t.Fatalf("read at %d, below the new start: %v, want an offset out of range", at, err)
		}
	}
	if hits := s.Metrics().ReadAheadHits; hits != 0 {
		t.Errorf("%d reads served ahead, want none", hits)
	}
	// Less room than the read started at next+12 has: served what fits.
	es, _, err = s.ReadOn(pid, next+8, 8<<10, nil)
	if err != nil {
		t.Fatal(err)
	}
	after := es[len(es)-1].BaseOffset + 4
	if es, _, err = s.ReadOn(pid, after, 2<<10, nil); err != nil || len(es) != 1 || es[0].BaseOffset != after {
		t.Fatalf("read with less room: %d entries, %v; want 1 at %d", len(es), err, after)
	}
	if hits := s.Metrics().ReadAheadHits; hits != 1 {
		t.Errorf("%d reads served ahead, want 1", hits)
	}
	if err := s.DeleteTopic("moved"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadOn(pid, after+4, 8<<10, nil); !errors.Is(err, ErrPartitionNotFound) {
		t.Fatalf("read of a deleted topic: %v, want partition not found", err)
	}
}

// TestReadOnBounded: read-ahead starts no more reads than its bounds, and
// closing the store waits for the ones in progress.
func TestReadOnBounded(t *testing.T) {
	s := openTest(t, Config{})
	var pids []PartitionID
	for i := range readAheadSlots + 8 {
		tm, err := s.CreateTopic(fmt.Sprintf("t%d", i), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		appendEntries(t, s, tm.PIDs[0], 3, 100)
		pids = append(pids, tm.PIDs[0])
	}
	for _, pid := range pids {
		if _, _, err := s.ReadOn(pid, 0, 200, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.ra.mu.Lock()
	n := len(s.ra.slots)
	s.ra.mu.Unlock()
	if n != readAheadSlots {
		t.Errorf("%d reads started ahead, want the bound, %d", n, readAheadSlots)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnReadsAfreshWhenMoreArrived: a read started ahead that holds
// little (here: small entries up to the high watermark of its time),
// served once the log has grown, would make the reader take small reads
// one after another. Such a read is served while the high watermark stays
// where it was, and read afresh once it moved on.
func TestReadOnReadsAfreshWhenMoreArrived(t *testing.T) {
	s, pid := openTopic(t, Config{}, "grew")
	bigs := func() { appendEntries(t, s, pid, 2, 1000) }
	smalls := func() { appendEntries(t, s, pid, 2, 10) }
	bigs()
	smalls() // offsets 0-7 big, 8-15 small
	es, err := s.Read(pid, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	room := 2 * len(es[0].Value) // two big entries a read
	// started reads at from, expecting two big entries, and waits for the
	// read it starts at from+8.
	started := func(from int64) {
		t.Helper()
		es, _, err := s.ReadOn(pid, from, room, nil)
		if err != nil || len(es) != 2 {
			t.Fatalf("read at %d: %d entries, %v; want 2", from, len(es), err)
		}
		sl := s.ra.take(pid, from+8)
		if sl == nil {
			t.Fatalf("no read started at %d", from+8)
		}
		<-sl.done
		s.ra.mu.Lock()
		s.ra.slots[readAheadKey{pid, from + 8}] = sl
		s.ra.bytes += sl.maxBytes
		s.ra.mu.Unlock()
	}
	started(0)
	if es, _, err := s.ReadOn(pid, 8, room, nil); err != nil || len(es) != 2 || s.Metrics().ReadAheadHits != 1 {
		t.Fatalf("read at 8 with nothing new: %d entries, %v, %d served ahead; want 2 entries served ahead", len(es), err, s.Metrics().ReadAheadHits)
	}
	bigs()
	smalls() // 16-23 big, 24-31 small
	started(16)
	bigs() // 32-39
	if es, _, err := s.ReadOn(pid, 24, room, nil); err != nil || len(es) != 3 || s.Metrics().ReadAheadHits != 1 {
		t.Fatalf("read at 24 after appends: %d entries, %v, %d served ahead; want 3 entries read afresh", len(es), err, s.Metrics().ReadAheadHits)
	}
}

// TestReadOnKeepsTheBufferAReaderGaveUp: a reader that reaches the high
// watermark gives up its buffer with no read started ahead to take it; the
// next read started ahead (the reader behind again) fills that buffer
// instead of a new one. Without it a consumer going back and forth across
// the high watermark allocated a buffer per read started: at 606k msg/s
// end to end, 117 MB/s of garbage.
func TestReadOnKeepsTheBufferAReaderGaveUp(t *testing.T) {
	s, pid := openTopic(t, Config{}, "spare")
	appendEntries(t, s, pid, 4, 1000) // offsets 0-15
	es, err := s.Read(pid, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	room := 2 * len(es[0].Value)
	if _, _, err := s.ReadOn(pid, 0, room, nil); err != nil {
		t.Fatal(err)
	}
	given := make([]byte, 0, 64<<10)
	if es, _, err := s.ReadOn(pid, 8, room, given); err != nil || len(es) != 2 || s.Metrics().ReadAheadHits != 1 {
		t.Fatalf("read at 8: %d entries, %v, %d served ahead; want 2 served ahead", len(es), err, s.Metrics().ReadAheadHits)
	}
	s.ra.mu.Lock()
	kept := len(s.ra.spares) == 1 && &s.ra.spares[0][:1][0] == &given[:1][0]
	s.ra.mu.Unlock()
	if !kept {
		t.Fatal("the buffer given up at the high watermark was not kept")
	}
	appendEntries(t, s, pid, 4, 1000) // 16-31
	if _, _, err := s.ReadOn(pid, 16, room, nil); err != nil {
		t.Fatal(err)
	}
	sl := s.ra.take(pid, 24)
	if sl == nil {
		t.Fatal("no read started at 24")
	}
	<-sl.done
	if cap(sl.buf) == 0 || &sl.buf[:1][0] != &given[:1][0] {
		t.Fatal("the read started at 24 did not fill the buffer kept")
	}
}

// TestReadAheadAtServesReadHere: a read started at an offset a reader
// names (ReadAheadAt) serves the reader's ReadHere there, whatever room
// either has, with what a fresh read of the smaller room gives, byte for
// byte, and ReadHere starts no read after it. Entries of several sizes make
// the room's bound fall in different places.
func TestReadAheadAtServesReadHere(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			s, pid := openTopic(t, Config{InlineEntries: inline}, "at")
			for range 5 {
				appendEntries(t, s, pid, 3, 700)
				appendEntries(t, s, pid, 2, 3000)
				appendEntries(t, s, pid, 4, 100)
			}
			_, hw, err := s.Offsets(pid)
			if err != nil {
				t.Fatal(err)
			}
			hits, trimmed := int64(0), 0
			for _, from := range []int64{0, 12, 13, 40, 101, 176} {
				for _, ahead := range []int{1, 2 << 10, 9 << 10, 64 << 10} {
					for _, room := range []int{1, 800, 3 << 10, 9 << 10, 64 << 10} {
						s.ReadAheadAt(pid, from, ahead)
						s.ra.mu.Lock()
						sl := s.ra.slots[readAheadKey{pid, from}]
						s.ra.mu.Unlock()
						if sl == nil {
							t.Fatalf("no read started at %d", from)
						}
						<-sl.done
						got, _, err := s.ReadHere(pid, from, room, nil)
						if err != nil {
							t.Fatal(err)
						}
						served := s.Metrics().ReadAheadHits > hits
						hits = s.Metrics().ReadAheadHits
						if !served && sl.enough(hw) {
							t.Fatalf("from %d, started with %d, read with %d: read afresh", from, ahead, room)
						}
						fresh := room
						if served {
							fresh = min(ahead, room)
						}
						want, err := s.Read(pid, from, fresh)
						if err != nil {
							t.Fatal(err)
						}
						if len(got) != len(want) {
							t.Fatalf("from %d, started with %d, read with %d (served ahead: %v): %d entries, want %d", from, ahead, room, served, len(got), len(want))
						}
						for i := range want {
							if got[i].BaseOffset != want[i].BaseOffset || got[i].Count != want[i].Count || !bytes.Equal(got[i].Value, want[i].Value) {
								t.Fatalf("from %d, started with %d, read with %d: entry %d differs", from, ahead, room, i)
							}
						}
						if served && len(sl.es) > len(got) {
							trimmed++
						}
						s.ra.mu.Lock()
						left := len(s.ra.slots)
						s.ra.mu.Unlock()
						if left != 0 {
							t.Fatalf("from %d: %d reads started after ReadHere, want none", from, left)
						}
					}
				}
			}
			if hits == 0 || trimmed == 0 {
				t.Fatalf("%d reads served from reads started ahead, %d of them with fewer entries than were read; want some of each", hits, trimmed)
			}
			if asked := s.Metrics().ReadAheadAskedHits; asked != hits {
				t.Fatalf("%d reads served from reads asked for, of %d served ahead; want all", asked, hits)
			}
		})
	}
}
