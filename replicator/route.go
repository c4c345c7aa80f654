package replicator

// Routing: which regions a region sends a topic to, which entries go on each stream, and what
// the sender writes into an entry's envelope.
//
// The safety rule (DESIGN §6) holds for every topology: an entry is sent to region R only if R
// is not its origin and not among the regions it visited. Each sender appends its own region to
// the visited list, so an entry can never come back to a region it passed through, and a loop is
// impossible whatever the policies say, even while two regions briefly disagree on a policy.
// The topology then narrows what is sent to avoid doubling traffic: in a full mesh a region sends
// only what was produced in it (every other region gets it directly from its origin), and a
// spoke sends only its own entries to the hub. Duplicates that still arrive by two paths (a
// policy changing from hub to mesh, say) are dropped by the receiver's dedup (layer 3).

import (
	"slices"

	"github.com/ternmq/tern/protocols"
)

// route is what a sender in one region does with a topic under a policy.
type route struct {
	dests []string
	// originOnly: send only entries produced in this region.
	originOnly bool
}

// routeFor computes the route of region local under policy p. A region the policy does not list
// sends nothing.
func routeFor(p *Policy, local string) route {
	if p == nil || !p.Has(local) {
		return route{}
	}
	others := make([]string, 0, len(p.Regions))
	for _, r := range p.Regions {
		if r != local {
			others = append(others, r)
		}
	}
	switch p.EffectiveTopology() {
	case TopologyHub:
		if local == p.Hub {
			return route{dests: others}
		}
		return route{dests: []string{p.Hub}, originOnly: true}
	default:
		return route{dests: others, originOnly: true}
	}
}

// admit decides whether an entry stored in region local goes to region dest.
func admit(env *protocols.Envelope, local, dest string, originOnly bool) (bool, error) {
	origin := env.OriginRegion
	if origin == "" {
		origin = local
	}
	if originOnly && origin != local {
		return false, nil
	}
	if origin == dest || slices.Contains(env.Visited, dest) {
		return false, nil
	}
	to, ok, err := protocols.ReplicateTo(env)
	if err != nil {
		return false, err
	}
	if ok && !slices.Contains(to, dest) {
		return false, nil
	}
	return true, nil
}

// stampForSend writes what the destination needs into the envelope of an entry read from the
// local log at offset base: an entry produced here gets this region as its origin, its local
// offset as the origin offset and the partition's incarnation as the origin epoch; every entry
// gets this region appended to its visited list.
func stampForSend(env *protocols.Envelope, local string, base, epoch int64) {
	if env.OriginRegion == "" {
		env.OriginRegion = local
		env.OriginOffset = base
		protocols.SetOriginEpoch(env, epoch)
		protocols.SetOriginTime(env, env.AppendTime)
	}
	if !slices.Contains(env.Visited, local) {
		env.Visited = append(env.Visited, local)
	}
}
