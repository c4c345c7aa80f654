package protocols

import "context"

// ProducerIDs hands out Kafka producer ids (InitProducerId). It is separate
// from Broker, like TopicConfigValidator, because only the Kafka front end
// needs it.
type ProducerIDs interface {
	// NewProducerID returns a producer id never returned before on this
	// node, across restarts. Idempotence state is keyed by it, so reuse
	// would let a new producer be mistaken for an old one.
	NewProducerID(ctx context.Context) (int64, error)
}

// TopicConfigValidator checks topic config overrides without applying them,
// for Kafka's validate-only admin requests (CreateTopics, AlterConfigs and
// IncrementalAlterConfigs with ValidateOnly).
type TopicConfigValidator interface {
	// ValidateTopicConfig returns ErrInvalidConfig, wrapped and naming
	// each bad key, when an override would be refused.
	ValidateTopicConfig(config map[string]string) error
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
