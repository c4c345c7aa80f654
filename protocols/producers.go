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
