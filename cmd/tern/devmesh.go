package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/freeport"
	"github.com/ternmq/tern/proxy"
	"github.com/ternmq/tern/regions"
)

func newDevCmd() *cobra.Command {
	dev := &cobra.Command{Use: "dev", Short: "Development helpers"}
	dev.AddCommand(newDevMeshCmd())
	return dev
}

type devMeshFlags struct {
	regions  []string
	dataDir  string
	basePort int
	secret   string
	logLevel string
}

func newDevMeshCmd() *cobra.Command {
	var f devMeshFlags
	c := &cobra.Command{
		Use:   "mesh",
		Short: "Run a local mesh of one node per region on loopback, until Ctrl-C",
		Long: `Run a local mesh in this process: one node per region, every node on loopback
ports with its own data directory, joined by gossip with LAN timings. The
addresses are printed once every node sees every other; Ctrl-C stops them all
cleanly. Point clients and 'tern status --url' at the printed addresses.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.regions) == 0 {
				return usagef("--regions is empty: name at least one region, e.g. --regions us,eu,edge")
			}
			seen := map[string]bool{}
			for _, r := range f.regions {
				if seen[r] {
					return usagef("--regions names %q twice", r)
				}
				seen[r] = true
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runDevMesh(ctx, cmd.OutOrStdout(), f)
		},
	}
	c.Flags().StringSliceVar(&f.regions, "regions", []string{"us", "eu", "edge"}, "regions, one node each, comma separated")
	c.Flags().StringVar(&f.dataDir, "data-dir", filepath.Join("data", "dev-mesh"), "directory for the nodes' data (one subdirectory each)")
	c.Flags().IntVar(&f.basePort, "base-port", 0, "first port to use, 10 per node (0: free ports)")
	c.Flags().StringVar(&f.secret, "mesh-secret", "tern-dev-mesh-secret", "shared secret the nodes derive replication certificates from")
	c.Flags().StringVar(&f.logLevel, "log-level", "warn", "log level of the nodes: debug, info, warn or error")
	return c
}

// devNodeConfig is the configuration of the i-th node of a dev mesh.
func devNodeConfig(f devMeshFlags, i int, region string, seed string) (configs.Node, error) {
	cfg := configs.DefaultConfig()
	cfg.Node = configs.Identity{Name: region + "-1", Region: region}
	cfg.DataDir = filepath.Join(f.dataDir, region+"-1")
	ports := make([]string, 5)
	if f.basePort > 0 {
		for off := range ports {
			ports[off] = fmt.Sprintf("127.0.0.1:%d", f.basePort+10*i+off)
		}
	} else {
		var err error
		if ports, err = freeport.Loopback(len(ports)); err != nil {
			return cfg, err
		}
	}
	cfg.Listeners.Kafka, cfg.Listeners.Pulsar, cfg.Listeners.HTTP = ports[0], ports[1], ports[2]
	cfg.Mesh.GossipAddr, cfg.Mesh.MeshAddr = ports[3], ports[4]
	cfg.Listeners.AdvertisedHost = "127.0.0.1"
	cfg.Mesh.Timings = "lan"
	cfg.Mesh.Secret = f.secret
	if seed != "" {
		cfg.Mesh.Join = []string{seed}
	}
	cfg.Log.Level = f.logLevel
	return cfg, cfg.Validate()
}

func runDevMesh(ctx context.Context, out io.Writer, f devMeshFlags) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	var nodes []*proxy.Node
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := len(nodes) - 1; i >= 0; i-- {
			if err := nodes[i].Close(sctx); err != nil {
				fmt.Fprintf(os.Stderr, "tern: stopping %s: %v\n", nodes[i].LocalNode().Name, err)
			}
		}
		fmt.Fprintln(out, "dev mesh stopped")
	}()
	seed := ""
	for i, r := range f.regions {
		cfg, err := devNodeConfig(f, i, r, seed)
		if err != nil {
			return usagef("region %q: %v", r, err)
		}
		n, err := proxy.New(cfg, proxy.Options{Logger: log, Version: version})
		if err != nil {
			return fmt.Errorf("node %s: %w", cfg.Node.Name, err)
		}
		if err := n.Start(); err != nil {
			_ = n.Close(context.Background())
			return fmt.Errorf("node %s: %w", cfg.Node.Name, err)
		}
		nodes = append(nodes, n)
		if seed == "" {
			seed = cfg.Mesh.GossipAddr
		}
	}
	if err := waitConverged(ctx, nodes, 30*time.Second); err != nil {
		return err
	}
	printDevMesh(out, nodes)
	fmt.Fprintln(out, "\nthe mesh is up; Ctrl-C stops it")
	<-ctx.Done()
	return nil
}

// waitConverged waits until every node sees every other alive.
func waitConverged(ctx context.Context, nodes []*proxy.Node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok := true
		for _, a := range nodes {
			dir := a.Mesh().Directory()
			for _, b := range nodes {
				if m, found := dir.Node(b.LocalNode().Name); !found || m.State != regions.StateAlive {
					ok = false
				}
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the dev mesh did not converge within 30s; run with --log-level info to see why")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func printDevMesh(out io.Writer, nodes []*proxy.Node) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REGION\tNODE\tKAFKA\tPULSAR\tHTTP\tGOSSIP\tQUIC\tDATA")
	for _, n := range nodes {
		cfg := n.Config()
		l := n.LocalNode()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Region, l.Name, dash(l.KafkaAddr), dash(l.PulsarAddr),
			"http://"+l.HTTPAddr, cfg.Mesh.GossipAddr, cfg.Mesh.MeshAddr, cfg.DataDir)
	}
	tw.Flush()
	if len(nodes) > 0 {
		fmt.Fprintf(out, "\ntry: tern status --url http://%s\n", nodes[0].LocalNode().HTTPAddr)
	}
}
