package proxy

// A dry run of a policy change answers with a plan: what the change would do, as this node sees
// it, in the terms an operator decides by (Nomad's plan, `nats stream edit --dry-run`):
//
//   - the regions before and after, with inheritance resolved (a topic without its own record
//     follows its namespace), and which are added, removed and kept;
//   - the topics the change governs here, with partition counts and retained size;
//   - per added region: where replication to it starts, whether each topic exists there, would
//     be created there, or has another partition count there (a conflict: replication refuses
//     such a topic), the backlog this region would send it, and the topics it holds that would
//     be created here.
//
// What other regions hold is asked of one of their nodes, at the admin address it gossips, with
// a short timeout. The plan is advice and says so when a region could not be asked; the write
// itself never depends on another region being reachable.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/regions"
	"github.com/ternmq/tern/replicator"
)

// remoteCheckTimeout bounds the question a plan asks another region.
const remoteCheckTimeout = 3 * time.Second

// PolicyPlan is what a policy change would do.
type PolicyPlan struct {
	// LocalRegion is the region of the node that made the plan; sizes and backlogs are its.
	LocalRegion string `json:"local_region"`
	// Before and After are the effective policies of the target; nil means none governs it (its
	// data stays in the region it is written in).
	Before *EffectivePolicy `json:"before"`
	After  *EffectivePolicy `json:"after"`
	// Added lists the regions the data would newly live in, Removed those it would leave, Kept
	// those in both.
	Added   []RegionPlan `json:"added"`
	Removed []string     `json:"removed"`
	Kept    []string     `json:"kept"`
	// Topics are the topics of this region the target's policy governs.
	Topics []PlanTopic `json:"topics"`
	// Overridden are topics of a namespace that have their own policy, which a namespace change
	// does not touch.
	Overridden []string `json:"overridden,omitempty"`
	// Conflicts would stop replication if the change were applied (partition counts that differ
	// between regions). A client should refuse to apply a plan with conflicts unless told to.
	Conflicts []string `json:"conflicts,omitempty"`
	// Notes explain effects that are easy to miss.
	Notes []string `json:"notes,omitempty"`
}

// PlanTopic is one topic with its size in the region that reports it.
type PlanTopic struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Messages   int64  `json:"messages"`
	Bytes      int64  `json:"bytes"`
}

// RegionPlan is what adding one region would do.
type RegionPlan struct {
	Region string           `json:"region"`
	Start  replicator.Start `json:"start"`
	// Sends tells whether this region would send to it (the topology decides).
	Sends bool `json:"sends"`
	// Topics says, for each governed topic, what the region has: "create" (it would be created
	// there with this region's partition count), "exists", "mismatch" (it has another partition
	// count: a conflict) or "unknown" (the region could not be asked).
	Topics []RegionTopic `json:"topics"`
	// BacklogMessages and BacklogBytes are what this region would send it: with start earliest
	// everything the governed topics retain here (entries that came from that region are not
	// sent back, so this is the most), with start latest nothing.
	BacklogMessages int64 `json:"backlog_messages"`
	BacklogBytes    int64 `json:"backlog_bytes"`
	// Incoming are topics the region holds that this region does not: replication would create
	// them here.
	Incoming []PlanTopic `json:"incoming,omitempty"`
	// Checked tells whether the region answered; CheckError says why not.
	Checked    bool   `json:"checked"`
	CheckError string `json:"check_error,omitempty"`
}

// RegionTopic is one topic as an added region has it.
type RegionTopic struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Action     string `json:"action"`
	// TheirPartitions is the region's partition count when the topic exists there.
	TheirPartitions *int `json:"their_partitions,omitempty"`
}

// PolicyDryRun is the answer to a dry run of PUT or DELETE /api/v1/policies: the change and
// its plan.
type PolicyDryRun struct {
	replicator.PolicyChange
	Plan *PolicyPlan `json:"plan"`
}

// planPolicy works out what change ch to the record key would do.
func (n *Node) planPolicy(ctx context.Context, key replicator.PolicyKey, ch replicator.PolicyChange) *PolicyPlan {
	local := n.cfg.Node.Region
	plan := &PolicyPlan{LocalRegion: local, Added: []RegionPlan{}, Removed: []string{}, Kept: []string{}, Topics: []PlanTopic{}}
	eng := n.repl.engine

	// The effective policy before and after.
	var ns protocols.NamespaceName
	var topic protocols.TopicName
	var nsPolicy *replicator.Policy
	if key.Kind == replicator.KindTopic {
		topic, _ = protocols.ParseTopicName(key.Name, "")
		ns = topic.NamespaceName()
	} else {
		ns, _ = protocols.ParseNamespace(key.Name)
	}
	if p, ok := eng.Policy(replicator.PolicyKey{Kind: replicator.KindNamespace, Name: ns.String()}); ok && !p.Deleted {
		nsPolicy = &p
	}
	switch {
	case key.Kind == replicator.KindTopic:
		plan.Before = n.effectivePolicy(topic)
	case nsPolicy != nil:
		plan.Before = &EffectivePolicy{Source: string(replicator.KindNamespace), Policy: *nsPolicy}
	}
	if next := ch.Policy; next != nil && !next.Deleted {
		plan.After = &EffectivePolicy{Source: string(key.Kind), Policy: *next}
	} else if key.Kind == replicator.KindTopic && nsPolicy != nil {
		plan.After = &EffectivePolicy{Source: string(replicator.KindNamespace), Policy: *nsPolicy}
	}

	// The governed topics of this region.
	topics, _ := n.ListTopics(ctx, ns)
	have := map[string]PlanTopic{}
	for _, t := range topics {
		if key.Kind == replicator.KindTopic && t.Name != topic {
			continue
		}
		if key.Kind == replicator.KindNamespace {
			if p, ok := eng.Policy(replicator.PolicyKey{Kind: replicator.KindTopic, Name: t.Name.String()}); ok && !p.Deleted {
				plan.Overridden = append(plan.Overridden, t.Name.String())
				continue
			}
		}
		s := n.topicSummary(t)
		pt := PlanTopic{Name: s.Name, Partitions: s.Partitions, Messages: s.Messages, Bytes: s.Bytes}
		plan.Topics = append(plan.Topics, pt)
		have[pt.Name] = pt
	}
	slices.SortFunc(plan.Topics, func(a, b PlanTopic) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(plan.Overridden)
	if key.Kind == replicator.KindTopic && len(plan.Topics) == 0 {
		plan.Notes = append(plan.Notes, fmt.Sprintf("%s does not exist in %s yet: the policy applies once it is created", topic, local))
	}

	// Regions added, removed and kept. Without a policy the data is where it was written.
	before, after := []string{local}, []string{local}
	if plan.Before != nil {
		before = plan.Before.Regions
	}
	if plan.After != nil {
		after = plan.After.Regions
	}
	for _, r := range after {
		if slices.Contains(before, r) {
			plan.Kept = append(plan.Kept, r)
		}
	}
	for _, r := range before {
		if !slices.Contains(after, r) {
			plan.Removed = append(plan.Removed, r)
		}
	}
	var dir regions.Directory
	if n.mesh != nil {
		dir = n.mesh.Directory()
	}
	for _, r := range after {
		if slices.Contains(before, r) {
			continue
		}
		rp := RegionPlan{Region: r, Start: plan.After.StartFor(r), Sends: sendsTo(plan.After, local, r), Topics: []RegionTopic{}}
		if rp.Sends && rp.Start == replicator.StartEarliest {
			for _, t := range plan.Topics {
				rp.BacklogMessages += t.Messages
				rp.BacklogBytes += t.Bytes
			}
		}
		theirs, err := n.remoteTopics(ctx, dir, r, ns)
		rp.Checked = err == nil
		if err != nil {
			rp.CheckError = err.Error()
		}
		for _, t := range plan.Topics {
			rt := RegionTopic{Name: t.Name, Partitions: t.Partitions, Action: "unknown"}
			if rp.Checked {
				if o, ok := theirs[t.Name]; !ok {
					rt.Action = "create"
				} else {
					p := o.Partitions
					rt.TheirPartitions = &p
					rt.Action = "exists"
					if p != t.Partitions {
						rt.Action = "mismatch"
						plan.Conflicts = append(plan.Conflicts, mismatchText(t.Name, local, t.Partitions, r, p))
					}
				}
			}
			rp.Topics = append(rp.Topics, rt)
		}
		for name, o := range theirs {
			if _, ok := have[name]; ok || (key.Kind == replicator.KindTopic && name != topic.String()) {
				continue
			}
			if key.Kind == replicator.KindNamespace {
				if p, ok := eng.Policy(replicator.PolicyKey{Kind: replicator.KindTopic, Name: name}); ok && !p.Deleted {
					continue
				}
			}
			rp.Incoming = append(rp.Incoming, PlanTopic{Name: name, Partitions: o.Partitions, Messages: o.Messages, Bytes: o.Bytes})
		}
		slices.SortFunc(rp.Incoming, func(a, b PlanTopic) int { return cmp.Compare(a.Name, b.Name) })
		plan.Added = append(plan.Added, rp)
	}
	plan.Notes = append(plan.Notes, planNotes(plan, local)...)
	return plan
}

// sendsTo tells whether region from sends its topics' entries to region to under p.
func sendsTo(p *EffectivePolicy, from, to string) bool {
	if p == nil || !p.Has(from) || !p.Has(to) || from == to {
		return false
	}
	if p.EffectiveTopology() == replicator.TopologyHub {
		return from == p.Hub || to == p.Hub
	}
	return true
}

func mismatchText(topic, local string, ours int, region string, theirs int) string {
	fix := fmt.Sprintf("grow it in %s to %d partitions (tern topics alter %s --partitions %d against a node of %s)", region, ours, topic, ours, region)
	if theirs > ours {
		fix = fmt.Sprintf("grow it here to %d partitions (tern topics alter %s --partitions %d)", theirs, topic, theirs)
	}
	return fmt.Sprintf("%s has %d partitions in %s and %d in %s: replication refuses topics whose partition counts differ; %s",
		topic, ours, local, theirs, region, fix)
}

func planNotes(plan *PolicyPlan, local string) []string {
	var notes []string
	if plan.After != nil && !plan.After.Has(local) {
		notes = append(notes, fmt.Sprintf("this region (%s) is not in the policy: what is written here stays here", local))
	}
	for _, r := range plan.Removed {
		if r != local {
			notes = append(notes, fmt.Sprintf("replication to %s stops; %s keeps what it already received", r, r))
		}
	}
	if plan.Before != nil && plan.After != nil {
		if bt, at := plan.Before.EffectiveTopology(), plan.After.EffectiveTopology(); bt != at || plan.Before.Hub != plan.After.Hub {
			notes = append(notes, fmt.Sprintf("topology changes from %s to %s", topologyText(&plan.Before.Policy), topologyText(&plan.After.Policy)))
		}
		for _, r := range plan.Kept {
			if b, a := plan.Before.StartFor(r), plan.After.StartFor(r); b != a {
				notes = append(notes, fmt.Sprintf("start for %s changes from %s to %s: it applies only to streams that have not started (new topics and partitions)", r, b, a))
			}
		}
	}
	for _, a := range plan.Added {
		if !a.Sends && len(plan.Topics) > 0 {
			notes = append(notes, fmt.Sprintf("%s sends nothing to %s directly (topology %s)", local, a.Region, topologyText(&plan.After.Policy)))
		}
	}
	return notes
}

func topologyText(p *replicator.Policy) string {
	if p.EffectiveTopology() == replicator.TopologyHub {
		return "hub (" + p.Hub + ")"
	}
	return "mesh"
}

// remoteTopics asks an up node of region r for the namespace's topics; a namespace it does not
// have is an empty answer.
func (n *Node) remoteTopics(ctx context.Context, dir regions.Directory, r string, ns protocols.NamespaceName) (map[string]TopicSummary, error) {
	var addrs []string
	for _, m := range dir.Region(r) {
		if m.State.Up() && m.HTTP != "" {
			addrs = append(addrs, m.HTTP)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no node of %s is up with an admin address", r)
	}
	ctx, cancel := context.WithTimeout(ctx, remoteCheckTimeout)
	defer cancel()
	var lastErr error
	for _, addr := range addrs {
		out, err := fetchTopics(ctx, "http://"+addr+"/api/v1/topics?namespace="+url.QueryEscape(ns.String()))
		if err == nil {
			return out, nil
		}
		lastErr = fmt.Errorf("asking %s at %s: %w", r, addr, err)
	}
	return nil, lastErr
}

func fetchTopics(ctx context.Context, u string) (map[string]TopicSummary, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	out := map[string]TopicSummary{}
	switch {
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"):
		return out, nil // the namespace does not exist there (a node without this endpoint answers text)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, body)
	}
	var list []TopicSummary
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("unexpected answer: %w", err)
	}
	for _, t := range list {
		out[t.Name] = t
	}
	return out, nil
}
