package replicator

// Policies say which regions a namespace's or a topic's data lives in. They are records in a
// system topic that replicates to every region; every node keeps the latest version of each
// record, where "latest" is decided by (hybrid logical clock, writing region), so any node may
// write and all nodes converge without cross-region consensus. A topic-level record overrides
// its namespace's.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ternmq/tern/protocols"
)

// SystemTopic holds the policy records. It replicates to every region in the mesh.
const SystemTopic = "persistent://tern/system/policies"

// PolicyKind says what a policy applies to.
type PolicyKind string

// Policy kinds.
const (
	KindNamespace PolicyKind = "namespace"
	KindTopic     PolicyKind = "topic"
)

// Start is where replication to a region begins when the region is added to a policy.
type Start string

// Start positions.
const (
	// StartEarliest sends the whole retained history to the region. The default: a region added
	// to a policy gets what producers wrote before, even while the policy was propagating.
	StartEarliest Start = "earliest"
	// StartLatest sends only what is appended after the sender noticed the region.
	StartLatest Start = "latest"
)

// Topology says how entries travel between the policy's regions.
type Topology string

// Topologies.
const (
	// TopologyMesh: every region sends what was produced in it directly to every other region
	// (Pulsar's full mesh). Entries that arrived by replication are not forwarded, so each entry
	// crosses each link once.
	TopologyMesh Topology = "mesh"
	// TopologyHub: spokes send what was produced in them to the hub only; the hub sends every
	// entry (its own and those from spokes) to every region that has not seen it. For edges that
	// can reach only the hub.
	TopologyHub Topology = "hub"
)

// PolicyKey names a policy record.
type PolicyKey struct {
	Kind PolicyKind `json:"kind"`
	// Name is "tenant/namespace" for a namespace, the full topic name for a topic.
	Name string `json:"name"`
}

func (k PolicyKey) String() string { return string(k.Kind) + ":" + k.Name }

// Validate checks the name parses as the kind says.
func (k PolicyKey) Validate() error {
	switch k.Kind {
	case KindNamespace:
		if _, err := protocols.ParseNamespace(k.Name); err != nil {
			return err
		}
	case KindTopic:
		t, err := protocols.ParseTopicName(k.Name, "")
		if err != nil {
			return err
		}
		if t.String() != k.Name {
			return fmt.Errorf("%w: write the topic in full, as %s", protocols.ErrInvalidTopicName, t)
		}
		if base, i := t.PartitionIndex(); i >= 0 {
			return fmt.Errorf("%w: %s is partition %d of %s: set the policy on %s", protocols.ErrInvalidTopicName, t, i, base, base)
		}
	default:
		return fmt.Errorf("%w: policy kind %q: want namespace or topic", ErrInvalidPolicy, k.Kind)
	}
	return nil
}

// HLC is a hybrid logical clock reading: wall time in Unix milliseconds and a counter that
// orders events within one millisecond or while the wall clock lags a clock already seen.
type HLC struct {
	Wall    int64  `json:"wall"`
	Logical uint32 `json:"logical"`
}

// Compare orders two readings.
func (h HLC) Compare(o HLC) int {
	switch {
	case h.Wall != o.Wall:
		if h.Wall < o.Wall {
			return -1
		}
		return 1
	case h.Logical != o.Logical:
		if h.Logical < o.Logical {
			return -1
		}
		return 1
	}
	return 0
}

// hlcClock issues increasing readings, never behind any reading it observed.
type hlcClock struct {
	now func() time.Time
	mu  sync.Mutex
	// last is the highest reading issued or observed.
	last HLC
}

func (c *hlcClock) Now() HLC {
	c.mu.Lock()
	defer c.mu.Unlock()
	wall := c.now().UnixMilli()
	if wall > c.last.Wall {
		c.last = HLC{Wall: wall}
	} else {
		c.last.Logical++
	}
	return c.last
}

func (c *hlcClock) Observe(h HLC) {
	c.mu.Lock()
	if h.Compare(c.last) > 0 {
		c.last = h
	}
	c.mu.Unlock()
}

// Policy is one version of a policy record.
type Policy struct {
	PolicyKey
	// Regions lists the regions the data lives in, sorted. A region not listed neither sends
	// nor is sent the data (it may still hold what it received before).
	Regions []string `json:"regions"`
	// Start holds, per region, where replication to it begins; regions not listed start at
	// StartEarliest.
	Start map[string]Start `json:"start,omitempty"`
	// Topology is how entries travel; empty means TopologyMesh.
	Topology Topology `json:"topology,omitempty"`
	// Hub is the hub region when Topology is TopologyHub.
	Hub string `json:"hub,omitempty"`
	// Deleted marks a removed policy; the record stays so later and earlier versions still
	// order against it.
	Deleted bool `json:"deleted,omitempty"`

	// Version counts the writes of this record as seen by the node that made each one; a
	// compare-and-set names the version it read. Concurrent writes in two regions can both
	// produce the same version: the stamp decides which one every node keeps.
	Version int64 `json:"version"`
	// Stamp is the writer's hybrid logical clock at the write.
	Stamp HLC `json:"hlc"`
	// Writer is the region that wrote this version; it breaks stamp ties.
	Writer string `json:"writer"`
}

// newer reports whether p wins over o under last-writer-wins.
func (p *Policy) newer(o *Policy) bool {
	if c := p.Stamp.Compare(o.Stamp); c != 0 {
		return c > 0
	}
	return p.Writer > o.Writer
}

// StartFor is where replication to region r starts.
func (p *Policy) StartFor(r string) Start {
	if s, ok := p.Start[r]; ok {
		return s
	}
	return StartEarliest
}

// EffectiveTopology is the topology with the default filled in.
func (p *Policy) EffectiveTopology() Topology {
	if p.Topology == "" {
		return TopologyMesh
	}
	return p.Topology
}

// Has reports whether the policy lists region r.
func (p *Policy) Has(r string) bool { return slices.Contains(p.Regions, r) }

// PolicySpec is what a writer asks for; the store adds the version, stamp and writer.
type PolicySpec struct {
	Regions  []string         `json:"regions"`
	Start    map[string]Start `json:"start,omitempty"`
	Topology Topology         `json:"topology,omitempty"`
	Hub      string           `json:"hub,omitempty"`
}

// normalize sorts and validates a spec against the regions the mesh knows.
func (s *PolicySpec) normalize(known []string) error {
	var errs []error
	if len(s.Regions) == 0 {
		errs = append(errs, errors.New("regions is empty: name at least one region (the local one keeps the data local)"))
	}
	regions := slices.Clone(s.Regions)
	slices.Sort(regions)
	var unknown []string
	for i, r := range regions {
		if i > 0 && regions[i-1] == r {
			errs = append(errs, fmt.Errorf("region %q is listed twice", r))
			continue
		}
		if err := checkName("region", r); err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.Contains(known, r) {
			unknown = append(unknown, r)
		}
	}
	if len(unknown) > 0 {
		errs = append(errs, &UnknownRegionsError{Unknown: unknown, Known: known})
	}
	s.Regions = slices.Compact(regions)
	for r, st := range s.Start {
		if !slices.Contains(s.Regions, r) {
			errs = append(errs, fmt.Errorf("start names region %q, which is not in regions %v", r, s.Regions))
		}
		if st != StartEarliest && st != StartLatest {
			errs = append(errs, fmt.Errorf("start for %q is %q: want earliest or latest", r, st))
		}
	}
	if len(s.Start) == 0 {
		s.Start = nil
	}
	switch s.Topology {
	case "", TopologyMesh:
		s.Topology = ""
		if s.Hub != "" {
			errs = append(errs, fmt.Errorf("hub %q is set but topology is mesh: set topology to hub or drop the hub", s.Hub))
		}
	case TopologyHub:
		if !slices.Contains(s.Regions, s.Hub) {
			errs = append(errs, fmt.Errorf("topology hub needs hub set to one of the regions %v (hub is %q)", s.Regions, s.Hub))
		}
	default:
		errs = append(errs, fmt.Errorf("topology %q: want mesh or hub", s.Topology))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidPolicy, errors.Join(errs...))
	}
	return nil
}

// UnknownRegionsError refuses a policy that names regions the mesh has never seen, listing the
// ones it knows so the operator can fix a typo or start the region first.
type UnknownRegionsError struct {
	Unknown []string
	Known   []string
}

func (e *UnknownRegionsError) Error() string {
	return fmt.Sprintf("unknown regions %s: the mesh knows %s", strings.Join(e.Unknown, ", "), strings.Join(e.Known, ", "))
}

// VersionMismatchError refuses a compare-and-set whose expected version is not the current one.
type VersionMismatchError struct {
	Key      PolicyKey
	Expected int64
	Current  int64
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("replicator: policy %s is at version %d, not %d: read it again and retry", e.Key, e.Current, e.Expected)
}

// policyRecord is a policy as stored in the system topic: the message key is the PolicyKey's
// String, the value this JSON.
func encodePolicy(p *Policy) ([]byte, error) { return json.Marshal(p) }

func decodePolicy(b []byte) (*Policy, error) {
	var p Policy
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPolicy, err)
	}
	if err := p.PolicyKey.Validate(); err != nil {
		return nil, err
	}
	if p.Writer == "" || p.Version < 1 {
		return nil, fmt.Errorf("%w: record %s has no writer or version", ErrInvalidPolicy, p.PolicyKey)
	}
	return &p, nil
}
