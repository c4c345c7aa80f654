package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ternmq/tern/bench/compare"
	"github.com/ternmq/tern/bench/jsdriver"
	"github.com/ternmq/tern/bench/peer"
	"github.com/ternmq/tern/bench/pulsardriver"
	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/perf/kafkadriver"
	"github.com/ternmq/tern/internal/perf/perfcli"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	root := &cobra.Command{
		Use:           "tern-bench",
		Short:         "tern's load generator with the heavy clients, the comparison runner and its peers",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(perfcli.Commands(perfcli.Options{
		Drivers: map[string]perfcli.Factory{
			"kafka":     kafkaDriver,
			"pulsar":    pulsarDriver,
			"jetstream": func(f *perfcli.Flags) (perf.Driver, error) { return jsdriver.New(f.NATSURL) },
			"websocket": perfcli.WebSocket,
		},
		Protocols:       []string{"kafka", "pulsar", "websocket", "jetstream"},
		DefaultAdminURL: adminURL,
	})...)
	root.AddCommand(compareCmd(), peerCmd())
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "tern-bench:", err)
	var ue perfcli.UsageError
	if errors.As(err, &ue) || strings.Contains(err.Error(), "unknown ") {
		return 2
	}
	return 1
}

func adminURL() string {
	if u := os.Getenv("TERN_URL"); u != "" {
		return u
	}
	return "http://127.0.0.1:8080"
}

func kafkaDriver(f *perfcli.Flags) (perf.Driver, error) {
	return kafkadriver.New(kafkadriver.FlagsConfig(f))
}

func pulsarDriver(f *perfcli.Flags) (perf.Driver, error) {
	u := f.AdminURL
	if u == "" {
		u = adminURL()
	}
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	return pulsardriver.New(pulsardriver.Config{URL: f.PulsarURL, AdminURL: u, Linger: f.Linger, NoBatching: f.NoBatching})
}

func compareCmd() *cobra.Command {
	cfg := compare.DefaultConfig()
	var systems, modes string
	var asJSON bool
	c := &cobra.Command{
		Use:   "compare",
		Short: "Run the same workloads against tern and its peers in one run and print ratios",
		Long: `Run the same workloads against tern and its peers (franz-go's in-memory kfake,
embedded NATS JetStream with file storage, with and without fsync per write) in
one run: every run gets a fresh server process, rounds interleave the systems
and rotate their order, and the tables give medians, ranges and ratios.

Systems: ` + strings.Join(compare.Targets, ", ") + `. NAME@BINARY runs a system's
server with another tern-bench build; NAME#FILE runs a tern system with the
settings of a tern config file (the system's durability over the file's), so
two builds or two settings are compared in one run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Systems = splitList(systems)
			cfg.Modes = nil
			for _, m := range splitList(modes) {
				cfg.Modes = append(cfg.Modes, perf.Mode(m))
			}
			if err := cfg.Validate(); err != nil {
				return perfcli.UsageError{Err: err}
			}
			cfg.Progress = cmd.ErrOrStderr()
			rep, err := compare.Run(cmd.Context(), cfg)
			if rep != nil && len(rep.Runs) > 0 {
				var werr error
				if asJSON {
					werr = rep.WriteJSON(cmd.OutOrStdout())
				} else {
					werr = rep.WriteTables(cmd.OutOrStdout())
				}
				err = errors.Join(err, werr)
			}
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&systems, "systems", strings.Join(compare.DefaultTargets, ","), "systems to compare, the first is the ratios' baseline: "+strings.Join(compare.Targets, ", "))
	fl.StringVar(&modes, "workloads", "produce,consume,e2e", "workloads to run, in order")
	fl.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds of each workload per system")
	fl.IntVar(&cfg.E2ERate, "e2e-rate", 0, "e2e publish rate in msgs/s; 0 = half of each system's median produce rate")
	fl.DurationVar(&cfg.Linger, "linger", cfg.Linger, "producer batching delay")
	fl.StringVar(&cfg.Dir, "dir", "", "where servers keep their data (default: the temp directory)")
	fl.StringVar(&cfg.ProfileDir, "profile-dir", "", "write CPU and allocation profiles of every server run here")
	fl.StringVar(&cfg.TernBinary, "tern", "", "a tern `binary` whose serve runs tern's systems, so the product itself is measured, not the server built into tern-bench")
	fl.DurationVar(&cfg.Settle, "settle", cfg.Settle, "pause before each e2e run and disk pattern, so the disk finishes with the files the runs before removed (0: none)")
	fl.BoolVar(&cfg.Disk, "disk", false, "also time the disk under --dir at the first system's e2e rate (tern bench disk), with no server running")
	fl.IntVar(&cfg.DiskBusy, "disk-busy", 0, "with --disk, time the disk again with this many threads spinning on the CPU beside the probe (the machine's cores: every core wanted, as clients and servers here want them)")
	fl.BoolVar(&asJSON, "json", false, "print every run as JSON instead of the tables")
	w := &cfg.Workload
	fl.IntVar(&w.MessageSize, "size", w.MessageSize, "message payload size in bytes")
	fl.IntVar(&w.Partitions, "partitions", w.Partitions, "partitions of each topic")
	fl.IntVar(&w.Producers, "producers", w.Producers, "producer clients")
	fl.IntVar(&w.Consumers, "consumers", w.Consumers, "consumer clients")
	fl.DurationVar(&w.Duration, "duration", w.Duration, "measured time of each run")
	fl.DurationVar(&w.Warmup, "warmup", w.Warmup, "unmeasured time before each run's window (consume: at most a fifth of the backlog)")
	fl.Int64Var(&w.Backlog, "backlog", w.Backlog, "consume: messages in the backlog")
	fl.DurationVar(&w.Interval, "interval", w.Interval, "progress line period")
	return c
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// peerCmd serves one system for compare (package peer does the work).
func peerCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "peer tern|kfake|jetstream [--dir DIR] [--durability sync|async] [--fsync] [--cpuprofile F] [--memprofile F]",
		Short:              "Serve one system for compare until stdin closes (internal)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return peer.Command(args, os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}
