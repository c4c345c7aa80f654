package localstore

import (
	"context"
	"fmt"
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

// TestReplayAppliesWhatPebbleLost: appends acknowledged after the
// segments' fdatasync alone, with pebble's WAL not fsynced since the topic
// was made, are all there after a crash that keeps only what was fsynced:
// their entries, offsets and the guard's operations, applied by replay.
// The next append continues after them.
func TestReplayAppliesWhatPebbleLost(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s, err := Open(replayConfig(fs))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := s.CreateTopic("replay", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
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

	s2, err := Open(replayConfig(crashed))
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer s2.Close()
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
	s3, err := Open(replayConfig(crashed))
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
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
	fs := vfs.NewCrashableMem()
	s, err := Open(replayConfig(fs))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := s.CreateTopic("reuse", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := tm.PIDs[0]
	for i := range 5 {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, fmt.Sprintf("o%d", i), 2, 100, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	seg := segPointerOf(t, s, pid, 0).Seg
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = s.Close()

	dir := crashed.PathJoin("/data", segmentsDir)
	if err := crashed.Rename(crashed.PathJoin(dir, segName(seg)), crashed.PathJoin(dir, segName(seg+10))); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(replayConfig(crashed))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
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
	fs := vfs.NewCrashableMem()
	s, err := Open(replayConfig(fs))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := s.CreateTopic("mixed", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := tm.PIDs[0]
	var want [][]byte
	for i, d := range []Durability{DurabilitySync, DurabilityAsync, DurabilitySync} {
		want = append(want, appendStamped(t, s, pid, makeEntry(t, fmt.Sprintf("m%d", i), 2, 500, 1000), d))
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = s.Close()
	s2, err := Open(replayConfig(crashed))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	sameEntries(t, readAll(t, s2, pid), want)
}
