package localstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ternmq/tern/protocols"
)

// replayConfig is memConfig with pebble's WAL never fsynced on the
// interval, so appends are durable in their segments alone.
func replayConfig(fs vfs.FS) Config {
	cfg := memConfig(fs)
	cfg.AsyncSyncInterval = time.Hour
	return cfg
}

// reopen opens the store on fs after a crash; it closes with the test.
func reopen(t testing.TB, fs vfs.FS) *Store {
	t.Helper()
	s, err := Open(replayConfig(fs))
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openCrashable opens a store with replayConfig on a crashable in-memory
// filesystem, with a topic of the given partitions (0: one log), and
// appends n entries of 2 records of size bytes to its first log.
func openCrashable(t testing.TB, topic string, partitions, n, size int) (*vfs.MemFS, *Store, *TopicMeta) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	s, err := Open(replayConfig(fs))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := s.CreateTopic(topic, partitions, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Append(context.Background(), tm.PIDs[0], AppendRequest{Entry: makeEntry(t, fmt.Sprintf("%s%d", topic, i), 2, size, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	return fs, s, tm
}

// TestReplayAppliesWhatPebbleLost: appends acknowledged after the
// segments' fdatasync alone, with pebble's WAL not fsynced since the topic
// was made, are all there after a crash that keeps only what was fsynced:
// their entries, offsets and the guard's operations, applied by replay.
// The next append continues after them.
func TestReplayAppliesWhatPebbleLost(t *testing.T) {
	fs, s, tm := openCrashable(t, "replay", 2, 0, 0)
	want := map[PartitionID][][]byte{}
	lastBase := map[PartitionID]int64{}
	const n = 40
	for i := range n {
		pid := tm.PIDs[i%2]
		size := 300
		if i%7 == 3 {
			size = 40 << 10 // written past the record buffer, by its appender
		}
		e := makeEntry(t, fmt.Sprintf("r%d", i), 1+i%4, size, 1000)
		r, err := s.Append(context.Background(), pid, AppendRequest{Entry: e, Guard: func(base int64) ([]Op, *AppendResult, error) {
			return []Op{CursorOp(pid, "guarded", Cursor{MarkDelete: base})}, nil, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := protocols.StampEntry(e, r.BaseOffset, r.AppendTime); err != nil {
			t.Fatal(err)
		}
		want[pid] = append(want[pid], e)
		lastBase[pid] = r.BaseOffset
	}
	if m := s.Metrics(); m.WALFsync.Count > 2 {
		// Opening and the topic's creation; none for the appends.
		t.Errorf("%d WAL fsyncs; the appends should have needed none", m.WALFsync.Count)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = s.Close()

	s2 := reopen(t, crashed)
	if st := s2.replayed; st.applied != n || st.present != 0 || st.unfollowed+st.torn+st.deleted != 0 {
		t.Errorf("replay: %+v, want all %d batches applied", st, n)
	}
	for _, pid := range tm.PIDs {
		sameEntries(t, readAll(t, s2, pid), want[pid])
		checkDense(t, s2, pid, -1)
		_, hw, _ := s2.Offsets(pid)
		c, ok, err := s2.LoadCursor(pid, "guarded")
		if err != nil || !ok || c.MarkDelete != lastBase[pid] {
			t.Errorf("partition %d: the guard's cursor is %+v (found %v, %v), want the last entry's base %d", pid, c, ok, err, lastBase[pid])
		}
		r, err := s2.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, "after", 1, 10, 0)})
		if err != nil || r.BaseOffset != hw {
			t.Fatalf("append after the crash at %d (%v), want %d", r.BaseOffset, err, hw)
		}
	}
	// After a clean close the next open has nothing to replay and reads
	// no segment for it.
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := reopen(t, crashed)
	if st := s3.replayed; st.applied != 0 || st.segments != 0 {
		t.Errorf("open after a clean close read %d segments and applied %d batches again", st.segments, st.applied)
	}
	for _, pid := range tm.PIDs {
		checkDense(t, s3, pid, -1)
	}
}

// TestReplayIgnoresAReusedSegmentsOldRecords: a segment file is written
// again under a new number with its old records behind the new ones.
// Replay reads a batch record only where it says it was written: records
// moved under another number (here the whole file, renamed, as reuse
// would leave them) are not applied, though the partition's head would
// take them.
func TestReplayIgnoresAReusedSegmentsOldRecords(t *testing.T) {
	fs, s, tm := openCrashable(t, "reuse", 0, 5, 100)
	pid := tm.PIDs[0]
	seg := segPointerOf(t, s, pid, 0).Seg
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = s.Close()

	dir := crashed.PathJoin("/data", segmentsDir)
	if err := crashed.Rename(crashed.PathJoin(dir, segName(seg)), crashed.PathJoin(dir, segName(seg+10))); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, crashed)
	if st := s2.replayed; st.records != 0 || st.applied != 0 {
		t.Errorf("replay read %d batch records and applied %d from a segment under another number", st.records, st.applied)
	}
	if _, hw, _ := s2.Offsets(pid); hw != 0 {
		t.Errorf("the log ends at %d, want 0: nothing was durable in pebble", hw)
	}
}

// TestReplayAfterAnAsyncAppend: a partition takes a sync append, an async
// one, then a sync one (its namespace's durability changed twice while a
// producer ran). The last one's acknowledgement covers the async append
// before it: after a crash that keeps only what was fsynced, all three
// are there. Replay alone could not bring back the third: the async
// append, in pebble only, would be missing in front of it.
func TestReplayAfterAnAsyncAppend(t *testing.T) {
	fs, s, tm := openCrashable(t, "mixed", 0, 0, 0)
	pid := tm.PIDs[0]
	var want [][]byte
	for i, d := range []Durability{DurabilitySync, DurabilityAsync, DurabilitySync} {
		want = append(want, appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("m%d", i), 2, 500, 1000), d))
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = s.Close()
	s2 := reopen(t, crashed)
	sameEntries(t, readAll(t, s2, pid), want)
}

// FuzzReplaySegment: whatever bytes a segment holds after a crash (torn
// writes, a reused file's old records, damage), Open either refuses with
// ErrCorrupt or opens a store whose log is dense and readable; it never
// panics. The seeds are a segment holding real appends, cut and damaged.
func FuzzReplaySegment(f *testing.F) {
	fs, s, tm := openCrashable(f, "fuzz", 0, 4, 40)
	pid := tm.PIDs[0]
	ptr := segPointerOf(f, s, pid, 0)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = s.Close()
	name := crashed.PathJoin("/data", segmentsDir, segName(ptr.Seg))
	seg, err := crashed.Open(name)
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, seg); err != nil {
		f.Fatal(err)
	}
	_ = seg.Close()
	whole := bytes.TrimRight(buf.Bytes(), "\x00")
	f.Add(whole)
	f.Add(whole[:len(whole)/2])
	damaged := bytes.Clone(whole)
	damaged[len(damaged)-5] ^= 0xff
	f.Add(damaged)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fs := crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		w, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(w.Sync(), w.Close()); err != nil {
			t.Fatal(err)
		}
		s, err := Open(replayConfig(fs))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open: %v, want ErrCorrupt or success", err)
			}
			return
		}
		defer s.Close()
		checkDense(t, s, pid, -1)
		if _, hw, _ := s.Offsets(pid); hw > 8 {
			t.Fatalf("the log ends at %d; only 8 offsets were ever appended", hw)
		}
	})
}

// FuzzBatchRecords: the record scan a replay runs over a segment hands on
// only batch records whose checksum holds and which name the segment and
// the offset they are at, in increasing offsets, and never panics,
// whatever the segment holds. (FuzzReplaySegment runs whole opens; this
// one is cheap enough to fuzz for long.)
func FuzzBatchRecords(f *testing.F) {
	// A segment of an entry record, a batch record behind it, and zeros.
	var seg []byte
	entry := makeEntry(f, "e", 1, 30, 0)
	seg = binary.BigEndian.AppendUint32(seg, uint32(len(entry)))
	seg = binary.BigEndian.AppendUint32(seg, crc32.Checksum(entry, castagnoli))
	seg = append(seg, entry...)
	body := make([]byte, batchRecordHead, batchRecordHead+12)
	binary.BigEndian.PutUint32(body[0:], 7)
	binary.BigEndian.PutUint32(body[4:], uint32(len(seg)))
	body = append(body, make([]byte, 12)...)
	seg = binary.BigEndian.AppendUint32(seg, uint32(len(body))|segBatchFlag)
	seg = binary.BigEndian.AppendUint32(seg, crc32.Checksum(body, castagnoli))
	seg = append(seg, body...)
	f.Add(append(seg, make([]byte, 64)...))
	f.Add(seg[:len(seg)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		last := int64(-1)
		err := batchRecords(bytes.NewReader(b), int64(len(b)), 7, func(body []byte) error {
			if len(body) < batchRecordHead || binary.BigEndian.Uint32(body) != 7 {
				t.Fatalf("a %d-byte body not naming segment 7", len(body))
			}
			off := int64(binary.BigEndian.Uint32(body[4:]))
			if off <= last || off+segRecordHeader+int64(len(body)) > int64(len(b)) {
				t.Fatalf("a record at %d after one at %d, in %d bytes", off, last, len(b))
			}
			h := b[off : off+segRecordHeader]
			if binary.BigEndian.Uint32(h)&segBatchFlag == 0 || crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(h[4:]) ||
				!bytes.Equal(b[off+segRecordHeader:off+segRecordHeader+int64(len(body))], body) {
				t.Fatalf("the record at %d is not the one handed on", off)
			}
			last = off
			return nil
		})
		if err != nil {
			t.Fatalf("scan of an in-memory segment: %v", err)
		}
	})
}
