package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func smallDiskConfig(t *testing.T) DiskConfig {
	cfg := DefaultDiskConfig()
	cfg.Dir = t.TempDir()
	cfg.Rate = 8 << 20
	cfg.Record = 64 << 10
	cfg.Warmup = 300 * time.Millisecond
	cfg.Duration = 1500 * time.Millisecond
	cfg.FlushFile = 1 << 20
	cfg.FlushChunk = 256 << 10
	cfg.SegmentFile = 1 << 20
	cfg.Settle = 0
	return cfg
}

// The probe makes every append durable on a real disk, counts the appends
// due in the measured window, and leaves nothing behind.
func TestDiskProbeRunsEachPattern(t *testing.T) {
	cfg := smallDiskConfig(t)
	var progress bytes.Buffer
	cfg.Progress = &progress
	res, err := RunDisk(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Patterns) != len(DiskPatterns) {
		t.Fatalf("%d patterns measured, want %d", len(res.Patterns), len(DiskPatterns))
	}
	// 8 MiB/s in 64 KiB appends is 128 a second: 192 in the window.
	want := int64(cfg.Duration.Seconds() * float64(cfg.Rate) / float64(cfg.Record))
	for i, p := range res.Patterns {
		if p.Pattern != DiskPatterns[i] {
			t.Errorf("pattern %d is %s, want %s", i, p.Pattern, DiskPatterns[i])
		}
		if p.Appends < want-2 || p.Appends > want+2 {
			t.Errorf("%s: %d appends measured, want %d", p.Pattern, p.Appends, want)
		}
		if p.Syncs < 1 || p.Syncs > p.Appends+1 {
			t.Errorf("%s: %d fdatasyncs for %d appends", p.Pattern, p.Syncs, p.Appends)
		}
		if p.Commit.Count != p.Appends || p.Commit.P50 <= 0 || p.Commit.Max < p.Commit.P99 {
			t.Errorf("%s: commit latency %+v for %d appends", p.Pattern, p.Commit, p.Appends)
		}
		if p.Fdatasync.Count != p.Syncs || p.Fdatasync.P50 <= 0 || p.Fdatasync.Max > p.Commit.Max {
			t.Errorf("%s: fdatasync latency %+v, commit %+v", p.Pattern, p.Fdatasync, p.Commit)
		}
		if mb := float64(want) * float64(cfg.Record) / cfg.Duration.Seconds() / 1e6; p.MBps < mb*0.95 || p.MBps > mb*1.05 {
			t.Errorf("%s: %.2f MB/s, want about %.2f", p.Pattern, p.MBps, mb)
		}
		// 1 MiB segment files at 8 MiB/s for 1.8 s: about 14.
		if (p.Pattern == DiskAllocated) != (p.Files >= 10) {
			t.Errorf("%s: wrote into %d segment files", p.Pattern, p.Files)
		}
		// 1 MiB flush files at 8 MiB/s: about 12 in the window.
		if flushes := p.FlushMBps * cfg.Duration.Seconds() * 1e6 / float64(cfg.FlushFile); (p.Pattern == DiskLogFlush) != (flushes >= 6) {
			t.Errorf("%s: %.1f flush files written in the window", p.Pattern, flushes)
		}
	}
	for _, p := range DiskPatterns {
		if !strings.Contains(progress.String(), "measure "+string(p)) {
			t.Errorf("no progress line measuring %s in:\n%s", p, progress.String())
		}
	}
	left, err := os.ReadDir(cfg.Dir)
	if err != nil || len(left) != 0 {
		t.Errorf("the probe left %v (%v) in its directory", left, err)
	}

	var table, js bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, p := range DiskPatterns {
		if !strings.Contains(table.String(), string(p)+"  ") {
			t.Errorf("table has no row for %s:\n%s", p, table.String())
		}
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back DiskResult
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Patterns) != len(DiskPatterns) || back.Patterns[2].Commit.P99 != res.Patterns[2].Commit.P99 {
		t.Errorf("JSON does not read back (%v): %s", err, js.String())
	}
}

// With a group commit interval, fdatasyncs start at most once per interval
// and each makes the appends that arrived meanwhile durable; without it the
// writer fdatasyncs once per append at this rate (one every 7.8 ms).
func TestDiskProbeGroupCommitInterval(t *testing.T) {
	cfg := smallDiskConfig(t)
	cfg.Patterns = []DiskPattern{DiskAllocated}
	cfg.GroupCommitInterval = 50 * time.Millisecond
	res, err := RunDisk(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Patterns[0]
	want := int64(cfg.Duration.Seconds() * float64(cfg.Rate) / float64(cfg.Record))
	if p.Appends < want-2 || p.Appends > want+2 {
		t.Errorf("%d appends measured, want %d", p.Appends, want)
	}
	// 1.5 s at one fdatasync per 50 ms at most, and one more that makes
	// the window's last appends durable.
	if most := int64(cfg.Duration/cfg.GroupCommitInterval) + 2; p.Syncs < 2 || p.Syncs > most {
		t.Errorf("%d fdatasyncs in the window, want 2 to %d", p.Syncs, most)
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "fdatasyncs at least 50 ms apart") {
		t.Errorf("the table does not say the interval:\n%s", table.String())
	}
}

// With busy threads, the probe runs them beside the writer for each
// pattern, reports the cores they got, and gives GOMAXPROCS back.
func TestDiskProbeBusy(t *testing.T) {
	cfg := smallDiskConfig(t)
	cfg.Patterns = []DiskPattern{DiskAllocated, DiskGrowing}
	cfg.Busy = 2
	procs := runtime.GOMAXPROCS(0)
	res, err := RunDisk(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after the probe, %d before", got, procs)
	}
	if res.Busy != 2 || res.Cores != runtime.NumCPU() {
		t.Errorf("result says %d busy threads on %d cores", res.Busy, res.Cores)
	}
	want := int64(cfg.Duration.Seconds() * float64(cfg.Rate) / float64(cfg.Record))
	for _, p := range res.Patterns {
		if p.Appends < want-2 || p.Appends > want+2 {
			t.Errorf("%s: %d appends measured, want %d", p.Pattern, p.Appends, want)
		}
		// Two spinning threads get a good part of a core however busy
		// the machine is, and no more than all of its cores.
		if runtime.GOOS == "linux" && (p.BusyCores < 0.2 || p.BusyCores > float64(runtime.NumCPU())+0.1) {
			t.Errorf("%s: the busy threads got %.2f cores of %d", p.Pattern, p.BusyCores, runtime.NumCPU())
		}
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "2 threads spinning beside it") || !strings.Contains(table.String(), "busy cores") {
		t.Errorf("the table does not say the busy threads:\n%s", table.String())
	}
}

func TestDiskConfigErrorsSayWhatToChange(t *testing.T) {
	for _, tc := range []struct {
		change func(*DiskConfig)
		want   string
	}{
		{func(c *DiskConfig) { c.Rate = 1000 }, "rate 1000 B/s is outside"},
		{func(c *DiskConfig) { c.Record = 100 }, "record 100 B is outside"},
		{func(c *DiskConfig) { c.Rate, c.Record = 1<<20, 2<<20 }, "lower the record or raise the rate"},
		{func(c *DiskConfig) { c.Duration = 0 }, "want a positive duration"},
		{func(c *DiskConfig) { c.Patterns = []DiskPattern{"wal"} }, `unknown pattern "wal"`},
		{func(c *DiskConfig) { c.Dir = "" }, "no directory given"},
		{func(c *DiskConfig) { c.FlushChunk = c.FlushFile + 1 }, "a chunk within it"},
		{func(c *DiskConfig) { c.Record, c.FlushFile, c.FlushChunk = 4<<20, 2<<20, 1<<20 }, "at least 1 MiB and one record"},
		{func(c *DiskConfig) { c.SegmentFile = 512 << 10 }, "segment file 524288 B: want at least 1 MiB"},
		{func(c *DiskConfig) { c.Settle = -time.Second }, "settle -1s: want 0 to 10m"},
		{func(c *DiskConfig) { c.GroupCommitInterval = 2 * time.Second }, "group commit interval 2s: want 0 to 1s"},
		{func(c *DiskConfig) { c.Busy = -1 }, "busy -1 threads: want 0 to 64"},
		{func(c *DiskConfig) { c.Busy = 65 }, "busy 65 threads: want 0 to 64"},
	} {
		cfg := DefaultDiskConfig()
		tc.change(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error saying %q", err, tc.want)
		}
	}
	if err := DefaultDiskConfig().Validate(); err != nil {
		t.Errorf("the default config is refused: %v", err)
	}
	if _, err := ParseDiskPatterns("log, log+flush"); err != nil {
		t.Error(err)
	}
	if _, err := ParseDiskPatterns("log,fsync"); err == nil || !strings.Contains(err.Error(), "want log, allocated, growing, log+flush") {
		t.Errorf("got %v for an unknown pattern", err)
	}
	cfg := DefaultDiskConfig()
	cfg.Dir = "/nonexistent/dir"
	if _, err := RunDisk(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "give a writable directory") {
		t.Errorf("got %v for a missing directory", err)
	}
}
