package proxy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/regions"
	"github.com/ternmq/tern/replicator"
)

// Options are what a Node takes besides its configuration.
type Options struct {
	// Logger is the node's logger; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Version is reported to peers and in /metrics.
	Version string
	// MeshTimings overrides the gossip failure-detection timings (tests
	// use fast ones); nil uses the configured profile.
	MeshTimings *regions.Timings
	// MeshConn, if set, makes the replication socket instead of a plain
	// UDP listener on mesh.mesh_addr (tests pass a
	// replicator.SeverableConn to cut links).
	MeshConn func(addr string) (net.PacketConn, error)
	// ReplicationTweak, if set, adjusts the replication transport and
	// engine configuration derived from the node's (tests shorten timings).
	ReplicationTweak func(*replicator.Config, *replicator.EngineConfig)
}

// ProtocolServer is a front end the node runs on one listener.
type ProtocolServer interface {
	// Serve accepts connections on ln until Close; it returns nil after
	// Close and the accept error otherwise.
	Serve(ln net.Listener) error
	// Close stops accepting, lets in-flight requests finish or fail, and
	// waits for every connection to end or ctx to expire.
	Close(ctx context.Context) error
}

// frontend is a protocol server and its listener.
type frontend struct {
	name string
	addr string
	srv  ProtocolServer
	ln   net.Listener
	done chan error
}

// Node is one tern node. It implements protocols.Broker.
type Node struct {
	cfg  configs.Node
	opts Options
	log  *slog.Logger

	store *localstore.Store
	// segmentCache is storage.segment_cache in bytes, auto resolved.
	segmentCache int64
	// diskUsed is the store's size on disk as diskQuotaLoop last saw it,
	// and diskAppended the store's appended bytes at that moment.
	diskUsed, diskAppended atomic.Int64
	// quotaBlocked holds, per partition id, the *protocols.BacklogQuotaError
	// that refuses producers while the log's backlog is over a quota.
	quotaBlocked sync.Map
	clusterID    string
	local        protocols.NodeInfo
	ready        atomic.Bool

	// nsMu serialises tenant and namespace changes.
	nsMu  sync.Mutex
	cache struct {
		sync.RWMutex
		limits map[string]*topicLimits
	}

	mesh      *regions.Mesh
	repl      *replication
	mux       *http.ServeMux
	httpSrv   *http.Server
	httpLn    net.Listener
	frontends []*frontend
	registry  *prometheus.Registry
	kafka     kafkaState

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var _ protocols.Broker = (*Node)(nil)

// New validates the configuration and opens storage. Start serves.
func New(cfg configs.Node, opts Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	n := &Node{
		cfg:  cfg,
		opts: opts,
		log:  opts.Logger.With("node", cfg.Node.Name, "region", cfg.Node.Region),
		mux:  http.NewServeMux(),
		stop: make(chan struct{}),
	}
	n.cache.limits = map[string]*topicLimits{}
	n.repl = newReplication()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	var from string
	if n.segmentCache, from = resolveSegmentCache(cfg.Storage.SegmentCache); from != "" {
		n.log.Info("segment cache (storage.segment_cache: auto)", "bytes", n.segmentCache, "size", gib(uint64(n.segmentCache)), "from", from)
	}
	st, err := localstore.Open(localstore.Config{
		Dir:                 cfg.DataDir,
		MemTableSize:        uint64(cfg.Storage.MemtableSize),
		CacheSize:           int64(cfg.Storage.CacheSize),
		Compression:         localstore.Compression(cfg.Storage.Compression),
		InlineEntries:       !cfg.Storage.Segments,
		SegmentSize:         int64(cfg.Storage.SegmentSize),
		SegmentCache:        n.segmentCache,
		Durability:          localstore.Durability(cfg.Storage.Durability),
		AsyncSyncInterval:   time.Duration(cfg.Storage.AsyncSyncInterval),
		AsyncBacklog:        int64(cfg.Storage.AsyncBacklog),
		GroupCommitInterval: time.Duration(cfg.Storage.GroupCommitInterval),
		Now:                 opts.Now,
		Logger:              n.log,
	})
	if err != nil {
		return nil, err
	}
	n.store = st
	if err := n.bootstrap(); err != nil {
		_ = st.Close()
		return nil, err
	}
	n.registry = n.newRegistry()
	n.routes()
	return n, nil
}

// bootstrap creates what every node has: a cluster id and the default
// tenant and namespaces.
func (n *Node) bootstrap() error {
	id, ok, err := n.store.GetMeta("cluster-id")
	if err != nil {
		return err
	}
	if !ok {
		raw := make([]byte, 16)
		_, _ = rand.Read(raw)
		id = []byte(base64.RawURLEncoding.EncodeToString(raw))
		if err := n.store.PutMeta("cluster-id", id); err != nil {
			return err
		}
	}
	n.clusterID = string(id)
	for _, s := range []string{"public/default", n.cfg.Kafka.Namespace} {
		ns, err := protocols.ParseNamespace(s)
		if err != nil {
			return fmt.Errorf("kafka.namespace: %w", err)
		}
		if err := n.ensureNamespace(ns); err != nil {
			return err
		}
	}
	return nil
}

// addFrontend registers a protocol server to run on addr at Start.
func (n *Node) addFrontend(name, addr string, srv ProtocolServer) {
	n.frontends = append(n.frontends, &frontend{name: name, addr: addr, srv: srv, done: make(chan error, 1)})
}

// Start opens the listeners and serves until Close. It returns once every
// listener is up and the node is ready.
func (n *Node) Start() error {
	n.frontendsFromConfig()
	ln, err := net.Listen("tcp", n.cfg.Listeners.HTTP)
	if err != nil {
		return fmt.Errorf("listeners.http %s: %w", n.cfg.Listeners.HTTP, err)
	}
	n.httpLn = ln
	for _, f := range n.frontends {
		if f.ln, err = net.Listen("tcp", f.addr); err != nil {
			n.closeListeners()
			return fmt.Errorf("listeners.%s %s: %w", f.name, f.addr, err)
		}
	}
	n.local = n.describeLocal()
	if err := n.startReplicationTransport(); err != nil {
		n.closeListeners()
		return fmt.Errorf("replication: %w", err)
	}
	if err := n.startMesh(); err != nil {
		n.closeListeners()
		_ = n.stopReplication()
		return fmt.Errorf("mesh: %w", err)
	}
	if err := n.startReplication(); err != nil {
		n.closeListeners()
		_ = n.stopReplication()
		_ = n.mesh.Close()
		return fmt.Errorf("replication: %w", err)
	}
	n.httpSrv = &http.Server{Handler: n.mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelWarn)}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.httpSrv.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server stopped", "err", err)
		}
	}()
	for _, f := range n.frontends {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			f.done <- f.srv.Serve(f.ln)
		}()
	}
	n.wg.Add(1)
	go n.retentionLoop()
	if n.cfg.Limits.DiskQuota > 0 {
		n.sampleDisk()
		n.wg.Add(1)
		go n.diskQuotaLoop()
	}
	n.ready.Store(true)
	attrs := []any{"http", n.httpLn.Addr().String(), "data_dir", n.cfg.DataDir}
	for _, f := range n.frontends {
		attrs = append(attrs, f.name, f.ln.Addr().String())
	}
	n.log.Info("tern node ready", attrs...)
	return nil
}

// frontendsFromConfig creates the protocol servers the configuration asks
// for. Each front end adds itself here.
func (n *Node) frontendsFromConfig() {
	n.startMessaging()
	n.addFrontend("kafka", n.cfg.Listeners.Kafka, n.kafkaServer())
}

func (n *Node) closeListeners() {
	if n.httpLn != nil {
		_ = n.httpLn.Close()
	}
	for _, f := range n.frontends {
		if f.ln != nil {
			_ = f.ln.Close()
		}
	}
}

// Kill stops the node the way a crash looks to its peers: it leaves the
// mesh without saying goodbye and drops connections without draining. The
// store still closes (an in-process test cannot lose the page cache).
func (n *Node) Kill() {
	if n.mesh != nil {
		_ = n.mesh.Abort()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n.Close(ctx)
}

// Close shuts down gracefully: the node stops being ready, front ends stop
// accepting and finish or fail in-flight requests, HTTP drains, background
// work stops and pebble closes cleanly. ctx bounds the draining.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		n.ready.Store(false)
		var (
			errs []error
			emu  sync.Mutex
			fwg  sync.WaitGroup
		)
		errs = append(errs, n.closeWeb(ctx)...)
		for _, f := range n.frontends {
			if f.ln == nil {
				continue
			}
			fwg.Add(1)
			go func() {
				defer fwg.Done()
				if err := f.srv.Close(ctx); err != nil {
					emu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
					emu.Unlock()
				}
			}()
		}
		fwg.Wait()
		if err := n.stopReplication(); err != nil {
			errs = append(errs, fmt.Errorf("replication: %w", err))
		}
		if n.mesh != nil {
			if err := n.mesh.Close(); err != nil {
				errs = append(errs, fmt.Errorf("mesh: %w", err))
			}
		}
		if n.httpSrv != nil {
			if err := n.httpSrv.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http: %w", err))
			}
		}
		close(n.stop)
		n.wg.Wait()
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("storage: %w", err))
		}
		n.closeErr = errors.Join(errs...)
		n.log.Info("tern node stopped")
	})
	return n.closeErr
}

// Store exposes the node's storage to packages that run beside it in the
// same process (replication) and to tests.
func (n *Node) Store() *localstore.Store { return n.store }

// Config is the node's configuration.
func (n *Node) Config() configs.Node { return n.cfg }

// HTTPAddr is the bound HTTP address (useful when configured with port 0).
func (n *Node) HTTPAddr() string {
	if n.httpLn == nil {
		return ""
	}
	return n.httpLn.Addr().String()
}

func (n *Node) now() time.Time { return n.opts.Now() }

// describeLocal builds this node's advertised description from the bound
// listeners.
func (n *Node) describeLocal() protocols.NodeInfo {
	info := protocols.NodeInfo{
		Name:     n.cfg.Node.Name,
		ID:       nodeID(n.cfg.Node.Name),
		Region:   n.cfg.Node.Region,
		Rack:     n.cfg.Node.Rack,
		HTTPAddr: n.advertise(n.httpLn),
	}
	for _, f := range n.frontends {
		switch f.name {
		case "kafka":
			info.KafkaAddr = n.advertise(f.ln)
		case "pulsar":
			info.PulsarAddr = n.advertise(f.ln)
		}
	}
	return info
}

// advertise turns a bound address into one clients can dial.
func (n *Node) advertise(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if h := n.cfg.Listeners.AdvertisedHost; h != "" {
		host = h
	} else if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = advertisedHostname()
	}
	return net.JoinHostPort(host, port)
}

// advertisedHostname is the host name when it resolves, else loopback.
func advertisedHostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "127.0.0.1"
	}
	if _, err := net.LookupHost(h); err != nil {
		return "127.0.0.1"
	}
	return h
}

// nodeID derives a stable positive int32 from the node name.
func nodeID(name string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int32(h.Sum32() & 0x7fffffff)
}

// Ready implements protocols.Cluster.
func (n *Node) Ready() bool { return n.ready.Load() }

// LocalNode implements protocols.Cluster.
func (n *Node) LocalNode() protocols.NodeInfo { return n.local }

// ClusterID implements protocols.Cluster.
func (n *Node) ClusterID() string { return n.clusterID }

// Owner implements protocols.Cluster: the local node serves every partition
// of its region until regions hold more than one node.
func (n *Node) Owner(ctx context.Context, p protocols.Partition) (protocols.NodeInfo, error) {
	if _, err := n.pid(p); err != nil {
		return protocols.NodeInfo{}, err
	}
	return n.local, nil
}
