package testcluster

import (
	"net"
	"net/netip"
	"time"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/proxy"
	"github.com/ternmq/tern/replicator"
)

// TestMeshSecret is the dev-mode replication secret every test node shares.
const TestMeshSecret = "testcluster mesh secret, 32 bytes"

// replicationDefaults turns replication links on (dev-mode TLS) with timings for loopback.
func replicationDefaults(cfg *configs.Node) {
	cfg.Mesh.Secret = TestMeshSecret
	cfg.Replication.StallAfter = configs.Duration(5 * time.Second)
	cfg.Replication.RescanInterval = configs.Duration(200 * time.Millisecond)
	cfg.Replication.RetryMax = configs.Duration(time.Second)
}

// replicationOptions gives the node a severable replication socket and fast link timings.
func (n *Node) replicationOptions(opts *proxy.Options) {
	if !n.plain {
		opts.MeshConn = n.severableMeshConn
	}
	opts.ReplicationTweak = func(t *replicator.Config, e *replicator.EngineConfig) {
		t.HandshakeTimeout = 3 * time.Second
		t.KeepAlivePeriod = time.Second
		t.IdleTimeout = 10 * time.Second
		t.HeartbeatInterval = 200 * time.Millisecond
		t.HeartbeatTimeout = 2 * time.Second
		t.ReconnectInitial = 50 * time.Millisecond
		t.ReconnectMax = time.Second
		e.RetryInitial = 50 * time.Millisecond
	}
}

// severableMeshConn is the replication socket of a node that Partition can cut.
func (n *Node) severableMeshConn(addr string) (net.PacketConn, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	sc := replicator.NewSeverableConn(pc)
	n.mu.Lock()
	n.meshUDP = sc
	n.mu.Unlock()
	n.c.applyCuts(n, sc)
	return sc, nil
}

// MeshAddr is the node's replication (QUIC) UDP address.
func (n *Node) MeshAddr() netip.AddrPort {
	return netip.MustParseAddrPort(n.Config.Mesh.MeshAddr)
}

// Partition cuts the replication link between a and b in both directions: packets between
// their mesh sockets are dropped, as on a real network partition, until Heal. Gossip is not
// cut, so membership still sees both nodes alive: the links, not the directory, notice.
func (c *Cluster) Partition(a, b *Node) {
	c.mu.Lock()
	if c.cuts == nil {
		c.cuts = map[[2]string]bool{}
	}
	c.cuts[[2]string{a.Name, b.Name}] = true
	c.cuts[[2]string{b.Name, a.Name}] = true
	c.mu.Unlock()
	for _, pair := range [][2]*Node{{a, b}, {b, a}} {
		if sc := pair[0].severable(); sc != nil {
			sc.Sever(pair[1].MeshAddr())
		}
	}
}

// Heal restores every link Partition cut.
func (c *Cluster) Heal() {
	c.mu.Lock()
	clear(c.cuts)
	c.mu.Unlock()
	for _, n := range c.Nodes() {
		if sc := n.severable(); sc != nil {
			sc.HealAll()
		}
	}
}

// applyCuts re-applies the partitions involving a node that starts again.
func (c *Cluster) applyCuts(n *Node, sc *replicator.SeverableConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for pair := range c.cuts {
		if pair[0] != n.Name {
			continue
		}
		for _, other := range c.nodes {
			if other.Name == pair[1] {
				sc.Sever(other.MeshAddr())
			}
		}
	}
}

func (n *Node) severable() *replicator.SeverableConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.meshUDP
}

// Crash stops the node the way a power cut looks to its replication peers: its mesh socket
// goes silent first (no QUIC close reaches them), then it is killed. Restart brings it back.
func (n *Node) Crash() {
	if sc := n.severable(); sc != nil {
		sc.SeverAll()
	}
	n.Kill()
}
