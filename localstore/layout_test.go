package localstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// fillFlushes appends perFlush entries of 16 x 16 KiB to a fresh topic
// and flushes (and, with compact, compacts everything), flushes times, and
// returns the partition.
func fillFlushes(t *testing.T, s *Store, flushes, perFlush int, compact bool) PartitionID {
	t.Helper()
	tm, err := s.CreateTopic("persistent://public/default/layout", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for f := range flushes {
		for i := range perFlush {
			e := makeEntry(t, fmt.Sprint(f, "-", i), 16, 16<<10, 0)
			if _, err := s.Append(context.Background(), tm.PIDs[0], AppendRequest{Entry: e}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		if compact {
			if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tm.PIDs[0]
}

// checkEntries reads the partition back: every entry, in order.
func checkEntries(t *testing.T, s *Store, pid PartitionID, flushes, perFlush int) {
	t.Helper()
	es, err := s.Read(pid, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != flushes*perFlush {
		t.Fatalf("read %d entries, want %d", len(es), flushes*perFlush)
	}
	for i, e := range es {
		if got, want := entryTag(t, e.Value), fmt.Sprint(i/perFlush, "-", i%perFlush); got != want {
			t.Fatalf("entry %d is %q, want %q", i, got, want)
		}
	}
}

// TestFlushWritesOneBlobFile: a flush writes its values to one blob file,
// however much the memtable holds. Split at pebble's default 2 MiB L0
// target, a 64 MiB flush wrote 23 sstables and 23 blob files, and full-rate
// produce lost a fifth to a third of its throughput to file creations,
// fsyncs and compactions.
func TestFlushWritesOneBlobFile(t *testing.T) {
	const flushes, perFlush = 8, 24 // 6 MiB a flush, above the 2 MiB default
	s := openTest(t, Config{MemTableSize: 8 << 20, InlineEntries: true})
	pid := fillFlushes(t, s, flushes, perFlush, false)
	if n := s.db.Metrics().BlobFiles.LiveCount; n != flushes {
		t.Errorf("%d flushes left %d blob files, want one each", flushes, n)
	}
	checkEntries(t, s, pid, flushes, perFlush)
}

// TestCompactionKeepsBlobValues: compacting each flush into the ones before
// it carries the references to their blob files forward instead of copying
// the values into new ones. At pebble's default reference depth of 10 a
// full-rate run copied ~700 MiB a few seconds in.
func TestCompactionKeepsBlobValues(t *testing.T) {
	// Small flushes under a large target file size: each compaction's
	// output is one sstable referring to every flush's blob file.
	const flushes, perFlush = 24, 2 // 512 KiB a flush
	s := openTest(t, Config{MemTableSize: 8 << 20, InlineEntries: true})
	pid := fillFlushes(t, s, flushes, perFlush, true)
	total := s.db.Metrics().Total()
	// pebble counts a flush's blob bytes as compacted too.
	if n := total.BlobBytesCompacted - total.BlobBytesFlushed; n != 0 {
		t.Errorf("compacting %d flushes copied %d bytes of values into new blob files", flushes, n)
	}
	checkEntries(t, s, pid, flushes, perFlush)
}

// TestCompactionsRunUnasked: flushes past L0CompactionThreshold are
// compacted without a manual compaction, each waiting compaction granted
// when the one before is done (the store's scheduler has no periodic
// granting), until L0 is back under the threshold.
func TestCompactionsRunUnasked(t *testing.T) {
	const flushes, perFlush = 12, 2 // 512 KiB a flush
	s := openTest(t, Config{MemTableSize: 8 << 20, InlineEntries: true})
	pid := fillFlushes(t, s, flushes, perFlush, false)
	var m *pebble.Metrics
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		m = s.db.Metrics()
		if m.Levels[0].TablesCount < 4 && m.Compact.NumInProgress == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("L0 still has %d sstables (%d compactions done, %d running) 20s after %d flushes",
				m.Levels[0].TablesCount, m.Compact.Count, m.Compact.NumInProgress, flushes)
		}
	}
	if m.Compact.Count < 2 {
		t.Fatalf("%d flushes led to %d compactions, want several", flushes, m.Compact.Count)
	}
	t.Logf("%d flushes, %d compactions, L0 %d sstables", flushes, m.Compact.Count, m.Levels[0].TablesCount)
	checkEntries(t, s, pid, flushes, perFlush)
}
