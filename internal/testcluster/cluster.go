package testcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/freeport"
	"github.com/ternmq/tern/proxy"
	"github.com/ternmq/tern/regions"
	"github.com/ternmq/tern/replicator"
)

// Cluster is a set of in-process nodes.
type Cluster struct {
	t     testing.TB
	mu    sync.Mutex
	nodes []*Node
	cuts  map[[2]string]bool // replication links cut by Partition
}

// Node is one in-process node of a Cluster.
type Node struct {
	c *Cluster
	// Name and Region identify the node.
	Name, Region string
	// Config is the node's configuration, with concrete loopback ports.
	Config configs.Node

	mu      sync.Mutex
	node    *proxy.Node
	meshUDP *replicator.SeverableConn // the running node's replication socket
	plain   bool                      // Spec.PlainMeshSocket
}

// Spec describes a node to start.
type Spec struct {
	Name   string
	Region string
	Rack   string
	// Tweak adjusts the configuration before the node starts.
	Tweak func(*configs.Node)
	// PlainMeshSocket gives the node a plain UDP socket for replication,
	// with quic-go's batched I/O, for benchmarks; Partition cannot cut it.
	PlainMeshSocket bool
}

// Start starts one node per spec (one node of region "local" when none is
// given) and stops them all when the test ends.
func Start(t testing.TB, specs ...Spec) *Cluster {
	t.Helper()
	if len(specs) == 0 {
		specs = []Spec{{}}
	}
	c := &Cluster{t: t}
	// The first TempDir registers its removal; it must run after c.Close
	// (cleanups run last-registered first), or it races the nodes' writes.
	_ = t.TempDir()
	t.Cleanup(c.Close)
	for i, s := range specs {
		if s.Name == "" {
			s.Name = fmt.Sprintf("node-%d", i+1)
		}
		if s.Region == "" {
			s.Region = "local"
		}
		c.Add(s)
	}
	return c
}

// Add starts one more node.
func (c *Cluster) Add(s Spec) *Node {
	c.t.Helper()
	dataDir := filepath.Join(c.t.TempDir(), s.Name)
	var n *Node
	// Ports are reserved by binding and releasing them, so another socket of the process can
	// take one before the node binds it; a node that finds its port taken gets new ones.
	for attempt := 1; ; attempt++ {
		cfg := configs.DefaultConfig()
		cfg.Node = configs.Identity{Name: s.Name, Region: s.Region, Rack: s.Rack}
		cfg.DataDir = dataDir
		ports, err := freeport.Loopback(5)
		if err != nil {
			c.t.Fatal(err)
		}
		cfg.Listeners.Kafka, cfg.Listeners.Pulsar, cfg.Listeners.HTTP = ports[0], ports[1], ports[2]
		cfg.Listeners.AdvertisedHost = "127.0.0.1"
		cfg.Mesh.GossipAddr, cfg.Mesh.MeshAddr = ports[3], ports[4]
		cfg.Log.Level = "warn"
		replicationDefaults(&cfg)
		// Every node joins the mesh through the cluster's first node.
		if first := c.Nodes(); len(first) > 0 {
			cfg.Mesh.Join = []string{first[0].Config.Mesh.GossipAddr}
		}
		if s.Tweak != nil {
			s.Tweak(&cfg)
		}
		n = &Node{c: c, Name: s.Name, Region: s.Region, Config: cfg, plain: s.PlainMeshSocket}
		err = n.tryStart()
		if err == nil {
			break
		}
		// Some listeners (serf's) report the bind error as text only.
		inUse := errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
		if !inUse || attempt == 5 {
			c.t.Fatalf("node %s: %v", s.Name, err)
		}
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n
}

// Nodes lists the cluster's nodes.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Node returns the i-th node.
func (c *Cluster) Node(i int) *Node { return c.Nodes()[i] }

// Close stops every node.
func (c *Cluster) Close() {
	for _, n := range c.Nodes() {
		n.Stop()
	}
}

func logger() *slog.Logger {
	if os.Getenv("TERN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (n *Node) start() {
	n.c.t.Helper()
	if err := n.tryStart(); err != nil {
		n.c.t.Fatalf("node %s: %v", n.Name, err)
	}
}

func (n *Node) tryStart() error {
	timings := FastTimings()
	opts := proxy.Options{Logger: logger().With("node", n.Name), Version: "test", MeshTimings: &timings}
	n.replicationOptions(&opts)
	node, err := proxy.New(n.Config, opts)
	if err != nil {
		return err
	}
	if err := node.Start(); err != nil {
		_ = node.Close(context.Background())
		return err
	}
	n.mu.Lock()
	n.node = node
	n.mu.Unlock()
	return nil
}

// Proxy is the running node (nil while stopped).
func (n *Node) Proxy() *proxy.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.node
}

// Stop shuts the node down gracefully; it keeps its data and ports.
func (n *Node) Stop() {
	n.mu.Lock()
	node := n.node
	n.node = nil
	n.mu.Unlock()
	if node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := node.Close(ctx); err != nil {
		n.c.t.Errorf("stopping node %s: %v", n.Name, err)
	}
}

// Kill stops the node as a crash looks to its peers: no graceful leave, no
// draining. Restart brings it back with the same identity and data.
func (n *Node) Kill() {
	n.mu.Lock()
	node := n.node
	n.node = nil
	n.mu.Unlock()
	if node != nil {
		node.Kill()
	}
}

// Restart stops the node and starts it again with the same name, data
// directory and addresses.
func (n *Node) Restart() {
	n.c.t.Helper()
	n.Stop()
	n.start()
}

// FastTimings are gossip timings for loopback tests (regions.LoopbackTimings).
func FastTimings() regions.Timings { return regions.LoopbackTimings() }

// WaitMesh waits until every running node sees every other running node
// alive.
func (c *Cluster) WaitMesh(timeout time.Duration) {
	c.t.Helper()
	WaitFor(c.t, timeout, "every node to see every other alive", func() bool {
		nodes := c.Nodes()
		for _, a := range nodes {
			pa := a.Proxy()
			if pa == nil || pa.Mesh() == nil {
				continue
			}
			dir := pa.Mesh().Directory()
			for _, b := range nodes {
				if b.Proxy() == nil {
					continue
				}
				m, ok := dir.Node(b.Name)
				if !ok || m.State != regions.StateAlive {
					return false
				}
			}
		}
		return true
	})
}

// KafkaAddr is the Kafka listener address.
func (n *Node) KafkaAddr() string { return n.Config.Listeners.Kafka }

// PulsarAddr is the Pulsar listener address.
func (n *Node) PulsarAddr() string { return n.Config.Listeners.Pulsar }

// PulsarURL is the pulsar:// service URL.
func (n *Node) PulsarURL() string { return "pulsar://" + n.Config.Listeners.Pulsar }

// HTTPURL is the base URL of the HTTP listener.
func (n *Node) HTTPURL() string { return "http://" + n.Config.Listeners.HTTP }

// WaitFor polls cond until it holds or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Main runs a package's tests with every read buffer a subscription frees
// overwritten at once (proxy.PoisonFreedBuffers): a holder that reads a
// buffer after it was freed reads the damage, and the tests that check
// what they were delivered see it. With noCache, subscriptions also keep
// no entries cached, so a buffer is freed as soon as the front end
// releases its deliveries.
func Main(m *testing.M, noCache bool) {
	proxy.PoisonFreedBuffers(noCache)
	os.Exit(m.Run())
}
