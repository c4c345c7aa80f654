package localstore

import (
	"bytes"
	"context"
	"testing"

	"github.com/ternmq/tern/protocols"
)

// TestAppendInPartsStoresTheSameEntry appends the same batch once encoded
// and once as envelope and batch: both read back byte for byte as the
// entry AppendEntry encodes, stamped with their own offset and time.
func TestAppendInPartsStoresTheSameEntry(t *testing.T) {
	s := openTest(t, Config{})
	tm, err := s.CreateTopic("parts", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := tm.PIDs[0]
	entry := makeEntry(t, "p", 3, 100, 1000)
	batch, err := protocols.SplitEntry(entry)
	if err != nil {
		t.Fatal(err)
	}
	env := &protocols.Envelope{OriginRegion: "eu", OriginOffset: 7, Visited: []string{"us"}, ProducerName: "prod", SequenceFirst: 1, SequenceLast: 3}
	ctx := context.Background()
	r1, err := s.Append(ctx, pid, AppendRequest{Entry: bytes.Clone(entry)})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Append(ctx, pid, AppendRequest{Envelope: env, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	// A nil envelope is the empty one.
	r3, err := s.Append(ctx, pid, AppendRequest{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	if r2.BaseOffset != 3 || r3.BaseOffset != 6 {
		t.Fatalf("offsets %d, %d; want 3, 6", r2.BaseOffset, r3.BaseOffset)
	}
	es, err := s.Read(pid, 0, 1<<20)
	if err != nil || len(es) != 3 {
		t.Fatalf("read %d entries, %v", len(es), err)
	}
	for i, c := range []struct {
		env *protocols.Envelope
		res AppendResult
	}{{&protocols.Envelope{}, r1}, {env, r2}, {&protocols.Envelope{}, r3}} {
		want, err := protocols.AppendEntry(nil, c.env, batch)
		if err != nil {
			t.Fatal(err)
		}
		if err := protocols.StampEntry(want, c.res.BaseOffset, c.res.AppendTime); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(es[i].Value, want) {
			t.Errorf("entry %d differs from its encoding", i)
		}
	}
	// The batch given in parts is not modified (the stamp goes into the
	// store's copy).
	if h, _ := protocols.ParseBatchHeader(batch); h.BaseOffset != 0 {
		t.Errorf("caller's batch stamped with base offset %d", h.BaseOffset)
	}
	// An envelope that cannot be encoded is refused before anything is
	// written.
	long := &protocols.Envelope{OriginRegion: string(make([]byte, 300))}
	if _, err := s.Append(ctx, pid, AppendRequest{Envelope: long, Batch: batch}); err == nil {
		t.Error("an over-long origin region was accepted")
	}
	if _, hw, _ := s.Offsets(pid); hw != 9 {
		t.Errorf("high watermark %d after a refused append; want 9", hw)
	}
}
