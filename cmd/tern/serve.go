package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/proxy"
)

// serveFlags are the flags that override the config file.
type serveFlags struct {
	config                          string
	dataDir, node, region, rack     string
	kafkaAddr, pulsarAddr, httpAddr string
	gossipAddr, meshAddr, gossipKey string
	join                            []string
	shutdownTimeout                 time.Duration
	pprof                           bool
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run a tern node (with no flags: one node of region local, data in ./data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.load(cmd)
			if err != nil {
				return err
			}
			hugePages := "storage.huge_pages is false"
			if cfg.Storage.HugePages {
				// Before anything is opened: the process image is replaced.
				hugePages = execWithHugePages()
			}
			return serve(cmd.Context(), cfg, f.shutdownTimeout, f.pprof, hugePages)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.config, "config", "", "YAML config file (default: the embedded single-node config)")
	fl.StringVar(&f.dataDir, "data-dir", "", "data directory (default ./data)")
	fl.StringVar(&f.node, "node", "", "node name, unique in the mesh (default: host name)")
	fl.StringVar(&f.region, "region", "", "region this node serves (default local)")
	fl.StringVar(&f.rack, "rack", "", "rack of this node")
	fl.StringVar(&f.kafkaAddr, "kafka-addr", "", "Kafka listener host:port (default :9092)")
	fl.StringVar(&f.pulsarAddr, "pulsar-addr", "", "Pulsar listener host:port (default :6650)")
	fl.StringVar(&f.httpAddr, "http-addr", "", "HTTP listener for admin, metrics and console (default :8080)")
	fl.StringVar(&f.gossipAddr, "gossip-addr", "", "gossip (serf) host:port, TCP and UDP (default :7946)")
	fl.StringVar(&f.meshAddr, "mesh-addr", "", "replication (QUIC) host:port, UDP (default :7947)")
	fl.StringSliceVar(&f.join, "join", nil, "gossip host:port of nodes to join, comma separated")
	fl.StringVar(&f.gossipKey, "gossip-key", "", "base64 gossip encryption key (16, 24 or 32 bytes)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take")
	fl.BoolVar(&f.pprof, "pprof", false, "serve Go's profiles at /debug/pprof/ on the HTTP port (for profiling; anyone who reaches the port can read them)")
	return c
}

// load reads the config (file or embedded default), applies flags and
// validates. Any problem is a usage error (exit status 2).
func (f *serveFlags) load(cmd *cobra.Command) (configs.Node, error) {
	cfg := configs.DefaultConfig()
	if f.config != "" {
		var err error
		if cfg, err = configs.Load(f.config); err != nil {
			return cfg, usageError{err}
		}
	}
	set := func(flag string, dst *string, v string) {
		if cmd.Flags().Changed(flag) {
			*dst = v
		}
	}
	set("data-dir", &cfg.DataDir, f.dataDir)
	set("node", &cfg.Node.Name, f.node)
	set("region", &cfg.Node.Region, f.region)
	set("rack", &cfg.Node.Rack, f.rack)
	set("kafka-addr", &cfg.Listeners.Kafka, f.kafkaAddr)
	set("pulsar-addr", &cfg.Listeners.Pulsar, f.pulsarAddr)
	set("http-addr", &cfg.Listeners.HTTP, f.httpAddr)
	set("gossip-addr", &cfg.Mesh.GossipAddr, f.gossipAddr)
	set("mesh-addr", &cfg.Mesh.MeshAddr, f.meshAddr)
	set("gossip-key", &cfg.Mesh.GossipKey, f.gossipKey)
	if cmd.Flags().Changed("join") {
		cfg.Mesh.Join = f.join
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usagef("invalid configuration:\n%w", err)
	}
	if f.shutdownTimeout <= 0 {
		return cfg, usagef("--shutdown-timeout %v: want a positive duration such as 30s", f.shutdownTimeout)
	}
	return cfg, nil
}

func newLogger(cfg configs.Log) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// serve runs a node until SIGINT or SIGTERM, then shuts it down gracefully.
// A second signal during shutdown exits at once.
func serve(ctx context.Context, cfg configs.Node, shutdownTimeout time.Duration, profiles bool, hugePages string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	log := newLogger(cfg.Log)
	slog.SetDefault(log)
	log.Info("memory pages for pebble", "huge_pages", hugePages)
	proxy.SetProcessHeapLimit(log, int64(cfg.Limits.HeapLimit))
	node, err := proxy.New(cfg, proxy.Options{Logger: log, Version: version})
	if err != nil {
		return err
	}
	if profiles {
		node.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
		node.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
		node.Handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
		node.Handle("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
		node.Handle("GET /debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	}
	if err := node.Start(); err != nil {
		_ = node.Close(context.Background())
		return err
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case s := <-sigs:
		log.Info("shutting down", "signal", s.String())
	case <-ctx.Done():
		log.Info("shutting down", "reason", ctx.Err())
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	go func() {
		select {
		case s := <-sigs:
			log.Error("second signal: exiting without a clean shutdown", "signal", s.String())
			os.Exit(1)
		case <-sctx.Done():
		}
	}()
	if err := node.Close(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
