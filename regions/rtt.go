package regions

import (
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// RTT estimates come from serf's Vivaldi network coordinates: every probe
// ack carries the peer's coordinate, and the distance between two
// coordinates estimates the round trip between the two nodes, including
// pairs that never probed each other.
//
// A region-to-region estimate is the median of the estimates between every
// pair of up nodes, one in each region. The median, rather than the
// minimum, because a single node with a young or disturbed coordinate
// drags the minimum arbitrarily low (coordinates start at the origin),
// while the median follows what most node pairs see; it is also what
// Consul uses to rank datacenters by distance. For a region with one node
// the two agree.

// coordOf returns the freshest coordinate of a node: the live one for the
// local node, the last one a probe ack brought for a peer.
func (m *Mesh) coordOf(name string) *coordinate.Coordinate {
	if name == m.cfg.NodeName {
		c, err := m.serf.GetCoordinate()
		if err != nil {
			return nil
		}
		return c
	}
	c, ok := m.serf.GetCachedCoordinate(name)
	if !ok {
		return nil
	}
	return c
}

// coordAny is coordOf as an untyped value for pointer-identity checks; a
// missing coordinate is a nil interface, not a typed nil.
func (m *Mesh) coordAny(name string) any {
	if c := m.coordOf(name); c != nil {
		return c
	}
	return nil
}

// distance estimates the RTT between two nodes.
func (m *Mesh) distance(a, b string) (time.Duration, bool) {
	return between(m.coordOf(a), m.coordOf(b))
}

func between(ca, cb *coordinate.Coordinate) (time.Duration, bool) {
	if ca == nil || cb == nil || !ca.IsValid() || !cb.IsValid() || !ca.IsCompatibleWith(cb) {
		return 0, false
	}
	return ca.DistanceTo(cb), true
}

// NodeRTT estimates the round trip from this node to another.
func (m *Mesh) NodeRTT(name string) (time.Duration, bool) {
	if name == m.cfg.NodeName {
		return 0, false
	}
	return m.distance(m.cfg.NodeName, name)
}

// fromLocal returns a function estimating the RTT from this node, reading
// the local coordinate once (serf copies it on every read).
func (m *Mesh) fromLocal() func(name string) (time.Duration, bool) {
	local := m.coordOf(m.cfg.NodeName)
	return func(name string) (time.Duration, bool) {
		if name == m.cfg.NodeName {
			return 0, false
		}
		return between(local, m.coordOf(name))
	}
}

// RegionRTT estimates the round trip between two regions: the median over
// pairs of up nodes, one in each region (distinct nodes when from == to).
// It reports false until coordinates exist for at least one pair.
func (m *Mesh) RegionRTT(from, to string) (time.Duration, bool) {
	dir := m.Directory()
	var a, b []string
	for _, n := range dir.Nodes {
		if !n.State.Up() {
			continue
		}
		if n.Region == from {
			a = append(a, n.Name)
		}
		if n.Region == to {
			b = append(b, n.Name)
		}
	}
	var ds []time.Duration
	for _, x := range a {
		for _, y := range b {
			if x == y {
				continue
			}
			if d, ok := m.distance(x, y); ok {
				ds = append(ds, d)
			}
		}
	}
	return median(ds)
}

// regionRTTFromLocal is the median estimate from this node to the up nodes
// of a region (other than itself): what this node would see talking to
// that region.
func regionRTTFromLocal(nodes []Node, rtt func(string) (time.Duration, bool)) (time.Duration, bool) {
	var ds []time.Duration
	for _, n := range nodes {
		if !n.State.Up() {
			continue
		}
		if d, ok := rtt(n.Name); ok {
			ds = append(ds, d)
		}
	}
	return median(ds)
}

// median of durations; the mean of the middle two for an even count.
func median(ds []time.Duration) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	slices.Sort(ds)
	mid := len(ds) / 2
	if len(ds)%2 == 1 {
		return ds[mid], true
	}
	return (ds[mid-1] + ds[mid]) / 2, true
}
