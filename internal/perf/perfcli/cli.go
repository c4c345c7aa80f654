package perfcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/perf/wsdriver"
)

// Flags are the parsed command line of one bench command.
type Flags struct {
	// Workload is the workload, with Mode set by the command.
	Workload perf.Config
	// Protocol is the protocol to drive.
	Protocol string
	// KafkaAddr, PulsarURL, WebSocketURL and NATSURL address the system.
	KafkaAddr, PulsarURL, WebSocketURL, NATSURL string
	// AdminURL is a tern node's admin URL; its /metrics supplies the
	// server figures (RSS and CPU).
	AdminURL string
	// ServerPID, if set, is probed through /proc instead of AdminURL.
	ServerPID int
	// NoServerFigures skips probing the server.
	NoServerFigures bool
	// JSON prints the result as JSON instead of a table.
	JSON bool
	// Acks, Linger and Compression configure producers where the
	// protocol has the setting (Kafka acks and compression; Kafka linger
	// and Pulsar batching delay).
	Acks        string
	Linger      time.Duration
	Compression string
	// FetchSize is a Kafka consumer's most per partition per fetch, in
	// bytes (0: the driver's default).
	FetchSize int
	// WSBatching has WebSocket producers ask for batching, with Linger
	// as the batching delay.
	WSBatching bool
	// NoBatching has Pulsar producers send each message alone.
	NoBatching bool
	// CPUProfile, if set, is where the load generator's own CPU profile
	// of the run goes (the client library's cost, which shares the
	// machine with the server).
	CPUProfile string
	// Trace, if set, is where the load generator's execution trace of
	// the run goes (go tool trace): where its goroutines waited.
	Trace string
}

// Factory makes the driver for one protocol from the flags.
type Factory func(f *Flags) (perf.Driver, error)

// Options say what a binary can drive.
type Options struct {
	// Drivers are the protocols this binary drives itself.
	Drivers map[string]Factory
	// Delegate runs protocols not in Drivers some other way (tern runs
	// tern-bench). args are the bench command's arguments, starting with
	// the mode. Nil: such protocols are usage errors.
	Delegate func(ctx context.Context, protocol string, args []string) error
	// Protocols lists every protocol name accepted, for help and checks.
	Protocols []string
	// DefaultAdminURL is the admin URL when --url is not given.
	DefaultAdminURL func() string
}

// UsageError is a problem with the command line: exit status 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Commands returns the produce, consume and e2e commands.
func Commands(opts Options) []*cobra.Command {
	var cmds []*cobra.Command
	for _, m := range []struct {
		mode  perf.Mode
		short string
	}{
		{perf.ModeProduce, "Publish as fast as possible (or at --rate) and report rate and publish latency"},
		{perf.ModeConsume, "Fill a backlog of --backlog messages, then report how fast consumers drain it"},
		{perf.ModeE2E, "Publish and consume at once and report end-to-end latency (run it at a --rate)"},
	} {
		cmds = append(cmds, command(m.mode, m.short, opts))
	}
	return cmds
}

func command(mode perf.Mode, short string, opts Options) *cobra.Command {
	f := &Flags{Workload: perf.DefaultConfig()}
	f.Workload.Mode = mode
	c := &cobra.Command{
		Use:   string(mode),
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, opts)
		},
	}
	fl := c.Flags()
	f.Workload.RegisterFlags(fl)
	fl.StringVar(&f.Protocol, "protocol", "kafka", "protocol to drive: "+strings.Join(opts.Protocols, ", "))
	fl.StringVar(&f.KafkaAddr, "kafka-addr", envOr("TERN_KAFKA", "127.0.0.1:9092"), "Kafka bootstrap host:port, comma separated ($TERN_KAFKA when set)")
	fl.StringVar(&f.PulsarURL, "pulsar-url", envOr("TERN_PULSAR", "pulsar://127.0.0.1:6650"), "Pulsar service URL ($TERN_PULSAR when set)")
	fl.StringVar(&f.WebSocketURL, "ws-url", envOr("TERN_WS", "ws://127.0.0.1:8080"), "Pulsar WebSocket endpoint base URL ($TERN_WS when set)")
	fl.StringVar(&f.NATSURL, "nats-url", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS URL for --protocol jetstream ($NATS_URL when set)")
	fl.StringVar(&f.AdminURL, "url", "", "tern admin URL whose /metrics gives server RSS and CPU (default $TERN_URL or http://127.0.0.1:8080)")
	fl.IntVar(&f.ServerPID, "server-pid", 0, "probe this local process for RSS and CPU instead of --url")
	fl.BoolVar(&f.NoServerFigures, "no-server-figures", false, "do not probe the server for RSS and CPU")
	fl.BoolVar(&f.JSON, "json", false, "print the result as JSON (progress lines go to stderr)")
	fl.StringVar(&f.Acks, "acks", "all", "Kafka acks: all, 1 or 0")
	fl.DurationVar(&f.Linger, "linger", time.Millisecond, "producer batching delay (Kafka linger, Pulsar batching max publish delay)")
	fl.StringVar(&f.Compression, "compression", "none", "Kafka batch compression: none, gzip, snappy, lz4, zstd")
	fl.BoolVar(&f.WSBatching, "ws-batching", false, "WebSocket producers ask the node to batch (batchingEnabled=true; --linger is the delay)")
	fl.BoolVar(&f.NoBatching, "no-batching", false, "Pulsar producers send each message alone (pulsar-perf's --disable-batching)")
	fl.IntVar(&f.FetchSize, "fetch-size", 1<<20, "Kafka consumers' most bytes per partition per fetch (max.partition.fetch.bytes)")
	fl.StringVar(&f.CPUProfile, "client-cpuprofile", "", "write this load generator's CPU profile of the run to this file")
	fl.StringVar(&f.Trace, "client-trace", "", "write this load generator's execution trace of the run to this file (large: keep runs short)")
	for name, modes := range modeFlags {
		if !slices.Contains(modes, mode) {
			_ = fl.MarkHidden(name)
		}
	}
	return c
}

// modeFlags are the flags only some modes use; the others leave them out
// of their help and refuse them.
var modeFlags = map[string][]perf.Mode{
	"consumers":  {perf.ModeConsume, perf.ModeE2E},
	"fetch-size": {perf.ModeConsume, perf.ModeE2E},
	"backlog":    {perf.ModeConsume},
}

// protocolFlags are the flags only some protocols' drivers use, with what
// to say to someone who gave one to another protocol.
var protocolFlags = map[string]struct {
	protocols []string
	hint      string
}{
	"acks":        {[]string{"kafka"}, ""},
	"compression": {[]string{"kafka"}, ""},
	"fetch-size":  {[]string{"kafka"}, ""},
	"ws-batching": {[]string{"websocket"}, ""},
	"no-batching": {[]string{"pulsar"}, "; a WebSocket producer sends each message alone unless --ws-batching is given"},
}

// checkApplies refuses a flag given to a mode or protocol that would
// ignore it: a run that silently left it out would measure something
// other than what was asked.
func checkApplies(fl *pflag.FlagSet, mode perf.Mode, protocol string) error {
	var err error
	fl.Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		if modes, ok := modeFlags[f.Name]; ok && !slices.Contains(modes, mode) {
			ms := make([]string, len(modes))
			for i, m := range modes {
				ms[i] = string(m)
			}
			err = fmt.Errorf("--%s is for %s, not %s: leave it out", f.Name, strings.Join(ms, " and "), mode)
			return
		}
		if p, ok := protocolFlags[f.Name]; ok && !slices.Contains(p.protocols, protocol) {
			err = fmt.Errorf("--%s is for --protocol %s, not %s%s", f.Name, strings.Join(p.protocols, " or "), protocol, p.hint)
		}
	})
	return err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(cmd *cobra.Command, f *Flags, opts Options) error {
	if !slices.Contains(opts.Protocols, f.Protocol) {
		return UsageError{fmt.Errorf("--protocol %q: want one of %s", f.Protocol, strings.Join(opts.Protocols, ", "))}
	}
	if err := checkApplies(cmd.Flags(), f.Workload.Mode, f.Protocol); err != nil {
		return UsageError{err}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	factory, ok := opts.Drivers[f.Protocol]
	if !ok {
		if opts.Delegate == nil {
			return UsageError{fmt.Errorf("--protocol %s is not built into this binary", f.Protocol)}
		}
		args := []string{string(f.Workload.Mode)}
		cmd.Flags().Visit(func(fl *pflag.Flag) { args = append(args, "--"+fl.Name+"="+fl.Value.String()) })
		return opts.Delegate(ctx, f.Protocol, args)
	}
	if err := f.Workload.Validate(); err != nil {
		return UsageError{err}
	}
	d, err := factory(f)
	if err != nil {
		return UsageError{err}
	}
	defer d.Close()
	out, progress := cmd.OutOrStdout(), cmd.OutOrStdout()
	if f.JSON {
		progress = cmd.ErrOrStderr()
	}
	cfg := f.Workload
	cfg.Progress = progress
	cfg.Label = "tern/" + f.Protocol
	if f.Protocol == "jetstream" {
		cfg.Label = "jetstream"
	}
	cfg.Probe = probe(ctx, f, opts, progress)
	if f.CPUProfile != "" {
		pf, err := os.Create(f.CPUProfile)
		if err != nil {
			return UsageError{fmt.Errorf("--client-cpuprofile: %w", err)}
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("--client-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if f.Trace != "" {
		tf, err := os.Create(f.Trace)
		if err != nil {
			return UsageError{fmt.Errorf("--client-trace: %w", err)}
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			return fmt.Errorf("--client-trace: %w", err)
		}
		defer trace.Stop()
	}
	res, err := perf.Run(ctx, cfg, d)
	if res != nil && (err == nil || res.Publish != nil || res.Consume != nil) {
		var werr error
		if f.JSON {
			werr = res.WriteJSON(out)
		} else {
			werr = res.WriteTable(out)
		}
		err = errors.Join(err, werr)
	}
	return err
}

// probe picks how to sample the server, checking once that it answers.
func probe(ctx context.Context, f *Flags, opts Options, progress io.Writer) perf.Probe {
	if f.NoServerFigures {
		return nil
	}
	var p perf.Probe
	var what string
	if f.ServerPID > 0 {
		p, what = perf.PIDProbe(f.ServerPID), fmt.Sprintf("process %d", f.ServerPID)
	} else {
		u := f.AdminURL
		if u == "" && opts.DefaultAdminURL != nil {
			u = opts.DefaultAdminURL()
		}
		if u == "" {
			return nil
		}
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		what = strings.TrimRight(u, "/") + "/metrics"
		p = perf.MetricsProbe(what)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := p(pctx); err != nil {
		fmt.Fprintf(progress, "no server figures (RSS, CPU): %s: %v\n", what, err)
		return nil
	}
	return p
}

// WebSocket is the Factory for Pulsar's WebSocket API, which tern and
// tern-bench both drive themselves: the endpoint is --ws-url, the admin
// API --url when given, else the endpoint's own host.
func WebSocket(f *Flags) (perf.Driver, error) {
	u := f.AdminURL
	if u != "" && !strings.Contains(u, "://") {
		u = "http://" + u
	}
	return wsdriver.New(wsdriver.Config{URL: f.WebSocketURL, AdminURL: u, Batching: f.WSBatching, BatchDelay: f.Linger})
}
