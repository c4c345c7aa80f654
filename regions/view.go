package regions

import "time"

// Snapshot is the mesh as this node sees it, shaped for the admin API
// (GET /api/v1/mesh) and `tern status`. Field names are part of the API.
type Snapshot struct {
	// LocalNode is this node's name.
	LocalNode string `json:"local_node"`
	// LocalRegion is this node's region.
	LocalRegion string `json:"local_region"`
	// Seq is the directory version the snapshot shows (see Event.Seq).
	Seq uint64 `json:"seq"`
	// Encrypted tells whether gossip is encrypted.
	Encrypted bool `json:"encrypted"`
	// HealthScore is memberlist's Lifeguard awareness of this node's own
	// health: 0 is healthy; higher means this node missed probes and
	// slowed its failure detector down.
	HealthScore int `json:"health_score"`
	// Regions are sorted by name.
	Regions []RegionSnapshot `json:"regions"`
}

// RegionSnapshot is one region in a Snapshot.
type RegionSnapshot struct {
	// Name of the region.
	Name string `json:"name"`
	// Local marks this node's region.
	Local bool `json:"local"`
	// NodesUp counts alive and suspect nodes.
	NodesUp int `json:"nodes_up"`
	// RTTMs is the median estimated round trip in milliseconds from this
	// node to the region's up nodes; absent until coordinates exist (and
	// for the local region when this node is alone in it).
	RTTMs *float64 `json:"rtt_ms,omitempty"`
	// Nodes are sorted by name.
	Nodes []NodeSnapshot `json:"nodes"`
}

// NodeSnapshot is one node in a Snapshot.
type NodeSnapshot struct {
	// Name is the node's unique name.
	Name string `json:"name"`
	// ID is the node's persistent identity.
	ID string `json:"id,omitempty"`
	// Local marks the node serving this snapshot.
	Local bool `json:"local,omitempty"`
	// State is alive, suspect, failed or left.
	State State `json:"state"`
	// StateSince is when this node saw the state begin.
	StateSince time.Time `json:"state_since"`
	// Rack is the node's rack or zone, if any.
	Rack string `json:"rack,omitempty"`
	// GossipAddr is the node's serf address, ip:port.
	GossipAddr string `json:"gossip_addr"`
	// QUICAddr is where replication dials the node.
	QUICAddr string `json:"quic_addr,omitempty"`
	// KafkaAddr, PulsarAddr and HTTPAddr are the client addresses the node
	// advertises.
	KafkaAddr  string `json:"kafka_addr,omitempty"`
	PulsarAddr string `json:"pulsar_addr,omitempty"`
	HTTPAddr   string `json:"http_addr,omitempty"`
	// Version is the node's tern version.
	Version string `json:"version,omitempty"`
	// RTTMs is the estimated round trip from this node, in milliseconds;
	// absent for this node and until a coordinate exists.
	RTTMs *float64 `json:"rtt_ms,omitempty"`
}

func ms(d time.Duration) *float64 {
	v := float64(d) / float64(time.Millisecond)
	return &v
}

// Snapshot builds the JSON view of the mesh.
func (m *Mesh) Snapshot() Snapshot {
	dir := m.Directory()
	out := Snapshot{
		LocalNode:   dir.LocalNode,
		LocalRegion: dir.LocalRegion,
		Seq:         dir.Seq,
		Encrypted:   m.Encrypted(),
		HealthScore: m.serf.Memberlist().GetHealthScore(),
		Regions:     []RegionSnapshot{},
	}
	rtt := m.fromLocal()
	for _, region := range dir.Regions() {
		nodes := dir.Region(region)
		rs := RegionSnapshot{Name: region, Local: region == dir.LocalRegion, Nodes: make([]NodeSnapshot, 0, len(nodes))}
		if d, ok := regionRTTFromLocal(nodes, rtt); ok {
			rs.RTTMs = ms(d)
		}
		for _, n := range nodes {
			if n.State.Up() {
				rs.NodesUp++
			}
			ns := NodeSnapshot{
				Name: n.Name, ID: n.ID, Local: n.Name == dir.LocalNode, State: n.State, StateSince: n.StateSince,
				Rack: n.Rack, GossipAddr: n.Addr, QUICAddr: n.QUIC, KafkaAddr: n.Kafka, PulsarAddr: n.Pulsar,
				HTTPAddr: n.HTTP, Version: n.Version,
			}
			if n.State.Up() {
				if d, ok := rtt(n.Name); ok {
					ns.RTTMs = ms(d)
				}
			}
			rs.Nodes = append(rs.Nodes, ns)
		}
		out.Regions = append(out.Regions, rs)
	}
	return out
}
