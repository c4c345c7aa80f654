package localstore

import (
	"context"
	"fmt"
	"testing"
)

// TestReadFindsTheEntryHoldingAnyOffset reads from every offset of a log
// of entries of 1, 5 and 3 offsets: at an entry's base (the forward seek),
// inside an entry (the step back), and inside the last entry (no entry
// after it), each read starts with the entry holding the offset.
func TestReadFindsTheEntryHoldingAnyOffset(t *testing.T) {
	s := openTest(t, Config{})
	tm, err := s.CreateTopic("read", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := tm.PIDs[0]
	for i, n := range []int{1, 5, 3} {
		if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, fmt.Sprintf("e%d", i), n, 10, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	holder := []int64{0, 1, 1, 1, 1, 1, 6, 6, 6}
	for off, want := range holder {
		es, err := s.Read(pid, int64(off), 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(es) == 0 || es[0].BaseOffset != want {
			t.Errorf("read at %d starts with %v, want the entry at %d", off, es, want)
			continue
		}
		if last := es[len(es)-1]; last.BaseOffset != 6 {
			t.Errorf("read at %d ends at entry %d, want 6", off, last.BaseOffset)
		}
	}
}
