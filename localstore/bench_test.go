package localstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ternmq/tern/protocols"
)

// BenchmarkAppend measures the partition log against raw pebble in the same
// run: 1 KiB messages, 1 to 1000 per entry, sync and async durability, with
// four concurrent appenders to one partition. The raw side writes the same
// value bytes under sequential keys with the same pebble options, the same
// durability and the same number of concurrent writers, so the ratio is
// what the log costs on top of pebble (offset assignment, index and head
// records, the ordered submit).
//
//	go test ./localstore -run NONE -bench Append -benchtime 2s
//
// The in=parts cases append the envelope and the batch separately, as the
// node does (the store encodes them straight into its write batch); the
// in=entry cases append an encoded entry, which costs the caller's encoding
// copy on top (included here, as a caller pays it).
func BenchmarkAppend(b *testing.B) {
	for _, dur := range []Durability{DurabilitySync, DurabilityAsync} {
		for _, n := range []int{1, 10, 100, 1000} {
			for _, parts := range []bool{false, true} {
				in := "entry"
				if parts {
					in = "parts"
				}
				b.Run(fmt.Sprintf("%s/msgs=%d/in=%s", dur, n, in), func(b *testing.B) { benchAppend(b, dur, n, parts) })
			}
		}
	}
}

const benchWriters = 4

func benchAppend(b *testing.B, dur Durability, msgs int, parts bool) {
	s := openTest(b, Config{Durability: dur})
	tm, err := s.CreateTopic("bench", 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	pid := tm.PIDs[0]
	entries := make([][]byte, benchWriters)
	for w := range entries {
		entries[w] = makeEntry(b, "b", msgs, 1024, 0)
	}
	size := len(entries[0])
	raw := openRaw(b)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()

	// The log and raw pebble take turns in rounds, so both see the same
	// disk (the first second of writes is faster than the sustained rate,
	// and other work on the machine comes and goes).
	const rounds = 4
	var logSecs, rawSecs, logCPU float64
	done := 0
	for r := 0; r < rounds; r++ {
		n := (b.N - done) / (rounds - r)
		done += n
		start := time.Now()
		cpu0 := cpuSeconds()
		b.StartTimer()
		parallel(n, func(w int) func() error {
			batch, _ := protocols.SplitEntry(entries[w])
			var env protocols.Envelope
			buf := make([]byte, 0, len(entries[w]))
			return func() error {
				req := AppendRequest{Envelope: &env, Batch: batch}
				if !parts {
					// What a caller holding envelope and batch paid before
					// the store took them in parts: encode, then append.
					e, err := protocols.AppendEntry(buf[:0], &env, batch)
					if err != nil {
						return err
					}
					req = AppendRequest{Entry: e}
				}
				_, err := s.Append(context.Background(), pid, req)
				return err
			}
		})
		b.StopTimer()
		logSecs += time.Since(start).Seconds()
		logCPU += cpuSeconds() - cpu0
		rawSecs += raw.write(b, dur, size, n)
	}
	logMB := float64(size) * float64(b.N) / logSecs / 1e6
	rawMB := float64(size) * float64(b.N) / rawSecs / 1e6
	b.ReportMetric(logMB, "log-MB/s")
	b.ReportMetric(rawMB, "raw-MB/s")
	b.ReportMetric(logMB/rawMB, "log/raw")
	b.ReportMetric(float64(b.N*msgs)/logSecs, "msgs/s")
	// CPU time per message (the whole process: pebble's flushes and
	// compactions included) depends far less on the machine's other load
	// than the rates do.
	b.ReportMetric(logCPU*1e9/float64(b.N*msgs), "cpu-ns/msg")
}

// cpuSeconds is the user and system CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// parallel runs n operations over benchWriters goroutines; writer w runs
// the function op(w) returns.
func parallel(n int, op func(w int) func() error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < benchWriters; w++ {
		wg.Add(1)
		f := op(w)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := f(); err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
}

// rawDB is plain pebble with the store's options.
type rawDB struct {
	db   *pebble.DB
	next atomic.Int64
}

func openRaw(b *testing.B) *rawDB {
	cfg := Config{Dir: b.TempDir()}
	cfg.fill()
	cache := pebble.NewCache(cfg.CacheSize)
	defer cache.Unref()
	db, err := pebble.Open(cfg.Dir, &pebble.Options{
		Cache:                       cache,
		MemTableSize:                cfg.MemTableSize,
		MemTableStopWritesThreshold: 2,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLogger{slog.New(slog.DiscardHandler)},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return &rawDB{db: db}
}

// write puts n values of size bytes under sequential keys with benchWriters
// concurrent writers and returns the seconds it took.
func (r *rawDB) write(b *testing.B, dur Durability, size, n int) float64 {
	opts := pebble.NoSync
	if dur == DurabilitySync {
		opts = pebble.Sync
	}
	value := make([]byte, size)
	start := time.Now()
	parallel(n, func(int) func() error {
		return func() error {
			i := r.next.Add(1)
			batch := r.db.NewBatch()
			defer batch.Close()
			_ = batch.Set(binary.BigEndian.AppendUint64([]byte{0x10}, uint64(i)), value, nil)
			return r.db.Apply(batch, opts)
		}
	})
	if dur == DurabilityAsync {
		_ = r.db.LogData(nil, pebble.Sync)
	}
	return time.Since(start).Seconds()
}
