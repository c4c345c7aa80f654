package peer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/freeport"
	"github.com/ternmq/tern/proxy"
)

// Kinds of system a peer can be.
const (
	Tern      = "tern"
	Kfake     = "kfake"
	JetStream = "jetstream"
)

// Config says which system to start and how.
type Config struct {
	// Kind is Tern, Kfake or JetStream. Required.
	Kind string
	// Dir holds the system's data (tern's pebble directory, JetStream's
	// file store). Required for tern and JetStream.
	Dir string
	// Durability is tern's: "sync" (fsync before the ack, the default) or
	// "async" (the ack before the fsync).
	Durability string
	// Fsync makes JetStream fsync every write (sync_interval: always);
	// by default it acknowledges before fsyncing and syncs every two
	// minutes, NATS's default.
	Fsync bool
	// ConfigFile is a tern config file whose settings replace tern's
	// defaults (configs.Load); the peer then sets its own name, data
	// directory and listeners, and Durability if given.
	ConfigFile string
	// MemtableSize and CacheSize override tern's storage sizes in bytes
	// (0: tern's defaults).
	MemtableSize, CacheSize int64
	// Logger receives the system's warnings. Default: discard.
	Logger *slog.Logger
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	switch c.Kind {
	case Tern, JetStream:
		if c.Dir == "" {
			errs = append(errs, fmt.Errorf("peer: %s needs a data directory (--dir)", c.Kind))
		}
	case Kfake:
	default:
		errs = append(errs, fmt.Errorf("peer: kind %q: want %s, %s or %s", c.Kind, Tern, Kfake, JetStream))
	}
	if c.Durability != "" && c.Durability != "sync" && c.Durability != "async" {
		errs = append(errs, fmt.Errorf("peer: durability %q: want sync or async", c.Durability))
	}
	if c.ConfigFile != "" && c.Kind != Tern {
		errs = append(errs, fmt.Errorf("peer: a config file is tern's; %s takes none", c.Kind))
	}
	if c.Fsync && c.Kind != JetStream {
		errs = append(errs, errors.New("peer: fsync is a JetStream setting; tern's is durability"))
	}
	return errors.Join(errs...)
}

// Addrs are where a running system listens.
type Addrs struct {
	Kafka  string `json:"kafka,omitempty"`
	Pulsar string `json:"pulsar,omitempty"`
	HTTP   string `json:"http,omitempty"`
	NATS   string `json:"nats,omitempty"`
}

// Running is a started system.
type Running struct {
	Addrs Addrs
	close func(context.Context) error
}

// Close stops the system and waits for it.
func (r *Running) Close(ctx context.Context) error { return r.close(ctx) }

// Start starts the system in this process.
func Start(cfg Config) (*Running, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch cfg.Kind {
	case Tern:
		return startTern(cfg)
	case Kfake:
		return startKfake()
	default:
		return startJetStream(cfg)
	}
}

func startTern(cfg Config) (*Running, error) {
	c := configs.DefaultConfig()
	if cfg.ConfigFile != "" {
		var err error
		if c, err = configs.Load(cfg.ConfigFile); err != nil {
			return nil, err
		}
	}
	c.Node = configs.Identity{Name: "bench", Region: "local"}
	c.DataDir = filepath.Join(cfg.Dir, "tern")
	if cfg.Durability != "" {
		c.Storage.Durability = cfg.Durability
	}
	if cfg.MemtableSize > 0 {
		c.Storage.MemtableSize = configs.Bytes(cfg.MemtableSize)
	}
	if cfg.CacheSize > 0 {
		c.Storage.CacheSize = configs.Bytes(cfg.CacheSize)
	}
	ports, err := freeport.Loopback(5)
	if err != nil {
		return nil, err
	}
	c.Listeners.Kafka, c.Listeners.Pulsar, c.Listeners.HTTP = ports[0], ports[1], ports[2]
	c.Listeners.AdvertisedHost = "127.0.0.1"
	c.Mesh.GossipAddr, c.Mesh.MeshAddr = ports[3], ports[4]
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("peer: %s: %w", cmp.Or(cfg.ConfigFile, "tern's settings"), err)
	}
	// The peer process is tern's alone, as under tern serve.
	proxy.SetProcessHeapLimit(cfg.Logger, int64(c.Limits.HeapLimit))
	n, err := proxy.New(c, proxy.Options{Logger: cfg.Logger, Version: "bench"})
	if err != nil {
		return nil, err
	}
	if err := n.Start(); err != nil {
		_ = n.Close(context.Background())
		return nil, err
	}
	return &Running{
		Addrs: Addrs{Kafka: ports[0], Pulsar: "pulsar://" + ports[1], HTTP: "http://" + ports[2]},
		close: n.Close,
	}, nil
}

func startKfake() (*Running, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, err
	}
	return &Running{
		Addrs: Addrs{Kafka: c.ListenAddrs()[0]},
		close: func(context.Context) error { c.Close(); return nil },
	}, nil
}

func startJetStream(cfg Config) (*Running, error) {
	opts := &server.Options{
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.Dir, "jetstream"),
		SyncAlways: cfg.Fsync,
		NoSigs:     true,
		NoLog:      true,
	}
	if err := os.MkdirAll(opts.StoreDir, 0o755); err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("peer: the NATS server was not ready within 30s")
	}
	return &Running{
		Addrs: Addrs{NATS: s.ClientURL()},
		close: func(context.Context) error {
			s.Shutdown()
			s.WaitForShutdown()
			return nil
		},
	}, nil
}
