package localstore

import (
	"context"
	"fmt"
	"testing"
)

// TestCompressionSetting writes the same compressible entries under each
// compression and flushes them: the files pebble writes are near the
// entries' size with none and far below it with the others, so the
// setting reaches the blob files the entries live in.
func TestCompressionSetting(t *testing.T) {
	const entries, msgs, size = 64, 16, 1024 // 1 MiB of mostly zero bytes
	sizes := map[Compression]uint64{}
	for _, c := range []Compression{CompressionNone, CompressionSnappy, CompressionMinLZ, CompressionZstd} {
		s := openTest(t, Config{Compression: c, InlineEntries: true})
		tm, err := s.CreateTopic("persistent://public/default/c", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range entries {
			if _, err := s.Append(context.Background(), tm.PIDs[0], AppendRequest{Entry: makeEntry(t, fmt.Sprint(i), msgs, size, 0)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		m := s.db.Metrics()
		// Entries are above BlobMinSize: they are in the blob files.
		sizes[c] = m.Total().BlobBytesFlushed
		if sizes[c] == 0 {
			t.Fatalf("%s: flush wrote nothing", c)
		}
	}
	raw := uint64(entries * msgs * size)
	if sizes[CompressionNone] < raw {
		t.Fatalf("none wrote %d bytes for %d bytes of values: something compressed them", sizes[CompressionNone], raw)
	}
	for _, c := range []Compression{CompressionSnappy, CompressionMinLZ, CompressionZstd} {
		if sizes[c] > raw/4 {
			t.Errorf("%s wrote %d bytes for %d bytes of zeros: not compressed", c, sizes[c], raw)
		}
	}
	t.Logf("bytes flushed: %v (values %d)", sizes, raw)
}

// TestCompressionChangeKeepsData reopens one store under each compression
// in turn: what was written under another stays readable.
func TestCompressionChangeKeepsData(t *testing.T) {
	dir := t.TempDir()
	order := []Compression{CompressionSnappy, CompressionNone, CompressionZstd, CompressionMinLZ, CompressionNone}
	var pid PartitionID
	for round, c := range order {
		s, err := Open(Config{Dir: dir, Compression: c, InlineEntries: true})
		if err != nil {
			t.Fatalf("open with %s: %v", c, err)
		}
		if round == 0 {
			tm, err := s.CreateTopic("persistent://public/default/k", 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			pid = tm.PIDs[0]
		}
		es, err := s.Read(pid, 0, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != round*4 {
			t.Fatalf("round %d (%s): read %d entries, want %d", round, c, len(es), round*4)
		}
		for i, e := range es {
			if got, want := entryTag(t, e.Value), fmt.Sprintf("r%d", i/4); got != want {
				t.Fatalf("round %d (%s): entry %d has tag %s, want %s", round, c, i, got, want)
			}
		}
		for range 4 {
			if _, err := s.Append(context.Background(), pid, AppendRequest{Entry: makeEntry(t, fmt.Sprintf("r%d", round), 8, 2048, 0)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCompressionRejectsUnknown(t *testing.T) {
	_, err := Open(Config{Dir: t.TempDir(), Compression: "lz4"})
	if err == nil {
		t.Fatal("opened with compression lz4")
	}
	t.Log(err)
}
