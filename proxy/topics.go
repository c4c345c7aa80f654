package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Topic config keys tern honours, with Kafka's names since Kafka tooling
// sets them; Pulsar's namespace policies map onto the same limits.
const (
	ConfRetentionMs     = "retention.ms"
	ConfRetentionBytes  = "retention.bytes"
	ConfMaxMessageBytes = "max.message.bytes"
	ConfCleanupPolicy   = "cleanup.policy"
	confTimestampType   = "message.timestamp.type"
)

// topicLimits is the effective per-topic configuration the hot path needs,
// cached per topic and dropped when a topic or namespace changes.
type topicLimits struct {
	maxMessageBytes int
	durability      localstore.Durability
	retention       localstore.Retention
	dedup           bool
	// messageTTL expires what subscriptions leave unacknowledged for
	// longer (0: never).
	messageTTL time.Duration
	// backlogQuotas are the namespace's Pulsar backlog quotas by type.
	backlogQuotas map[string]BacklogQuota
}

// limits returns a topic's effective limits.
func (n *Node) limits(ctx context.Context, name protocols.TopicName) (*topicLimits, error) {
	key := name.String()
	n.cache.RLock()
	l, ok := n.cache.limits[key]
	n.cache.RUnlock()
	if ok {
		return l, nil
	}
	t, err := n.store.Topic(key)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	pol, err := n.NamespacePolicies(ctx, name.NamespaceName())
	if err != nil && !errors.Is(err, protocols.ErrNamespaceNotFound) {
		return nil, err
	}
	l = n.effective(t.Config, pol)
	n.cache.Lock()
	n.cache.limits[key] = l
	n.cache.Unlock()
	return l, nil
}

// effective folds topic overrides over namespace policies over node
// defaults. Overrides were validated when they were set.
func (n *Node) effective(conf map[string]string, pol Policies) *topicLimits {
	l := &topicLimits{
		maxMessageBytes: int(n.cfg.Limits.MaxMessageBytes),
		durability:      localstore.Durability(n.cfg.Storage.Durability),
		retention: localstore.Retention{
			MaxAge:   time.Duration(n.cfg.Retention.MaxAge),
			MaxBytes: max(int64(n.cfg.Retention.MaxBytes), 0),
		},
	}
	if pol.Durability != "" {
		l.durability = localstore.Durability(pol.Durability)
	}
	if pol.Deduplication != nil {
		l.dedup = *pol.Deduplication
	}
	l.backlogQuotas = pol.BacklogQuotas
	if pol.MessageTTLSeconds != nil {
		l.messageTTL = time.Duration(*pol.MessageTTLSeconds) * time.Second
	}
	if r := pol.Retention; r != nil {
		l.retention.MaxAge = max(time.Duration(r.RetentionTimeInMinutes)*time.Minute, 0)
		l.retention.MaxBytes = max(r.RetentionSizeInMB<<20, 0)
	}
	if v, ok := conf[ConfRetentionMs]; ok {
		ms, _ := strconv.ParseInt(v, 10, 64)
		l.retention.MaxAge = max(time.Duration(ms)*time.Millisecond, 0)
	}
	if v, ok := conf[ConfRetentionBytes]; ok {
		b, _ := strconv.ParseInt(v, 10, 64)
		l.retention.MaxBytes = max(b, 0)
	}
	if v, ok := conf[ConfMaxMessageBytes]; ok {
		b, _ := strconv.Atoi(v)
		l.maxMessageBytes = min(b, int(n.cfg.Limits.MaxMessageBytes))
	}
	return l
}

func (n *Node) invalidateTopics() {
	n.cache.Lock()
	clear(n.cache.limits)
	n.cache.Unlock()
}

// validateTopicConfig checks overrides and names the key that is wrong.
func (n *Node) validateTopicConfig(conf map[string]string) error {
	var errs []error
	for k, v := range conf {
		switch k {
		case ConfRetentionMs, ConfRetentionBytes:
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil || x < -1 {
				errs = append(errs, fmt.Errorf("%w: %s=%q: want -1 (unbounded) or a non-negative integer", protocols.ErrInvalidConfig, k, v))
			}
		case ConfMaxMessageBytes:
			x, err := strconv.Atoi(v)
			if err != nil || x < 1 {
				errs = append(errs, fmt.Errorf("%w: %s=%q: want a positive integer (the node allows at most %d)", protocols.ErrInvalidConfig, k, v, n.cfg.Limits.MaxMessageBytes))
			}
		case ConfCleanupPolicy:
			if v != "delete" {
				errs = append(errs, fmt.Errorf("%w: %s=%q: tern deletes by retention; compaction is not supported, so only \"delete\" is accepted", protocols.ErrInvalidConfig, k, v))
			}
		default:
			errs = append(errs, fmt.Errorf("%w: %s: not a topic config tern honours (use retention.ms, retention.bytes, max.message.bytes, cleanup.policy)", protocols.ErrInvalidConfig, k))
		}
	}
	return errors.Join(errs...)
}

func topicInfo(name protocols.TopicName, t *localstore.TopicMeta) protocols.TopicInfo {
	return protocols.TopicInfo{Name: name, Partitions: t.Partitions, Config: t.Config, Created: time.UnixMilli(t.CreatedMs)}
}

// Topic implements protocols.Topics.
func (n *Node) Topic(ctx context.Context, name protocols.TopicName) (protocols.TopicInfo, error) {
	t, err := n.store.Topic(name.String())
	if err != nil {
		return protocols.TopicInfo{}, mapStoreErr(err)
	}
	return topicInfo(name, t), nil
}

// CreateTopic implements protocols.Topics.
func (n *Node) CreateTopic(ctx context.Context, name protocols.TopicName, partitions int, config map[string]string) (protocols.TopicInfo, error) {
	if err := name.Validate(); err != nil {
		return protocols.TopicInfo{}, err
	}
	if base, i := name.PartitionIndex(); i >= 0 {
		if _, err := n.store.Topic(base.String()); err == nil {
			return protocols.TopicInfo{}, fmt.Errorf("%w: %s is partition %d of the partitioned topic %s", protocols.ErrTopicExists, name, i, base)
		}
	}
	if partitions < 0 {
		return protocols.TopicInfo{}, fmt.Errorf("%w: %d; use 0 for a non-partitioned topic or a positive count", protocols.ErrInvalidPartitions, partitions)
	}
	if err := n.validateTopicConfig(config); err != nil {
		return protocols.TopicInfo{}, err
	}
	if _, err := n.NamespacePolicies(ctx, name.NamespaceName()); err != nil {
		return protocols.TopicInfo{}, err
	}
	t, err := n.store.CreateTopic(name.String(), partitions, config)
	if err != nil {
		return protocols.TopicInfo{}, mapStoreErr(err)
	}
	n.log.Info("topic created", "topic", name.String(), "partitions", partitions)
	return topicInfo(name, t), nil
}

// DeleteTopic implements protocols.Topics.
func (n *Node) DeleteTopic(ctx context.Context, name protocols.TopicName) error {
	var pids []localstore.PartitionID
	if t, err := n.store.Topic(name.String()); err == nil {
		pids = t.PIDs
	}
	err := n.store.DeleteTopic(name.String())
	n.invalidateTopics()
	if err == nil {
		n.forgetPartitions(pids)
		n.log.Info("topic deleted", "topic", name.String())
	}
	return mapStoreErr(err)
}

// forgetPartitions drops what the node caches in memory for deleted
// partitions: the Kafka idempotence tables, the Pulsar producer dedup
// states and the replication dedup states (localstore deletes their
// persisted copies with the topic). Partition ids are never reused, so
// a stale entry is never wrong, only kept for nothing.
func (n *Node) forgetPartitions(pids []localstore.PartitionID) {
	if len(pids) == 0 {
		return
	}
	gone := make(map[localstore.PartitionID]bool, len(pids))
	for _, pid := range pids {
		gone[pid] = true
	}
	n.kafka.mu.Lock()
	for _, pid := range pids {
		delete(n.kafka.parts, pid)
	}
	n.kafka.mu.Unlock()
	d := &n.messaging().dedup
	d.mu.Lock()
	for _, pid := range pids {
		delete(d.parts, pid)
	}
	d.mu.Unlock()
	n.repl.dedup.Lock()
	for k := range n.repl.dedup.m {
		if gone[k.pid] {
			delete(n.repl.dedup.m, k)
		}
	}
	n.repl.dedup.Unlock()
}

// ListTopics implements protocols.Topics.
func (n *Node) ListTopics(ctx context.Context, ns protocols.NamespaceName) ([]protocols.TopicInfo, error) {
	prefix := ""
	if ns != (protocols.NamespaceName{}) {
		prefix = ns.TopicPrefix()
	}
	var out []protocols.TopicInfo
	for _, t := range n.store.Topics(prefix) {
		name, err := protocols.ParseTopicName(t.Name, "")
		if err != nil {
			continue // not a topic name (an internal log)
		}
		out = append(out, topicInfo(name, t))
	}
	return out, nil
}

// SetPartitions implements protocols.Topics.
func (n *Node) SetPartitions(ctx context.Context, name protocols.TopicName, count int) error {
	_, err := n.store.AddPartitions(name.String(), count)
	n.invalidateTopics()
	return mapStoreErr(err)
}

// AlterTopicConfig implements protocols.Topics.
func (n *Node) AlterTopicConfig(ctx context.Context, name protocols.TopicName, set map[string]string, remove []string) error {
	if err := n.validateTopicConfig(set); err != nil {
		return err
	}
	t, err := n.store.Topic(name.String())
	if err != nil {
		return mapStoreErr(err)
	}
	conf := maps.Clone(t.Config)
	if conf == nil {
		conf = map[string]string{}
	}
	for _, k := range remove {
		delete(conf, k)
	}
	maps.Copy(conf, set)
	err = n.store.SetTopicConfig(name.String(), conf)
	n.invalidateTopics()
	return mapStoreErr(err)
}

// TopicConfig implements protocols.Topics.
func (n *Node) TopicConfig(ctx context.Context, name protocols.TopicName) ([]protocols.ConfigEntry, error) {
	t, err := n.store.Topic(name.String())
	if err != nil {
		return nil, mapStoreErr(err)
	}
	pol, err := n.NamespacePolicies(ctx, name.NamespaceName())
	if err != nil && !errors.Is(err, protocols.ErrNamespaceNotFound) {
		return nil, err
	}
	eff := n.effective(nil, pol)
	source := func(k string) string {
		if _, ok := t.Config[k]; ok {
			return "topic"
		}
		if pol.Retention != nil && (k == ConfRetentionMs || k == ConfRetentionBytes) {
			return "namespace"
		}
		return "default"
	}
	value := func(k, def string) string {
		if v, ok := t.Config[k]; ok {
			return v
		}
		return def
	}
	ret := func(v int64) string {
		if v <= 0 {
			return "-1"
		}
		return strconv.FormatInt(v, 10)
	}
	entries := []protocols.ConfigEntry{
		{Name: ConfRetentionMs, Value: value(ConfRetentionMs, ret(eff.retention.MaxAge.Milliseconds())), Source: source(ConfRetentionMs)},
		{Name: ConfRetentionBytes, Value: value(ConfRetentionBytes, ret(eff.retention.MaxBytes)), Source: source(ConfRetentionBytes)},
		{Name: ConfMaxMessageBytes, Value: value(ConfMaxMessageBytes, strconv.Itoa(eff.maxMessageBytes)), Source: source(ConfMaxMessageBytes)},
		{Name: ConfCleanupPolicy, Value: value(ConfCleanupPolicy, "delete"), Source: source(ConfCleanupPolicy)},
		{Name: confTimestampType, Value: "CreateTime", Source: "default", ReadOnly: true},
	}
	slices.SortFunc(entries, func(a, b protocols.ConfigEntry) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return entries, nil
}

// AutoCreate implements protocols.Topics.
func (n *Node) AutoCreate() (bool, int) {
	return n.cfg.Kafka.AutoCreateTopics, n.cfg.Kafka.DefaultPartitions
}
