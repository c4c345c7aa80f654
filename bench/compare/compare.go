package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ternmq/tern/bench/peer"
	"github.com/ternmq/tern/internal/perf"
)

// Config is one comparison.
type Config struct {
	// Systems are the targets to compare (see Targets); the first is the
	// baseline of the ratios. Default DefaultTargets.
	Systems []string
	// Modes are the workloads, run in this order. Default produce,
	// consume, e2e.
	Modes []perf.Mode
	// Rounds is how many times each system runs each workload. Default 3.
	Rounds int
	// Workload holds the shared settings (size, partitions, producers,
	// consumers, duration, warm-up, backlog); Mode, Topic and Rate are set
	// per run.
	Workload perf.Config
	// E2ERate is the e2e publish rate in msgs/s; 0 runs each system at
	// half of its own median produce rate from this comparison.
	E2ERate int
	// Linger is the producers' batching delay. Default 1ms.
	Linger time.Duration
	// Self is the tern-bench binary that runs peers. Default: this one.
	Self string
	// Dir is where peers keep their data, one fresh directory per run.
	// Default: the system temp directory.
	Dir string
	// Progress receives progress lines. Nil prints nothing.
	Progress io.Writer
	// ProfileDir, if set, receives a CPU and an allocation profile of
	// every server run (SYSTEM-WORKLOAD-rN.cpu.pprof, .allocs.pprof).
	ProfileDir string
	// TernBinary, if set, is a tern binary whose `serve` runs the tern
	// systems instead of the server built into tern-bench: the process
	// measured is then the product itself (the peer binary also links
	// NATS and the Pulsar client, which it keeps resident).
	TernBinary string
	// Disk, with e2e runs, also runs the disk probe (tern bench disk) in
	// Dir at the first system's e2e byte rate: the floor the disk sets
	// under a durable e2e latency, measured in the same run.
	Disk bool
	// DiskBusy, with Disk, runs the probe a second time with this many
	// threads spinning on the CPU beside its writer (perf.DiskConfig.Busy):
	// the floor under a durable e2e latency when the disk's writer shares
	// the machine's cores with busy clients and servers, as every system
	// here does. 0: the probe runs once, on an idle machine.
	DiskBusy int
	// Settle is a pause before each latency measurement (every e2e run
	// and the disk probe's patterns), after the previous run's files were
	// removed: on a disk that discards freed blocks, new blocks written
	// within seconds of a removal of gigabytes can take ten or more times
	// as long to make durable, which would charge one system's cleanup to
	// the next system's latency. DefaultConfig's is 15s; 0: none.
	Settle time.Duration
}

// DefaultConfig is three rounds of produce, consume and e2e against
// DefaultTargets with 1 KiB messages.
func DefaultConfig() Config {
	w := perf.DefaultConfig()
	w.Backlog = 1_000_000
	return Config{
		Systems:  DefaultTargets,
		Modes:    []perf.Mode{perf.ModeProduce, perf.ModeConsume, perf.ModeE2E},
		Rounds:   3,
		Workload: w,
		Linger:   time.Millisecond,
		Settle:   15 * time.Second,
	}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if len(c.Systems) == 0 {
		errs = append(errs, errors.New("compare: --systems is empty"))
	}
	for _, s := range c.Systems {
		if _, err := lookupTarget(s); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range c.Modes {
		if m != perf.ModeProduce && m != perf.ModeConsume && m != perf.ModeE2E {
			errs = append(errs, fmt.Errorf("compare: workload %q: want produce, consume or e2e", m))
		}
	}
	if slices.Contains(c.Modes, perf.ModeE2E) && c.E2ERate == 0 && !slices.Contains(c.Modes, perf.ModeProduce) {
		errs = append(errs, errors.New("compare: e2e at half the maximum rate needs the produce workload first; add it or set --e2e-rate"))
	}
	if c.Rounds < 1 {
		errs = append(errs, fmt.Errorf("compare: --rounds %d: want at least 1", c.Rounds))
	}
	if c.TernBinary != "" && c.ProfileDir != "" {
		errs = append(errs, errors.New("compare: --profile-dir profiles the server built into tern-bench; leave out --tern (or profile tern serve through its --pprof)"))
	}
	if c.Disk && !slices.Contains(c.Modes, perf.ModeE2E) {
		errs = append(errs, errors.New("compare: --disk runs at the e2e rate: add e2e to --workloads"))
	}
	if c.DiskBusy != 0 && !c.Disk {
		errs = append(errs, errors.New("compare: --disk-busy runs the disk probe again with busy threads: add --disk"))
	}
	if c.DiskBusy < 0 || c.DiskBusy > 64 {
		errs = append(errs, fmt.Errorf("compare: --disk-busy %d: want 0 to 64 threads (the machine's cores make every core wanted)", c.DiskBusy))
	}
	if c.E2ERate < 0 {
		errs = append(errs, fmt.Errorf("compare: --e2e-rate %d: want 0 (half of the maximum) or a rate", c.E2ERate))
	}
	w := c.Workload
	w.Mode = perf.ModeE2E
	if err := w.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Report is a comparison's results.
type Report struct {
	Start     time.Time  `json:"start"`
	LoadStart [3]float64 `json:"load_start"`
	LoadEnd   [3]float64 `json:"load_end"`
	// SpeedStart and SpeedEnd are the machine's speed before the first
	// run and after the last (speedProbe, GB/s).
	SpeedStart float64 `json:"speed_start_gbps"`
	SpeedEnd   float64 `json:"speed_end_gbps"`
	// KernelStart and KernelEnd are what a kernel entry cost before the
	// first run and after the last (perf.KernelProbe, ns).
	KernelStart float64        `json:"kernel_entry_start_ns"`
	KernelEnd   float64        `json:"kernel_entry_end_ns"`
	Systems     []string       `json:"systems"`
	Rounds      int            `json:"rounds"`
	Runs        []*perf.Result `json:"runs"`
	Notes       []string       `json:"notes"`
	// Skipped lists system/workload pairs not run, with the reason.
	Skipped []string `json:"skipped,omitempty"`
	// Disk is the disk probe at the first system's e2e rate (Config.Disk).
	Disk *perf.DiskResult `json:"disk,omitempty"`
	// DiskBusy is the probe run again with Config.DiskBusy threads
	// spinning beside its writer.
	DiskBusy *perf.DiskResult `json:"disk_busy,omitempty"`
	// DiskSystem is the system whose e2e rate the probe ran at.
	DiskSystem string `json:"disk_system,omitempty"`
	// Views are the tern servers' own figures of each e2e run.
	Views []ServerView `json:"server_views,omitempty"`
}

// skip says which pairs are not worth running: a JetStream that fsyncs
// every write fills a consume backlog at a few thousand messages a
// second (minutes for the default backlog), and its reads do not depend
// on the fsync setting, which the jetstream target already covers.
func skip(system string, m perf.Mode) string {
	if system == "jetstream-fsync" && m == perf.ModeConsume {
		return "jetstream-fsync consume: reads are the same as jetstream's; filling the backlog at its fsync-bound rate would take minutes"
	}
	return ""
}

// Run runs the comparison.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Self == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Self = exe
	}
	if cfg.Dir == "" {
		cfg.Dir = os.TempDir()
	}
	rep := &Report{Start: time.Now(), LoadStart: perf.LoadAvg(), SpeedStart: perf.SpeedProbe(), KernelStart: perf.KernelProbe(), Systems: cfg.Systems, Rounds: cfg.Rounds}
	defer func() {
		rep.LoadEnd, rep.SpeedEnd, rep.KernelEnd = perf.LoadAvg(), perf.SpeedProbe(), perf.KernelProbe()
	}()
	targets := make([]target, len(cfg.Systems))
	for i, s := range cfg.Systems {
		targets[i], _ = lookupTarget(s)
		if !slices.Contains(rep.Notes, targets[i].note) { // two of one kind, with other settings
			rep.Notes = append(rep.Notes, targets[i].note)
		}
		if c := targets[i].config; c != "" {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: tern's settings from %s (the system's durability over the file's)", targets[i].name, c))
		}
		if cfg.TernBinary != "" && targets[i].self == "" && targets[i].peerArgs[0] == peer.Tern {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: served by %s serve", targets[i].name, cfg.TernBinary))
		}
	}
	for _, m := range cfg.Modes {
		for r := range cfg.Rounds {
			for i := range targets {
				t := targets[(i+r)%len(targets)] // rotate the order each round
				if why := skip(t.name, m); why != "" {
					if r == 0 {
						rep.Skipped = append(rep.Skipped, why)
					}
					continue
				}
				w := cfg.Workload
				w.Mode = m
				w.Topic = ""
				w.Rate = 0
				if m == perf.ModeE2E {
					w.Rate = cfg.E2ERate
					if w.Rate == 0 {
						w.Rate = max(1, int(medianRate(rep.Runs, t.name, perf.ModeProduce)/2))
					}
				}
				if cfg.Progress != nil {
					fmt.Fprintf(cfg.Progress, "== %s round %d/%d: %s\n", m, r+1, cfg.Rounds, t.name)
				}
				if m == perf.ModeE2E {
					if err := settle(ctx, cfg); err != nil {
						return rep, err
					}
				}
				res, view, err := runOne(ctx, cfg, t, w, r+1)
				if err != nil {
					return rep, fmt.Errorf("compare: %s %s round %d: %w", t.name, m, r+1, err)
				}
				rep.Runs = append(rep.Runs, res)
				if view != nil {
					rep.Views = append(rep.Views, ServerView{System: t.name, Mode: m, Round: r + 1, P99: view})
				}
			}
		}
	}
	if cfg.Disk {
		if err := runDisk(ctx, cfg, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// runDisk runs the disk probe at the first system's e2e byte rate, in
// appends of 64 KiB (a produce request's worth at that rate), with the
// workload's warm-up and duration; with Config.DiskBusy, once more with
// that many threads spinning beside it.
func runDisk(ctx context.Context, cfg Config, rep *Report) error {
	rs := runsOf(rep.Runs, cfg.Systems[0], perf.ModeE2E)
	if len(rs) == 0 {
		return nil
	}
	d := perf.DefaultDiskConfig()
	d.Dir = cfg.Dir
	d.Rate = max(int64(rs[0].Rate)*int64(cfg.Workload.MessageSize), 1<<20)
	d.Warmup, d.Duration = cfg.Workload.Warmup, cfg.Workload.Duration
	d.Settle = max(cfg.Settle, 0)
	d.Progress = cfg.Progress
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "== disk probe at %s's e2e rate, %.1f MB/s\n", cfg.Systems[0], float64(d.Rate)/1e6)
	}
	if err := settle(ctx, cfg); err != nil {
		return err
	}
	res, err := perf.RunDisk(ctx, d)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	rep.Disk, rep.DiskSystem = res, cfg.Systems[0]
	if cfg.DiskBusy == 0 {
		return nil
	}
	d.Busy = cfg.DiskBusy
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "== disk probe again, %s spinning beside it\n", perf.Count(d.Busy, "thread"))
	}
	if err := settle(ctx, cfg); err != nil {
		return err
	}
	if rep.DiskBusy, err = perf.RunDisk(ctx, d); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	return nil
}

// settle waits cfg.Settle for the disk to finish with the files the runs
// before removed.
func settle(ctx context.Context, cfg Config) error {
	if cfg.Settle <= 0 {
		return nil
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "settling %v: the disk finishes with the files removed before\n", cfg.Settle)
	}
	return perf.Sleep(ctx, cfg.Settle)
}

// runOne starts a fresh server for t, runs w against it and stops it. For
// an e2e run of a server with /metrics it also returns the server's view.
func runOne(ctx context.Context, cfg Config, t target, w perf.Config, round int) (*perf.Result, map[string]float64, error) {
	dir, err := os.MkdirTemp(cfg.Dir, "tern-compare-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	args := t.peerArgs
	if cfg.ProfileDir != "" {
		base := filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-%s-r%d", strings.ReplaceAll(t.name, "/", "-"), w.Mode, round))
		args = append(slices.Clone(args), "--cpuprofile", base+".cpu.pprof", "--memprofile", base+".allocs.pprof")
	}
	self := cfg.Self
	if t.self != "" {
		self = t.self
	}
	var p *peerProc
	// A server's ports are picked free and then bound by it: a connection
	// made meanwhile (by this process's clients, or by anything else on
	// the machine) can take one. Such a start is tried again, on new ports
	// and an empty directory.
	for try := 1; ; try++ {
		if cfg.TernBinary != "" && t.self == "" && t.peerArgs[0] == peer.Tern {
			p, err = startServe(ctx, cfg.TernBinary, durability(t.peerArgs), t.config, dir)
		} else {
			p, err = startPeer(ctx, self, args, filepath.Join(dir, "data"))
		}
		if err == nil || try == portTries || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		if err := emptyDir(dir); err != nil {
			return nil, nil, err
		}
	}
	if err != nil {
		return nil, nil, err
	}
	d, err := t.driver(p.addrs, cfg.Linger)
	if err != nil {
		_ = p.stop()
		return nil, nil, err
	}
	w.Label = t.name
	w.Progress = cfg.Progress
	w.Probe = perf.PIDProbe(p.pid())
	res, err := perf.Run(ctx, w, d)
	_ = d.Close()
	var view map[string]float64
	if err == nil && w.Mode == perf.ModeE2E && t.peerArgs[0] == peer.Tern && p.addrs.HTTP != "" {
		var verr error
		if view, verr = scrapeView(p.addrs.HTTP); verr != nil && cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "no server view of %s: %v\n", t.name, verr)
		}
	}
	if serr := p.stop(); serr != nil && err == nil {
		err = serr
	}
	return res, view, err
}

// portTries is how many times runOne starts a server whose port was taken.
const portTries = 3

// emptyDir removes what dir holds, keeping dir.
func emptyDir(dir string) error {
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
