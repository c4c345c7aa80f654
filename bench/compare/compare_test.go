package compare

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/ternmq/tern/bench/peer"
	"github.com/ternmq/tern/internal/perf"
)

// TestMain lets this test binary serve as the peer processes the runner
// starts (it runs `SELF peer KIND ...`), so the test needs no second build.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "peer" {
		if err := peer.Command(os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCompareTiny compares tern (over Kafka and over WebSocket), kfake
// and JetStream in a tiny run of every workload and checks the tables and
// the ratios are printed.
func TestCompareTiny(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Systems = []string{"tern/kafka", "tern/websocket", "kfake", "jetstream"}
	cfg.Workload.Backlog = 2000
	rep := runTiny(t, cfg)
	if got, want := len(rep.Runs), 4*3; got != want {
		t.Fatalf("%d runs, want %d", got, want)
	}
	for _, r := range rep.Runs {
		if f := headline(r); f == nil || f.Messages == 0 {
			t.Errorf("%s %s: no messages", r.Label, r.Mode)
		}
		if r.Server == nil || r.Server.RSSPeak <= 0 {
			t.Errorf("%s %s: no server RSS", r.Label, r.Mode)
		}
		if r.Mode == perf.ModeE2E && r.Rate <= 0 {
			t.Errorf("%s e2e ran at rate %d; want half its produce rate", r.Label, r.Rate)
		}
	}
	out := tables(t, rep)
	// The tern servers' own figures of their e2e runs, and no one else's.
	views := map[string]ServerView{}
	for _, v := range rep.Views {
		views[v.System] = v
	}
	if v := views["tern/kafka"]; v.P99["Produce wait"] <= 0 || v.P99["Fetch send"] <= 0 || v.P99["fdatasync"] <= 0 || v.P99["append commit"] <= 0 {
		t.Errorf("tern/kafka's server view lacks its produce wait, fetch send, fdatasync or append commit: %+v", v)
	}
	if v := views["tern/websocket"]; v.P99["fdatasync"] <= 0 || v.P99["Produce wait"] != 0 {
		t.Errorf("tern/websocket's server view: %+v; want its fdatasync and no Kafka phases", v)
	}
	if len(views) != 2 {
		t.Errorf("server views of %d systems, want tern's two: %+v", len(views), rep.Views)
	}
	for _, want := range []string{"produce, as fast as possible", "consume a backlog", "end-to-end at a fixed rate", "tern/kafka / this", "tern/websocket", "kfake", "jetstream", "load average", "machine speed (CRC-32C of a cached MiB): start ", "server disk reads in the window (MB per round): tern/kafka ", "server anonymous memory peak (MiB per round): tern/kafka ", "machine busy/iowait/steal % in the window (per round): tern/kafka ", "server p99 by phase", "tern/kafka round 1: Produce receive <="} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
}

// TestCompareTernServe runs tern's systems as `tern serve` processes of
// a tern binary built for the test. Its first start fails as one whose
// port was taken between picking and binding does, and is tried again.
func TestCompareTernServe(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "tern-real")
	build := exec.Command("go", "build", "-o", real, "github.com/ternmq/tern/cmd/tern")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build tern: %v\n%s", err, out)
	}
	// The binary given to compare notes each start, then becomes tern; the
	// first time it fails instead, as tern does when a port is taken.
	marker := filepath.Join(dir, "started")
	failed := filepath.Join(dir, "failed")
	bin := filepath.Join(dir, "tern")
	// It also keeps each config it is given ($3: serve --config FILE).
	confs := filepath.Join(dir, "configs")
	script := fmt.Sprintf("#!/bin/sh\necho \"$@\" >> %s\ncat \"$3\" >> %s; echo --- >> %s\n"+
		"if [ ! -e %s ]; then : > %s; echo 'listen tcp 127.0.0.1:9: bind: address already in use' >&2; exit 1; fi\n"+
		"exec %s \"$@\"\n", marker, confs, confs, failed, failed, real)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The second system runs with a config file's settings, its
	// durability over the file's.
	settings := filepath.Join(dir, "settings.yaml")
	if err := os.WriteFile(settings, []byte("storage: {segment_cache: 48MiB, durability: sync}\nkafka: {default_partitions: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(t)
	cfg.Systems = []string{"tern/kafka", "tern-async/kafka#" + settings}
	cfg.Modes = []perf.Mode{perf.ModeProduce}
	cfg.TernBinary = bin
	rep := runTiny(t, cfg)
	if len(rep.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		if f := headline(r); f == nil || f.Messages == 0 {
			t.Errorf("%s: no messages", r.Label)
		}
		if r.Server == nil || r.Server.RSSPeak <= 0 {
			t.Errorf("%s: no server RSS", r.Label)
		} else if r.Server.DiskReadBytes == nil || *r.Server.DiskReadBytes < 0 {
			t.Errorf("%s: no server disk reads (%v)", r.Label, r.Server.DiskReadBytes)
		} else if r.Server.AnonPeak <= 0 || r.Server.AnonPeak > r.Server.RSSPeak {
			t.Errorf("%s: anonymous memory peak %d bytes, RSS peak %d; want some, within it", r.Label, r.Server.AnonPeak, r.Server.RSSPeak)
		}
	}
	served := 0
	for _, n := range rep.Notes {
		if strings.Contains(n, "served by "+bin+" serve") {
			served++
		}
	}
	if served != 2 {
		t.Errorf("notes do not say both systems ran under tern serve: %q", rep.Notes)
	}
	given, _ := os.ReadFile(confs)
	runs := strings.Split(strings.TrimSuffix(string(given), "---\n"), "---\n")
	if len(runs) != 3 {
		t.Fatalf("%d configs given to tern serve, want 3:\n%s", len(runs), given)
	}
	for i, c := range runs {
		var n struct {
			Storage struct {
				Durability   string `yaml:"durability"`
				SegmentCache string `yaml:"segment_cache"`
			} `yaml:"storage"`
			Kafka struct {
				DefaultPartitions int `yaml:"default_partitions"`
			} `yaml:"kafka"`
		}
		if err := yaml.Unmarshal([]byte(c), &n); err != nil {
			t.Fatalf("config %d: %v\n%s", i, err, c)
		}
		// The order rotates each round; with one round, tern/kafka first.
		want := "sync"
		if i == 2 {
			want = "async"
			if n.Storage.SegmentCache != "48MiB" || n.Kafka.DefaultPartitions != 3 {
				t.Errorf("tern-async/kafka#settings ran without the file's settings:\n%s", c)
			}
		} else if n.Storage.SegmentCache != "" {
			t.Errorf("tern/kafka ran with another system's settings:\n%s", c)
		}
		if n.Storage.Durability != want {
			t.Errorf("config %d: durability %q, want %q:\n%s", i, n.Storage.Durability, want, c)
		}
	}
	settingsNoted := false
	for _, n := range rep.Notes {
		settingsNoted = settingsNoted || strings.Contains(n, "tern's settings from "+settings)
	}
	if !settingsNoted {
		t.Errorf("notes do not name the settings file: %q", rep.Notes)
	}
	starts, _ := os.ReadFile(marker)
	if n := strings.Count(string(starts), "serve --config"); n != 3 {
		t.Errorf("tern serve started %d times, want 3 (the first failing on a taken port):\n%s", n, starts)
	}
}

// tinyConfig is one round of half-second runs of small messages, with
// this test binary as the peer.
func tinyConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.Rounds = 1
	cfg.Self = os.Args[0]
	cfg.Dir = t.TempDir()
	cfg.Workload.Warmup = 0
	cfg.Workload.Duration = 500 * time.Millisecond
	cfg.Workload.MessageSize = 256
	cfg.Settle = 0
	return cfg
}

// runTiny runs cfg, failing the test with the progress lines on error.
func runTiny(t *testing.T, cfg Config) *Report {
	t.Helper()
	var progress bytes.Buffer
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	return rep
}

// TestCompareDisk runs the disk probe after the e2e runs, at the first
// system's e2e byte rate, and reports it with the tables.
func TestCompareDisk(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Systems = []string{"kfake"}
	cfg.Modes = []perf.Mode{perf.ModeE2E}
	cfg.E2ERate = 8000 // 8000 256 B messages: 2 MB/s
	cfg.Disk = true
	cfg.DiskBusy = 1
	rep := runTiny(t, cfg)
	if rep.Disk == nil || rep.DiskSystem != "kfake" {
		t.Fatalf("no disk probe for kfake: %+v", rep.Disk)
	}
	if got, want := rep.Disk.Rate, float64(8000*256)/1e6; got != want {
		t.Errorf("disk probe at %.3f MB/s, want %.3f (kfake's e2e rate)", got, want)
	}
	if len(rep.Disk.Patterns) != len(perf.DiskPatterns) {
		t.Fatalf("%d disk patterns, want %d", len(rep.Disk.Patterns), len(perf.DiskPatterns))
	}
	for _, p := range rep.Disk.Patterns {
		if p.Appends == 0 || p.Commit.P99 <= 0 {
			t.Errorf("disk pattern %s measured nothing: %+v", p.Pattern, p)
		}
	}
	if rep.Disk.Busy != 0 || rep.DiskBusy == nil || rep.DiskBusy.Busy != 1 || len(rep.DiskBusy.Patterns) != len(perf.DiskPatterns) {
		t.Fatalf("want the probe idle, then again with one busy thread: %+v, %+v", rep.Disk, rep.DiskBusy)
	}
	for _, p := range rep.DiskBusy.Patterns {
		if p.Appends == 0 || (runtime.GOOS == "linux" && p.BusyCores <= 0) {
			t.Errorf("busy disk pattern %s: %d appends, the busy thread got %.2f cores", p.Pattern, p.Appends, p.BusyCores)
		}
	}
	out := tables(t, rep)
	for _, want := range []string{"the disk at kfake's e2e rate", "log+flush", "growing", "with 1 thread spinning on the CPU", "busy cores"} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
}

func TestValidate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Systems = []string{"redpanda"}
	cfg.Modes = []perf.Mode{perf.ModeE2E}
	cfg.Rounds = 0
	err := cfg.Validate()
	for _, want := range []string{`"redpanda"`, "needs the produce workload", "--rounds"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %s", err, want)
		}
	}
	// A config file is for tern's systems, must be named, and must be a
	// valid tern config.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("storage: {segment_cache: most}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for system, want := range map[string]string{
		"kfake#x.yaml":                  "for tern's systems",
		"tern/kafka#":                   "name a tern config file",
		"tern/kafka#/no/such/tern.yaml": "no such file",
		"tern/kafka#" + bad:             `"most"`,
	} {
		cfg := DefaultConfig()
		cfg.Systems = []string{system}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v does not say %s", system, err, want)
		}
	}
	cfg = DefaultConfig()
	cfg.Modes = []perf.Mode{perf.ModeProduce}
	cfg.Disk = true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "add e2e to --workloads") {
		t.Errorf("--disk without e2e: got %v", err)
	}
	cfg = DefaultConfig()
	cfg.DiskBusy = 2
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--disk-busy runs the disk probe again with busy threads: add --disk") {
		t.Errorf("--disk-busy without --disk: got %v", err)
	}
	cfg.Disk, cfg.DiskBusy = true, -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--disk-busy -1: want 0 to 64") {
		t.Errorf("--disk-busy -1: got %v", err)
	}
	cfg.DiskBusy = 2
	if err := cfg.Validate(); err != nil {
		t.Errorf("--disk --disk-busy 2: got %v", err)
	}
}

// The e2e table says when each round's window opened after its warm-up,
// and how far behind the consumers still were when they never caught up.
func TestReportSaysWhenE2EWindowsOpened(t *testing.T) {
	run := func(label string, catchUp float64, behind int64) *perf.Result {
		return &perf.Result{Label: label, Mode: perf.ModeE2E, Rate: 1000, WarmupSeconds: 2, Seconds: 10,
			CatchUpSeconds: catchUp, BehindAtWindow: behind,
			Publish: &perf.Figures{Messages: 10000, MsgsPerSec: 1000}, Consume: &perf.Figures{Messages: 10000, MsgsPerSec: 1000}}
	}
	rep := &Report{Systems: []string{"a", "b"}, Rounds: 2, Runs: []*perf.Result{
		run("a", 0.1, 0), run("b", 2, 4321), run("a", 0.25, 0), run("b", 0.5, 0),
	}}
	out := tables(t, rep)
	for _, want := range []string{
		"a e2e rate: 1000 msgs/s; window opened 0.10s, 0.25s after the warm-up",
		"b e2e rate: 1000 msgs/s; window opened 2.00s (still 4321 messages behind), 0.50s after the warm-up",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// Each mode's table is followed by how late the load generator's timer
// fired, per system and round, so a stall can be told the server's or the
// machine's.
func TestReportGivesTheClientTimer(t *testing.T) {
	run := func(label string, p99, max float64) *perf.Result {
		return &perf.Result{Label: label, Mode: perf.ModeProduce, WarmupSeconds: 2, Seconds: 10,
			ClientTimerLate: &perf.Latency{Count: 2000, P99: p99, Max: max},
			Publish:         &perf.Figures{Messages: 10000, MsgsPerSec: 1000}}
	}
	rep := &Report{Systems: []string{"a", "b"}, Rounds: 2, Runs: []*perf.Result{
		run("a", 4.59, 13.51), run("b", 0.5, 1), run("a", 9.29, 44.67), run("b", 0.75, 2.25),
	}}
	out := tables(t, rep)
	want := "client timer late (p99/max ms per round): a 4.6/13.5, 9.3/44.7; b 0.5/1.0, 0.8/2.2"
	if !strings.Contains(out, want) {
		t.Errorf("report lacks %q:\n%s", want, out)
	}
}

// Each mode's table gives the median share of the machine's cores busy in
// the windows, and a line gives each round's busy, iowait and steal.
func TestReportGivesTheMachineCPU(t *testing.T) {
	run := func(label string, busy, iowait, steal float64) *perf.Result {
		r := &perf.Result{Label: label, Mode: perf.ModeProduce, WarmupSeconds: 2, Seconds: 10,
			Publish: &perf.Figures{Messages: 10000, MsgsPerSec: 1000}}
		if busy >= 0 {
			r.Machine = &perf.MachineCPU{Cores: 2, Busy: busy, IOWait: iowait, Steal: steal, Idle: 1 - busy - iowait - steal}
		}
		return r
	}
	rep := &Report{Systems: []string{"a", "b"}, Rounds: 2, Runs: []*perf.Result{
		run("a", 0.881, 0.10, 0.08), run("b", -1, 0, 0), run("a", 0.70, 0.05, 0.02), run("b", -1, 0, 0),
	}}
	out := tables(t, rep)
	for _, want := range []string{"machine busy/iowait/steal % in the window (per round): a 88/10/8, 70/5/2", "; busy %: median share of all the machine's cores"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The median of 88.1 and 70 is 79; b's runs say nothing.
	lines := strings.Split(out, "\n")
	var header, rowA, rowB string
	for _, l := range lines {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "system":
			header = l
		case len(f) > 0 && f[0] == "a":
			rowA = l
		case len(f) > 0 && f[0] == "b":
			rowB = l
		}
	}
	// The columns are right-aligned: a cell ends where its header does.
	end := strings.Index(header, "busy %") + len("busy %")
	if end < len("busy %") {
		t.Fatalf("no busy %% column:\n%s", out)
	}
	if len(rowA) < end || len(rowB) < end {
		t.Fatalf("rows shorter than the header:\n%s", out)
	}
	if got := strings.Fields(rowA[:end]); got[len(got)-1] != "79" {
		t.Errorf("a's busy cell %q, want 79:\n%s", got[len(got)-1], out)
	}
	if got := strings.Fields(rowB[:end]); got[len(got)-1] != "-" {
		t.Errorf("b's busy cell %q, want -:\n%s", got[len(got)-1], out)
	}
}

// The report gives the machine's speed and what a kernel entry cost before
// and after the runs, and says when the speed changed enough to make the
// figures incomparable; the probes themselves give figures.
func TestReportGivesTheMachineSpeed(t *testing.T) {
	run := &perf.Result{Label: "a", Mode: perf.ModeProduce, WarmupSeconds: 2, Seconds: 10,
		Publish: &perf.Figures{Messages: 10000, MsgsPerSec: 1000}}
	for _, c := range []struct {
		start, end float64
		warn       bool
	}{{30, 29, false}, {30, 20, true}, {20, 30, true}} {
		rep := &Report{Systems: []string{"a"}, Rounds: 1, Runs: []*perf.Result{run}, SpeedStart: c.start, SpeedEnd: c.end}
		out := tables(t, rep)
		want := fmt.Sprintf("machine speed (CRC-32C of a cached MiB): start %.1f GB/s, end %.1f GB/s", c.start, c.end)
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
		if got := strings.Contains(out, "WARNING: the machine's speed changed"); got != c.warn {
			t.Errorf("speed %.0f then %.0f GB/s: warned %v, want %v", c.start, c.end, got, c.warn)
		}
	}
	if v := perf.SpeedProbe(); v <= 0.1 {
		t.Errorf("speed probe gave %.3f GB/s", v)
	}
	// What a kernel entry cost, when the probe ran.
	rep := &Report{Systems: []string{"a"}, Rounds: 1, Runs: []*perf.Result{run}, SpeedStart: 30, SpeedEnd: 29, KernelStart: 552.4, KernelEnd: 601.6}
	if out, want := tables(t, rep), "kernel entry (a getppid system call): start 552 ns, end 602 ns"; !strings.Contains(out, want) {
		t.Errorf("report lacks %q:\n%s", want, out)
	}
	rep.KernelStart = 0
	if out := tables(t, rep); strings.Contains(out, "kernel entry") {
		t.Errorf("report gives a kernel entry cost it did not measure:\n%s", out)
	}
	// A system call takes more than a nanosecond and less than a
	// millisecond on any machine this runs on.
	if v := perf.KernelProbe(); v < 1 || v > 1e6 {
		t.Errorf("kernel probe gave %.1f ns", v)
	}
	// Each round's speed, marked where it differs from the start's.
	a := *run
	a.SpeedStart, a.SpeedEnd = 30, 29
	b := a
	b.SpeedEnd = 21
	rep = &Report{Systems: []string{"a"}, Rounds: 2, Runs: []*perf.Result{&a, &b}, SpeedStart: 30, SpeedEnd: 29}
	out := tables(t, rep)
	want := "machine speed (GB/s before/after per round; ! changed since the start): a 30/29, 30/21!"
	if !strings.Contains(out, want) {
		t.Errorf("report lacks %q:\n%s", want, out)
	}
}

// TestBucketQuantile: a view gives the bound of the bucket holding the
// quantile, and -1 when the quantile is past the last finite bucket.
func TestBucketQuantile(t *testing.T) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(`# TYPE tern_storage_segment_fsync_seconds histogram
tern_storage_segment_fsync_seconds_bucket{le="0.001"} 50
tern_storage_segment_fsync_seconds_bucket{le="0.002"} 99
tern_storage_segment_fsync_seconds_bucket{le="0.005"} 100
tern_storage_segment_fsync_seconds_bucket{le="+Inf"} 100
tern_storage_segment_fsync_seconds_sum 0.1
tern_storage_segment_fsync_seconds_count 100
# TYPE tern_pulsar_publish_seconds histogram
tern_pulsar_publish_seconds_bucket{le="0.001"} 1
tern_pulsar_publish_seconds_bucket{le="+Inf"} 10
tern_pulsar_publish_seconds_sum 100
tern_pulsar_publish_seconds_count 10
`))
	if err != nil {
		t.Fatal(err)
	}
	v := viewOf(fams)
	if len(v) != 2 || v["fdatasync"] != 2 || v["Pulsar publish"] != -1 {
		t.Fatalf("view %v, want fdatasync 2 ms and Pulsar publish past the last bucket", v)
	}
	line := viewLines([]ServerView{{System: "tern/pulsar", Mode: perf.ModeE2E, Round: 1, P99: v}}, perf.ModeE2E)
	if !strings.Contains(line, "tern/pulsar round 1: Pulsar publish over the last bucket, fdatasync <=2") {
		t.Fatalf("view line: %q", line)
	}
}

// tables is rep's tables as WriteTables writes them.
func tables(t *testing.T, rep *Report) string {
	t.Helper()
	var out bytes.Buffer
	if err := rep.WriteTables(&out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// The header's measured time is a produce or e2e run's: a consume run's
// window lasts as long as its backlog takes to read.
func TestReportMeasuredTime(t *testing.T) {
	cons := &perf.Result{Label: "a", Mode: perf.ModeConsume, WarmupSeconds: 2, Seconds: 1.2,
		Consume: &perf.Figures{Messages: 10000, MsgsPerSec: 8000}}
	e2e := &perf.Result{Label: "a", Mode: perf.ModeE2E, WarmupSeconds: 2, Seconds: 10,
		Publish: &perf.Figures{Messages: 10000, MsgsPerSec: 1000}, Consume: &perf.Figures{Messages: 10000, MsgsPerSec: 1000}}
	for _, c := range []struct {
		runs []*perf.Result
		want string
	}{
		{[]*perf.Result{cons, e2e}, "warm-up 2s, measured 10s\n"},
		{[]*perf.Result{cons}, "warm-up 2s, measured until each backlog is read\n"},
	} {
		rep := &Report{Systems: []string{"a"}, Rounds: 1, Runs: c.runs}
		if out := tables(t, rep); !strings.Contains(out, c.want) {
			t.Errorf("report lacks %q:\n%s", c.want, out)
		}
	}
}

// serveConfig carries a file's settings and sets the system's durability
// over them; an empty storage section is no settings, a scalar one an error.
func TestServeConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, base := range []string{"", write("empty.yaml", "storage:\nkafka: {default_partitions: 2}\n"), write("set.yaml", "storage: {durability: sync, segment_cache: 1GiB}\n")} {
		b, err := serveConfig(base, "async")
		if err != nil {
			t.Fatalf("%q: %v", base, err)
		}
		var doc struct {
			Storage map[string]string `yaml:"storage"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil || doc.Storage["durability"] != "async" {
			t.Errorf("%q: durability not async (%v):\n%s", base, err, b)
		}
		if strings.HasSuffix(base, "set.yaml") && doc.Storage["segment_cache"] != "1GiB" {
			t.Errorf("%q: the file's segment_cache is lost:\n%s", base, b)
		}
	}
	if _, err := serveConfig(write("scalar.yaml", "storage: 3\n"), "sync"); err == nil || !strings.Contains(err.Error(), "not a mapping") {
		t.Errorf("storage: 3 gave %v", err)
	}
}
