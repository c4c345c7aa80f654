package proxy

// The operator's view of topics, the one `tern topics` drives:
//
//	GET    /api/v1/topics[?namespace=t/ns]        every topic with its size and where it replicates
//	POST   /api/v1/topics                         create: {"topic", "partitions", "config"}
//	GET    /api/v1/topics/{tenant}/{ns}/{topic}   one topic: effective config and where each value
//	                                              comes from, partitions, subscriptions, policy
//	PATCH  /api/v1/topics/{tenant}/{ns}/{topic}   alter: {"partitions", "set", "remove"}
//	DELETE /api/v1/topics/{tenant}/{ns}/{topic}[?force=true]
//
// Pulsar's admin paths cover the same ground one field per call; these exist because an
// operator's change should be one request that either happens whole or not at all (a topic is
// created with its retention, or not created), and because a describe that needs six calls is
// six chances to see a topic change underneath it. Everything is validated before anything is
// written. Errors are {"error": "..."} and say what to change.

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/replicator"
)

// TopicSummary is one topic in a listing.
type TopicSummary struct {
	// Name is the full topic name.
	Name string `json:"name"`
	// Partitions is the partition count, 0 for a non-partitioned topic.
	Partitions int `json:"partitions"`
	// Messages and Bytes are what the topic's logs retain in this region.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Config holds the topic's own overrides (Kafka config names).
	Config map[string]string `json:"config,omitempty"`
	// Regions lists where the topic's data lives under its effective replication policy;
	// empty when no policy governs it (it stays in the region it is written in).
	Regions []string `json:"regions,omitempty"`
}

// TopicDetail is one topic described.
type TopicDetail struct {
	TopicSummary
	Created time.Time `json:"created"`
	// Effective is every config value the topic runs with and its source: topic, namespace or
	// default.
	Effective []TopicConfigValue `json:"effective_config"`
	// Logs holds one entry per partition (one for a non-partitioned topic).
	Logs          []TopicLog `json:"logs"`
	Subscriptions []string   `json:"subscriptions"`
	// Policy is the effective replication policy, nil when none governs the topic.
	Policy *EffectivePolicy `json:"policy,omitempty"`
}

// TopicConfigValue is one effective config value.
type TopicConfigValue struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Source   string `json:"source"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// TopicLog is one partition log's bounds and size in this region.
type TopicLog struct {
	// Partition is the index, -1 for a non-partitioned topic.
	Partition int `json:"partition"`
	// Start is the first retained offset, End the next offset to be written.
	Start    int64      `json:"start"`
	End      int64      `json:"end"`
	Messages int64      `json:"messages"`
	Bytes    int64      `json:"bytes"`
	Entries  int64      `json:"entries"`
	LastAt   *time.Time `json:"last_append,omitempty"`
}

// EffectivePolicy is the replication policy that governs a topic and where it comes from.
type EffectivePolicy struct {
	// Source is "topic" for the topic's own policy, "namespace" for its namespace's.
	Source string `json:"source"`
	replicator.Policy
}

// TopicCreate is the body of POST /api/v1/topics.
type TopicCreate struct {
	Topic string `json:"topic"`
	// Partitions is the partition count; 0 makes a non-partitioned topic.
	Partitions int               `json:"partitions"`
	Config     map[string]string `json:"config,omitempty"`
}

// TopicAlter is the body of PATCH /api/v1/topics/{tenant}/{ns}/{topic}.
type TopicAlter struct {
	// Partitions, when set, grows a partitioned topic to this many partitions.
	Partitions *int `json:"partitions,omitempty"`
	// Set adds or replaces config overrides; Remove drops overrides (the value then comes from
	// the namespace or the node default).
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// operatorRoutes registers the /api/v1 resources the operator CLI drives, and the namespace
// policies tern adds to Pulsar's set.
func (n *Node) operatorRoutes(h routeFunc) {
	api := func(pattern string, f func(w http.ResponseWriter, r *http.Request) error) {
		n.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := f(w, r); err != nil {
				writeAPIError(w, adminStatus(err), err.Error())
			}
		}))
	}
	const one = "/api/v1/topics/{tenant}/{ns}/{topic}"
	api("GET /api/v1/topics", n.apiListTopics)
	api("POST /api/v1/topics", n.apiCreateTopic)
	api("GET "+one, n.apiDescribeTopic)
	api("PATCH "+one, n.apiAlterTopic)
	api("DELETE "+one, n.apiDeleteTopic)
	api("GET /api/v1/policies/effective", n.apiEffectivePolicy)
	n.durabilityRoutes(h)
}

// apiTopic reads the topic from the path and says plainly when it does not exist.
func (n *Node) apiTopic(r *http.Request) (protocols.TopicInfo, error) {
	name, err := pathTopic(r)
	if err != nil {
		return protocols.TopicInfo{}, badRequest("%v", cleanErr(err))
	}
	if base, i := name.PartitionIndex(); i >= 0 {
		if _, err := n.Topic(r.Context(), base); err == nil {
			return protocols.TopicInfo{}, badRequest("%s is partition %d of %s: name the topic itself", name, i, base)
		}
	}
	t, err := n.Topic(r.Context(), name)
	if errors.Is(err, protocols.ErrTopicNotFound) {
		return t, &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("topic %s does not exist", name)}
	}
	return t, err
}

func (n *Node) apiListTopics(w http.ResponseWriter, r *http.Request) error {
	var ns protocols.NamespaceName
	if q := r.URL.Query().Get("namespace"); q != "" {
		var err error
		if ns, err = protocols.ParseNamespace(q); err != nil {
			return badRequest("%v", cleanErr(err))
		}
		if _, err := n.NamespacePolicies(r.Context(), ns); err != nil {
			return namespaceErr(ns, err)
		}
	}
	topics, err := n.ListTopics(r.Context(), ns)
	if err != nil {
		return err
	}
	out := make([]TopicSummary, 0, len(topics))
	for _, t := range topics {
		if ns == (protocols.NamespaceName{}) && t.Name.Tenant == "tern" && t.Name.Namespace == "system" {
			continue // the node's own system topics show only when asked for by namespace
		}
		out = append(out, n.topicSummary(t))
	}
	slices.SortFunc(out, func(a, b TopicSummary) int { return cmp.Compare(a.Name, b.Name) })
	return okJSON(w, out)
}

// topicSummary sizes a topic from its logs' bounds.
func (n *Node) topicSummary(t protocols.TopicInfo) TopicSummary {
	s := TopicSummary{Name: t.Name.String(), Partitions: t.Partitions, Config: t.Config}
	for _, p := range t.Logs() {
		pid, err := n.pid(p)
		if err != nil {
			continue // deleted meanwhile
		}
		if st, err := n.store.PartitionStats(pid); err == nil {
			s.Messages += st.HighWatermark - st.Start
			s.Bytes += st.Bytes
		}
	}
	if p := n.effectivePolicy(t.Name); p != nil {
		s.Regions = p.Regions
	}
	return s
}

// effectivePolicy is the replication policy governing a topic, or nil.
func (n *Node) effectivePolicy(t protocols.TopicName) *EffectivePolicy {
	eng := n.repl.engine
	if eng == nil {
		return nil
	}
	p, ok := eng.EffectivePolicy(t)
	if !ok {
		return nil
	}
	return &EffectivePolicy{Source: string(p.Kind), Policy: p}
}

func (n *Node) apiCreateTopic(w http.ResponseWriter, r *http.Request) error {
	var req TopicCreate
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if req.Topic == "" {
		return badRequest(`name the topic: {"topic": "persistent://tenant/ns/name", "partitions": N}`)
	}
	name, err := protocols.ParseTopicName(req.Topic, "public/default")
	if err != nil {
		return badRequest("%v", cleanErr(err))
	}
	if base, i := name.PartitionIndex(); i >= 0 {
		return badRequest("%s looks like partition %d of %s; partitions are created with their topic (choose another name or create %s with --partitions)", name, i, base, base)
	}
	if req.Partitions < 0 {
		return badRequest("partitions %d: use 0 for a non-partitioned topic or a positive count", req.Partitions)
	}
	if err := n.validateTopicConfig(req.Config); err != nil {
		return badRequest("%v", cleanErr(err))
	}
	if _, err := n.NamespacePolicies(r.Context(), name.NamespaceName()); err != nil {
		return namespaceErr(name.NamespaceName(), err)
	}
	if t, err := n.Topic(r.Context(), name); err == nil {
		return &httpError{status: http.StatusConflict, msg: fmt.Sprintf("topic %s already exists with %s", name, partitionsText(t.Partitions))}
	}
	t, err := n.CreateTopic(r.Context(), name, req.Partitions, req.Config)
	if errors.Is(err, protocols.ErrTopicExists) {
		return &httpError{status: http.StatusConflict, msg: fmt.Sprintf("topic %s already exists", name)}
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/topics/"+t.Name.Tenant+"/"+t.Name.Namespace+"/"+t.Name.Local)
	writeJSON(w, http.StatusCreated, n.topicSummary(t))
	return nil
}

func partitionsText(n int) string {
	switch n {
	case 0:
		return "no partitions (non-partitioned)"
	case 1:
		return "1 partition"
	}
	return strconv.Itoa(n) + " partitions"
}

func (n *Node) apiDescribeTopic(w http.ResponseWriter, r *http.Request) error {
	t, err := n.apiTopic(r)
	if err != nil {
		return err
	}
	d := TopicDetail{TopicSummary: n.topicSummary(t), Created: t.Created, Subscriptions: []string{}}
	conf, err := n.TopicConfig(r.Context(), t.Name)
	if err != nil {
		return err
	}
	for _, c := range conf {
		d.Effective = append(d.Effective, TopicConfigValue{Name: c.Name, Value: c.Value, Source: c.Source, ReadOnly: c.ReadOnly})
	}
	for _, p := range t.Logs() {
		pid, err := n.pid(p)
		if err != nil {
			return err
		}
		st, err := n.store.PartitionStats(pid)
		if err != nil {
			return mapStoreErr(err)
		}
		l := TopicLog{Partition: p.Index, Start: st.Start, End: st.HighWatermark, Messages: st.HighWatermark - st.Start,
			Bytes: st.Bytes, Entries: st.Entries}
		if st.LastAppend > 0 {
			at := time.UnixMilli(st.LastAppend).UTC()
			l.LastAt = &at
		}
		d.Logs = append(d.Logs, l)
		subs, err := n.subscriptionNames(pid)
		if err != nil {
			return err
		}
		for _, s := range subs {
			if !slices.Contains(d.Subscriptions, s) {
				d.Subscriptions = append(d.Subscriptions, s)
			}
		}
	}
	slices.Sort(d.Subscriptions)
	d.Policy = n.effectivePolicy(t.Name)
	return okJSON(w, d)
}

func (n *Node) apiAlterTopic(w http.ResponseWriter, r *http.Request) error {
	t, err := n.apiTopic(r)
	if err != nil {
		return err
	}
	var req TopicAlter
	if err := readJSON(r, &req); err != nil {
		return err
	}
	// Check everything before changing anything.
	if err := n.validateTopicConfig(req.Set); err != nil {
		return badRequest("%v", cleanErr(err))
	}
	for _, k := range req.Remove {
		if _, ok := req.Set[k]; ok {
			return badRequest("%s is both set and removed: choose one", k)
		}
	}
	grow := false
	if p := req.Partitions; p != nil && *p != t.Partitions {
		switch {
		case t.Partitions == 0:
			return &httpError{status: http.StatusConflict, msg: fmt.Sprintf("%s is non-partitioned and cannot gain partitions; create a partitioned topic instead", t.Name)}
		case *p < t.Partitions:
			return &httpError{status: http.StatusConflict, msg: fmt.Sprintf("%s has %d partitions and partitions cannot be removed: the count can only grow (ask for more than %d)", t.Name, t.Partitions, t.Partitions)}
		}
		grow = true
	}
	if len(req.Set) > 0 || len(req.Remove) > 0 {
		if err := n.AlterTopicConfig(r.Context(), t.Name, req.Set, req.Remove); err != nil {
			return err
		}
	}
	if grow {
		if err := n.SetPartitions(r.Context(), t.Name, *req.Partitions); err != nil {
			return badRequest("%v", cleanErr(err))
		}
	}
	if t, err = n.Topic(r.Context(), t.Name); err != nil {
		return err
	}
	return okJSON(w, n.topicSummary(t))
}

func (n *Node) apiDeleteTopic(w http.ResponseWriter, r *http.Request) error {
	t, err := n.apiTopic(r)
	if err != nil {
		return err
	}
	return n.deleteIdleTopic(w, r, t, "stop them, or delete with --force")
}

// apiEffectivePolicy answers which policy governs a topic (?topic=) or a namespace
// (?namespace=), with the inheritance resolved: a topic's own record, else its namespace's.
// 404 means none does: the data stays in the region it is written in.
func (n *Node) apiEffectivePolicy(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	key, err := policyKeyOf(q.Get("namespace"), q.Get("topic"))
	if err != nil {
		return badRequest("%v", cleanErr(err))
	}
	eng := n.repl.engine
	if eng == nil {
		return &httpError{status: http.StatusServiceUnavailable, msg: "replication has not started yet"}
	}
	var p *EffectivePolicy
	if key.Kind == replicator.KindTopic {
		t, _ := protocols.ParseTopicName(key.Name, "")
		p = n.effectivePolicy(t)
	} else if rec, ok := eng.Policy(key); ok && !rec.Deleted {
		p = &EffectivePolicy{Source: string(replicator.KindNamespace), Policy: rec}
	}
	if p == nil {
		return &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("no policy governs %s: its data stays in the region it is written in", key.Name)}
	}
	return okJSON(w, p)
}

// namespaceErr says plainly that a namespace is missing.
func namespaceErr(ns protocols.NamespaceName, err error) error {
	if errors.Is(err, protocols.ErrNamespaceNotFound) {
		return &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("namespace %s does not exist (create it first)", ns)}
	}
	return err
}

// cleanErr drops the package prefixes of sentinel errors from a message meant for an operator
// ("protocols: invalid topic name: the topic name ..." reads "invalid topic name: ...").
func cleanErr(err error) string {
	msg := err.Error()
	for _, p := range []string{"protocols: ", "localstore: ", "replicator: ", "proxy: "} {
		for {
			i := indexWord(msg, p)
			if i < 0 {
				break
			}
			msg = msg[:i] + msg[i+len(p):]
		}
	}
	return msg
}

// indexWord finds p at the start of msg or after a space or newline.
func indexWord(msg, p string) int {
	for i := 0; i+len(p) <= len(msg); i++ {
		if msg[i:i+len(p)] == p && (i == 0 || msg[i-1] == ' ' || msg[i-1] == '\n') {
			return i
		}
	}
	return -1
}
