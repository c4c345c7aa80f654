package localstore

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ternmq/tern/protocols"
)

// makeEntry builds an encoded entry of n messages with the given value size;
// each value starts with tag so tests can tell entries apart.
func makeEntry(t testing.TB, tag string, n, size int, ts int64) []byte {
	t.Helper()
	msgs := make([]protocols.Message, n)
	for i := range msgs {
		v := make([]byte, size)
		copy(v, fmt.Sprintf("%s/%d", tag, i))
		msgs[i] = protocols.Message{Timestamp: ts + int64(i), Value: v}
	}
	batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := protocols.AppendEntry(nil, &protocols.Envelope{}, batch)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// entryTag returns the tag makeEntry put in an entry's first value.
func entryTag(t testing.TB, v []byte) string {
	t.Helper()
	e, err := protocols.DecodeEntry(v)
	if err != nil {
		t.Fatalf("stored entry does not decode: %v", err)
	}
	msgs, err := protocols.Records(e.Batch, e.Header, &protocols.Decompressor{})
	if err != nil {
		t.Fatal(err)
	}
	v0 := msgs[0].Value
	i := bytes.IndexByte(v0, '/')
	if i < 0 {
		t.Fatalf("entry value %q has no tag", v0[:min(len(v0), 20)])
	}
	tag := string(v0[:i])
	return tag
}

func openTest(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func memConfig(fs vfs.FS) Config {
	// Small segments, so a crash test fills and removes several; a small
	// page-cache window, so dropping runs beside removal (an in-memory
	// file has no pages to drop, but the bookkeeping is the same).
	return Config{Dir: "/data", FS: fs, Logger: slog.New(slog.DiscardHandler), SegmentSize: 1 << 20, SegmentCache: 2 << 20}
}

// openTopic opens a store with cfg and creates a one-partition topic.
func openTopic(t testing.TB, cfg Config, name string) (*Store, PartitionID) {
	t.Helper()
	s := openTest(t, cfg)
	tm, err := s.CreateTopic(name, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, tm.PIDs[0]
}

// syncHookFS calls before ahead of, and after behind, every fdatasync of a
// file it made whose name ends in suffix (".seg", the segments; ".log",
// pebble's WAL): tests hold or count syncs with it. Either may be nil.
type syncHookFS struct {
	vfs.FS
	suffix        string
	before, after func()
}

func (fs syncHookFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !strings.HasSuffix(name, fs.suffix) {
		return f, err
	}
	return syncHookFile{f, fs.before, fs.after}, nil
}

type syncHookFile struct {
	vfs.File
	before, after func()
}

func (f syncHookFile) SyncData() error {
	if f.before != nil {
		f.before()
	}
	if f.after != nil {
		defer f.after()
	}
	return f.File.SyncData()
}
