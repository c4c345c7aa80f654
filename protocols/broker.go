package protocols

import (
	"context"
	"time"
)

// Broker is everything a protocol front end may ask of the node. Package
// proxy implements it; protocols/kafka, protocols/pulsar and
// protocols/websocket hold one and never reach storage another way.
//
// It is split by concern so each front end can depend on the parts it uses
// and each part can grow in its own file.
type Broker interface {
	Cluster
	Topics
	Log
	GroupOffsets
}

// NodeInfo describes one node as clients and peers see it.
type NodeInfo struct {
	// Name is unique in the mesh; ID is a stable number derived from it
	// (Kafka broker ids are int32).
	Name   string
	ID     int32
	Region string
	Rack   string
	// Client addresses as host:port, empty when the listener is off.
	KafkaAddr  string
	PulsarAddr string
	HTTPAddr   string
}

// Cluster answers who serves what. Until a region has more than one node
// every partition is owned by the local node; callers must still ask, so
// that routing changes in one place when regions grow.
type Cluster interface {
	// LocalNode is this node.
	LocalNode() NodeInfo
	// RegionNodes lists the nodes of the local region that serve clients
	// (Kafka Metadata brokers); it always includes the local node.
	RegionNodes() []NodeInfo
	// ClusterID is the stable id Kafka clients see.
	ClusterID() string
	// Owner is the node that serves the partition.
	Owner(ctx context.Context, p Partition) (NodeInfo, error)
	// Ready reports whether storage is open and listeners are up.
	Ready() bool
}

// Partition addresses one log: a topic and a partition index, or index -1
// for a non-partitioned topic (whose one log is the topic itself).
type Partition struct {
	Topic TopicName
	Index int
}

// Name is the log's own topic name (topic-partition-N, or the topic).
func (p Partition) Name() TopicName {
	if p.Index < 0 {
		return p.Topic
	}
	return p.Topic.Partition(p.Index)
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name TopicName
	// Partitions is the partition count; 0 means a non-partitioned topic
	// with a single log, the topic itself.
	Partitions int
	// Config holds the topic-level overrides (Kafka config names:
	// retention.ms, retention.bytes, max.message.bytes, cleanup.policy).
	Config map[string]string
	// Created is when this incarnation of the topic was created.
	Created time.Time
}

// Logs lists the topic's partitions in index order.
func (t TopicInfo) Logs() []Partition {
	if t.Partitions == 0 {
		return []Partition{{Topic: t.Name, Index: -1}}
	}
	ps := make([]Partition, t.Partitions)
	for i := range ps {
		ps[i] = Partition{Topic: t.Name, Index: i}
	}
	return ps
}

// ConfigEntry is one effective topic config value and where it comes from.
type ConfigEntry struct {
	Name  string
	Value string
	// Source is "topic" for an override, "namespace" or "default" otherwise.
	Source string
	// ReadOnly entries are reported but cannot be altered.
	ReadOnly bool
	// Sensitive values are never shown.
	Sensitive bool
}

// Topics manages topics and their configuration.
type Topics interface {
	// Topic returns a topic's description, or ErrTopicNotFound.
	Topic(ctx context.Context, name TopicName) (TopicInfo, error)
	// CreateTopic creates a topic with the given partition count (0 for a
	// non-partitioned topic) and config overrides. ErrTopicExists if it
	// exists; ErrInvalidConfig (wrapped, naming the key) for a bad config.
	CreateTopic(ctx context.Context, name TopicName, partitions int, config map[string]string) (TopicInfo, error)
	// DeleteTopic removes a topic, its logs and every cursor and offset on it.
	DeleteTopic(ctx context.Context, name TopicName) error
	// ListTopics lists the topics of a namespace, or of every namespace
	// when ns is the zero value.
	ListTopics(ctx context.Context, ns NamespaceName) ([]TopicInfo, error)
	// SetPartitions grows a partitioned topic to n partitions.
	SetPartitions(ctx context.Context, name TopicName, n int) error
	// AlterTopicConfig sets and removes topic-level overrides atomically
	// after validating all of them.
	AlterTopicConfig(ctx context.Context, name TopicName, set map[string]string, remove []string) error
	// TopicConfig is the effective configuration with its sources.
	TopicConfig(ctx context.Context, name TopicName) ([]ConfigEntry, error)
	// AutoCreate reports whether producing to or fetching an unknown topic
	// should create it (with this many partitions).
	AutoCreate() (enabled bool, partitions int)
}

// Log reads and writes partition logs.
type Log interface {
	// Produce appends one entry (an Envelope and one RecordBatch v2) and
	// returns once it is durable under the partition's durability policy.
	// The broker applies deduplication: Kafka idempotence when the batch
	// carries a producer id, Pulsar producer dedup when the envelope names a
	// producer and the namespace enables it, replication dedup when the
	// envelope has an origin region. A duplicate returns the original
	// offsets with Duplicate set and writes nothing.
	Produce(ctx context.Context, p Partition, req ProduceRequest) (ProduceResult, error)
	// StartProduce is Produce split in two: it validates, deduplicates,
	// assigns offsets and submits the write, in call order, and returns
	// before the fsync. A front end that pipelines requests (several Kafka
	// produce requests in flight on one connection) starts them in request
	// order and waits on each in turn, so ordering per partition follows
	// the requests while their fsyncs are shared. Every PendingProduce must
	// be waited for, by one goroutine.
	StartProduce(ctx context.Context, p Partition, req ProduceRequest) (PendingProduce, error)
	// Fetch reads whole entries starting with the one that holds offset,
	// up to maxBytes (always at least one entry when any is available).
	// It does not wait; see Wait.
	Fetch(ctx context.Context, p Partition, offset int64, maxBytes int) (FetchResult, error)
	// FetchHere reads as Fetch does, for a reader whose next read of p is
	// not where this one ends (a consumer of many partitions reads the
	// others first): the node does not read on after it, as Fetch does for
	// a reader behind. A read Prefetch started at offset is taken as Fetch
	// takes it.
	FetchHere(ctx context.Context, p Partition, offset int64, maxBytes int) (FetchResult, error)
	// Prefetch starts reading up to maxBytes of p at offset, for a Fetch or
	// FetchHere there soon with at least that maxBytes, if the node has
	// room for it. It does not wait.
	Prefetch(ctx context.Context, p Partition, offset int64, maxBytes int)
	// Offsets reports the log start offset, the high watermark and the
	// last stable offset.
	Offsets(ctx context.Context, p Partition) (PartitionOffsets, error)
	// Wait blocks until one of the partitions has data past its offset,
	// or ctx ends (then it returns ctx.Err()).
	Wait(ctx context.Context, watches []Watch) error
	// OffsetForTime is the first offset whose timestamp is at or after ts
	// (Unix ms), or the high watermark when none is.
	OffsetForTime(ctx context.Context, p Partition, ts int64, kind TimeKind) (int64, error)
	// DeleteRecordsBefore moves the log start offset to offset (Kafka
	// DeleteRecords); whole entries below it are removed.
	DeleteRecordsBefore(ctx context.Context, p Partition, offset int64) (int64, error)
}

// TimeKind selects which time OffsetForTime searches.
type TimeKind int

const (
	// EventTime is the record timestamp (Kafka ListOffsets by timestamp).
	EventTime TimeKind = iota
	// PublishTime is the append time (Pulsar seek by publish time).
	PublishTime
)

// Watch is one partition a Wait watches, and the offset the caller has
// already read up to.
type Watch struct {
	Partition Partition
	Offset    int64
}

// ProduceRequest is one entry to append.
type ProduceRequest struct {
	// Envelope is stored before the batch; the broker sets AppendTime.
	Envelope Envelope
	// Batch is exactly one RecordBatch v2; it is validated (CRC, lengths,
	// count) and stored byte for byte, with the base offset rewritten.
	// The broker does not keep a reference to it.
	Batch []byte
	// Header is Batch's header if the caller already validated it; zero
	// means the broker validates.
	Header *BatchHeader
}

// PendingProduce is a produce whose durability has not been awaited.
type PendingProduce interface {
	// Wait blocks until the entry is durable and returns where it landed.
	Wait() (ProduceResult, error)
}

// ReadyProduce is a PendingProduce that can tell whether Wait would return
// at once (false may also mean it cannot tell). A front end answering in
// batches uses it to send what it holds before it waits.
type ReadyProduce interface {
	PendingProduce
	Ready() bool
}

// ProduceResult reports where an entry landed.
type ProduceResult struct {
	BaseOffset int64
	// LastOffset is the offset of the entry's last record.
	LastOffset int64
	// AppendTime is the publish time the log stamped (Unix ms).
	AppendTime int64
	// LogStartOffset is the partition's log start offset.
	LogStartOffset int64
	// Duplicate is set when deduplication recognised a resend; the offsets
	// are the original ones.
	Duplicate bool
}

// FetchResult is a run of entries and the partition's offsets at read time.
type FetchResult struct {
	Entries []StoredEntry
	PartitionOffsets
	// Recycle, when set, hands the entries' storage back to the log for
	// the next read. A caller that is done with the entries (it copied
	// what it needs) calls it and uses them no more; one that keeps them
	// leaves it, and the storage is garbage collected as usual.
	Recycle func()
}

// StoredEntry is one entry as the log holds it.
type StoredEntry struct {
	// BaseOffset and Count give the offsets [BaseOffset, BaseOffset+Count).
	BaseOffset int64
	Count      int64
	// Value is the encoded entry (envelope and batch, base offset stamped).
	// The caller owns it.
	Value []byte
}

// PartitionOffsets are a partition's bounds.
type PartitionOffsets struct {
	// Start is the log start offset (the first readable offset).
	Start int64
	// HighWatermark is one past the last durable offset.
	HighWatermark int64
	// LastStable is the last stable offset (read_committed bound); it
	// equals HighWatermark until transactions are in play.
	LastStable int64
}

// GroupOffsets stores Kafka consumer group committed offsets durably. The
// group membership protocol lives in protocols/kafka; it stores its
// membership through GroupMembership.
type GroupOffsets interface {
	// CommitOffsets stores offsets for a group, atomically.
	CommitOffsets(ctx context.Context, group string, offsets []CommittedOffset) error
	// FetchOffsets returns the committed offsets of a group for the given
	// partitions, or for every partition with an offset when parts is nil.
	FetchOffsets(ctx context.Context, group string, parts []Partition) ([]CommittedOffset, error)
	// ListGroupsWithOffsets lists groups that have committed offsets.
	ListGroupsWithOffsets(ctx context.Context) ([]string, error)
	// DeleteGroupOffsets removes every committed offset of a group.
	DeleteGroupOffsets(ctx context.Context, group string) error
}

// GroupMembership keeps a Kafka consumer group's membership (generation,
// members and their assignments) across restarts, so that members that
// keep running while the node restarts can go on heartbeating and
// committing, as with Apache Kafka. Only the Kafka front end needs it.
type GroupMembership interface {
	// PutGroupMembership stores a group's encoded membership, durably.
	PutGroupMembership(ctx context.Context, group string, data []byte) error
	// DeleteGroupMembership removes it; a group that has none is no error.
	DeleteGroupMembership(ctx context.Context, group string) error
	// ScanGroupMemberships calls fn for every stored membership.
	ScanGroupMemberships(ctx context.Context, fn func(group string, data []byte) error) error
}

// CommittedOffset is one committed position of a group on a partition.
type CommittedOffset struct {
	Partition   Partition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  int64 // Unix ms
	// Found is false in FetchOffsets results for partitions with no commit.
	Found bool
}
