package replicator

// Membership to peers: the engine follows the region directory, tells the transport about every
// node of another region (AddPeer on join and tag updates, RemovePeer when a node is reaped),
// and picks the node each region's streams go to. A region has one node for now; when it has
// more, the up node with the lowest name receives, and a change of that choice restarts the
// streams to the region.

import (
	"context"
	"slices"
	"sync"

	"github.com/ternmq/tern/regions"
)

// Membership is where the engine learns the mesh's nodes: regions.Mesh implements it.
type Membership interface {
	// SubscribeWithDirectory returns the current directory and every later change, as
	// regions.Mesh documents.
	SubscribeWithDirectory(ctx context.Context) (regions.Directory, <-chan regions.Event)
}

// peerTable is the engine's view of the directory.
type peerTable struct {
	localRegion string
	localNode   string

	mu struct {
		sync.Mutex
		nodes   map[string]regions.Node
		chosen  map[string]string        // region -> receiving node
		changed map[string]chan struct{} // region -> closed when chosen[region] changes
		regions []string                 // every region known, local included, sorted
	}
}

func newPeerTable(localRegion, localNode string) *peerTable {
	pt := &peerTable{localRegion: localRegion, localNode: localNode}
	pt.mu.nodes = map[string]regions.Node{}
	pt.mu.chosen = map[string]string{}
	pt.mu.changed = map[string]chan struct{}{}
	pt.mu.regions = []string{localRegion}
	return pt
}

// nodeFor returns the node that receives a region's streams ("" if none is known) and a
// channel closed when that choice changes.
func (pt *peerTable) nodeFor(region string) (string, <-chan struct{}) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	ch, ok := pt.mu.changed[region]
	if !ok {
		ch = make(chan struct{})
		pt.mu.changed[region] = ch
	}
	return pt.mu.chosen[region], ch
}

// known lists every region the mesh has seen, the local one included.
func (pt *peerTable) known() []string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return slices.Clone(pt.mu.regions)
}

// remoteRegions lists the known regions other than the local one.
func (pt *peerTable) remoteRegions() []string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	out := make([]string, 0, len(pt.mu.regions))
	for _, r := range pt.mu.regions {
		if r != pt.localRegion {
			out = append(out, r)
		}
	}
	return out
}

// reset replaces the view with a whole directory; it returns the peers to add and remove.
func (pt *peerTable) reset(dir regions.Directory) (add []Peer, remove []string, regionsChanged bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	old := pt.mu.nodes
	pt.mu.nodes = make(map[string]regions.Node, len(dir.Nodes))
	for _, n := range dir.Nodes {
		if n.Name == pt.localNode {
			continue
		}
		pt.mu.nodes[n.Name] = n
		if p, ok := pt.peerOf(n); ok {
			add = append(add, p)
		}
	}
	for name := range old {
		if _, ok := pt.mu.nodes[name]; !ok {
			remove = append(remove, name)
		}
	}
	return add, remove, pt.recomputeLocked()
}

// apply folds one directory event in; it returns the peer to add or remove, if any.
func (pt *peerTable) apply(ev regions.Event) (add *Peer, remove string, regionsChanged bool) {
	if ev.Node.Name == pt.localNode {
		return nil, "", false
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if ev.Kind == regions.EventReap {
		delete(pt.mu.nodes, ev.Node.Name)
		remove = ev.Node.Name
	} else {
		pt.mu.nodes[ev.Node.Name] = ev.Node
		if p, ok := pt.peerOf(ev.Node); ok {
			add = &p
		}
	}
	return add, remove, pt.recomputeLocked()
}

// peerOf is the transport peer for a node of another region that advertises a mesh address.
func (pt *peerTable) peerOf(n regions.Node) (Peer, bool) {
	if n.Region == pt.localRegion || n.QUIC == "" {
		return Peer{}, false
	}
	return Peer{Name: n.Name, Region: n.Region, Addr: n.QUIC}, true
}

// recomputeLocked picks each region's receiving node and wakes the streams of regions whose
// choice changed. It reports whether the set of known regions changed.
func (pt *peerTable) recomputeLocked() bool {
	best := map[string]regions.Node{}
	seen := map[string]bool{pt.localRegion: true}
	for _, n := range pt.mu.nodes {
		seen[n.Region] = true
		if n.Region == pt.localRegion || n.QUIC == "" {
			continue
		}
		b, ok := best[n.Region]
		// Prefer an up node, then the lowest name, so every sender agrees.
		if !ok || (n.State.Up() && !b.State.Up()) || (n.State.Up() == b.State.Up() && n.Name < b.Name) {
			best[n.Region] = n
		}
	}
	for region, ch := range pt.mu.changed {
		if best[region].Name != pt.mu.chosen[region] {
			close(ch)
			delete(pt.mu.changed, region)
		}
	}
	clear(pt.mu.chosen)
	for region, n := range best {
		pt.mu.chosen[region] = n.Name
	}
	regs := make([]string, 0, len(seen))
	for r := range seen {
		regs = append(regs, r)
	}
	slices.Sort(regs)
	changed := !slices.Equal(regs, pt.mu.regions)
	pt.mu.regions = regs
	return changed
}
