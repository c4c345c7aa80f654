package localstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ternmq/tern/protocols"
)

// randomEntry is makeEntry with random values after the tag, so a part
// read from the wrong place cannot match by accident.
func randomEntry(t *testing.T, rng *rand.Rand, tag string, n, size int) []byte {
	t.Helper()
	e := makeEntry(t, tag, n, size, 1000)
	batch, err := protocols.SplitEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := protocols.Records(batch, mustHeader(t, batch), &protocols.Decompressor{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		v := bytes.Clone(msgs[i].Value)
		for j := len(tag) + 8; j < len(v); j++ {
			v[j] = byte(rng.Uint32())
		}
		msgs[i].Value = v
	}
	batch, err = protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err = protocols.AppendEntry(nil, &protocols.Envelope{}, batch)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustHeader(t *testing.T, batch []byte) protocols.BatchHeader {
	t.Helper()
	h, err := protocols.ValidateBatch(batch)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// entryKeys counts a partition's entry keys: first parts, later parts, and
// the largest value stored under any of them.
func entryKeys(t *testing.T, s *Store, pid PartitionID) (firsts, parts, largest int) {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pidPrefix(kindEntry, pid), UpperBound: pidEnd(kindEntry, pid)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if _, _, part := decodeEntryPartKey(it.Key()); part {
			parts++
		} else {
			firsts++
		}
		v, err := it.ValueAndErr()
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, len(v))
	}
	return firsts, parts, largest
}

// TestLargeEntriesAreStoredInParts: an entry above entryPartSize is stored
// as values of at most that size, and every read gives it back byte for
// byte, whether it comes whole or in parts, from the memtable or from blob
// files after a flush and a reopen, read from its base or from inside it,
// alone or between small entries; retention removes its parts with it.
func TestLargeEntriesAreStoredInParts(t *testing.T) {
	dir := t.TempDir()
	s, pid := openTopic(t, Config{Dir: dir, InlineEntries: true}, "large")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	// small, 1 MB (six parts), exactly one part, one byte over, small;
	// the second large entry goes in as envelope and batch.
	specs := []struct {
		n, size int
		parts   bool
	}{{2, 100, false}, {1000, 1000, false}, {1, 0, false}, {1, 0, false}, {1000, 1000, true}, {3, 50, false}}
	var want [][]byte
	var bases []int64
	for i, sp := range specs {
		var e []byte
		switch i {
		case 2, 3:
			// Sized so the whole entry is entryPartSize bytes, then one more.
			e = sizedEntry(t, entryPartSize+(i-2))
		default:
			e = randomEntry(t, rng, string(rune('a'+i)), sp.n, sp.size)
		}
		req := AppendRequest{Entry: bytes.Clone(e)}
		if sp.parts {
			batch, _ := protocols.SplitEntry(e)
			req = AppendRequest{Envelope: &protocols.Envelope{}, Batch: batch}
		}
		r, err := s.Append(ctx, pid, req)
		if err != nil {
			t.Fatalf("append %d (%d bytes): %v", i, len(e), err)
		}
		if err := protocols.StampEntry(e, r.BaseOffset, r.AppendTime); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
		bases = append(bases, r.BaseOffset)
	}
	firsts, parts, largest := entryKeys(t, s, pid)
	wantParts := 0
	for _, e := range want {
		wantParts += entryParts(len(e))
	}
	if firsts != len(want) || parts != wantParts || wantParts < 10 {
		t.Fatalf("stored %d entries in %d extra parts; want %d in %d", firsts, parts, len(want), wantParts)
	}
	if largest > entryPartSize {
		t.Fatalf("a stored value is %d bytes, over the %d-byte part size", largest, entryPartSize)
	}
	if entryParts(entryPartSize) != 0 || entryParts(entryPartSize+1) != 1 {
		t.Fatal("entryParts miscounts at the part size")
	}

	check := func(stage string) {
		t.Helper()
		es, err := s.Read(pid, 0, 1<<30)
		if err != nil {
			t.Fatalf("%s: read all: %v", stage, err)
		}
		if len(es) != len(want) {
			t.Fatalf("%s: read %d entries, want %d", stage, len(es), len(want))
		}
		for i := range es {
			if es[i].BaseOffset != bases[i] || !bytes.Equal(es[i].Value, want[i]) {
				t.Fatalf("%s: entry %d (base %d, %d bytes) differs from what was appended (base %d, %d bytes)",
					stage, i, es[i].BaseOffset, len(es[i].Value), bases[i], len(want[i]))
			}
		}
		// From inside each entry: the read starts with the entry holding
		// the offset, whole, and a small byte limit still gives one entry.
		for i := range want {
			last := bases[i]
			if i+1 < len(bases) {
				last = bases[i+1] - 1
			}
			for _, from := range []int64{bases[i], (bases[i] + last) / 2, last} {
				es, err := s.Read(pid, from, 1)
				if err != nil {
					t.Fatalf("%s: read at %d: %v", stage, from, err)
				}
				if len(es) != 1 || es[0].BaseOffset != bases[i] || !bytes.Equal(es[0].Value, want[i]) {
					t.Fatalf("%s: read at %d with a 1-byte limit did not give entry %d whole", stage, from, i)
				}
			}
		}
		// A limit that fits the first entry stops before the large one.
		es, err = s.Read(pid, 0, len(want[0])+10)
		if err != nil || len(es) != 1 {
			t.Fatalf("%s: read with a small limit gave %d entries, %v; want 1", stage, len(es), err)
		}
	}
	check("memtable")
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flushed")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Config{Dir: dir, InlineEntries: true})
	check("reopened")

	// Retention up to the small entry after the second large one removes
	// both large entries' parts.
	if _, err := s.TruncateBefore(pid, bases[5]); err != nil {
		t.Fatal(err)
	}
	if firsts, parts, _ := entryKeys(t, s, pid); firsts != 1 || parts != 0 {
		t.Fatalf("after retention %d entries and %d parts remain; want 1 and 0", firsts, parts)
	}
}

// sizedEntry is a one-record entry of exactly size bytes: the record's
// length varints skip sizes, so a producer name in the envelope makes up
// the difference.
func sizedEntry(t *testing.T, size int) []byte {
	t.Helper()
	e := makeEntry(t, "s", 1, size-200, 0)
	batch, err := protocols.SplitEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	const producerFixed = 2 + 8 + 8 // name length, first and last sequence
	name := string(bytes.Repeat([]byte{'p'}, size-len(e)-producerFixed))
	e, err = protocols.AppendEntry(nil, &protocols.Envelope{ProducerName: name}, batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(e) != size {
		t.Fatalf("entry of %d bytes, want %d", len(e), size)
	}
	return e
}

// TestMissingEntryPartIsCorrupt: a large entry with a part gone, or with a
// part where another belongs, is reported as corrupt, never returned short.
func TestMissingEntryPartIsCorrupt(t *testing.T) {
	s, pid := openTopic(t, Config{InlineEntries: true}, "torn")
	e := randomEntry(t, rand.New(rand.NewPCG(3, 4)), "t", 600, 1000)
	if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: e}); err != nil {
		t.Fatal(err)
	}
	n := entryParts(len(e))
	if n < 2 {
		t.Fatalf("entry of %d bytes has %d parts; the test wants at least 2", len(e), n)
	}
	// Part 1 renumbered as part 0 is out of sequence; the last part
	// missing leaves the entry short.
	v, closer, err := s.db.Get(entryPartKey(pid, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	v = bytes.Clone(v)
	_ = closer.Close()
	// A whole entry whose batch header claims more bytes than it holds
	// (the length field damaged) is refused before the read sizes a
	// buffer from it.
	small := makeEntry(t, "w", 2, 10, 0)
	r, err := s.Append(context.Background(), pid, AppendRequest{Entry: bytes.Clone(small)})
	if err != nil {
		t.Fatal(err)
	}
	at, _ := protocols.EntryBatchOffset(small)
	binary.BigEndian.PutUint32(small[at+8:], 1<<30) // batchLength
	if err := s.db.Set(logKey(kindEntry, pid, r.BaseOffset), small, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	es, err := s.Read(pid, r.BaseOffset, 1<<30)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged length: read gave %d entries and %v; want ErrCorrupt", len(es), err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Fatalf("damaged length: the read allocated %d MiB", n>>20)
	}
	for _, c := range []struct {
		name string
		edit func(b *pebble.Batch)
	}{
		{"last part missing", func(b *pebble.Batch) { _ = b.Delete(entryPartKey(pid, 0, uint32(n)), nil) }},
		{"part out of sequence", func(b *pebble.Batch) {
			_ = b.Delete(entryPartKey(pid, 0, 1), nil)
			_ = b.Set(entryPartKey(pid, 0, 0), v, nil)
		}},
	} {
		b := s.db.NewBatch()
		c.edit(b)
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if es, err := s.Read(pid, 0, 1<<30); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: read gave %d entries and %v; want ErrCorrupt", c.name, len(es), err)
		}
	}
}

// TestAppendRefusesABatchLongerOrShorterThanItsHeader: the store joins a
// large entry's parts up to the length its batch header gives, so an
// append whose batch disagrees with its header is refused.
func TestAppendRefusesABatchLongerOrShorterThanItsHeader(t *testing.T) {
	s, pid := openTopic(t, Config{InlineEntries: true}, "length")
	e := makeEntry(t, "l", 2, 10, 0)
	for _, bad := range [][]byte{append(bytes.Clone(e), 0), e[:len(e)-1]} {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: bad}); !errors.Is(err, protocols.ErrCorruptBatch) {
			t.Errorf("append of an entry %d bytes off its header: %v; want ErrCorruptBatch", len(bad)-len(e), err)
		}
	}
	if _, hw, _ := s.Offsets(pid); hw != 0 {
		t.Errorf("high watermark %d after refused appends", hw)
	}
}
