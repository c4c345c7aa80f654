package kafka

import (
	"context"
	"fmt"

	"github.com/ternmq/tern/protocols"
)

// validKafkaName reports whether s is a legal Kafka topic name: 1 to 249 of
// letters, digits, '.', '_' and '-'.
func validKafkaName(s string) error {
	if s == "" || len(s) > 249 || s == "." || s == ".." {
		return fmt.Errorf("%w: %q: a Kafka topic name is 1 to 249 characters and not \".\" or \"..\"", protocols.ErrInvalidTopicName, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has %q; Kafka topic names use letters, digits, '.', '_' and '-'", protocols.ErrInvalidTopicName, s, c)
		}
	}
	return nil
}

// topicName places a Kafka topic name in the Kafka namespace.
func (s *Server) topicName(name string) (protocols.TopicName, error) {
	if err := validKafkaName(name); err != nil {
		return protocols.TopicName{}, err
	}
	t := protocols.TopicName{Tenant: s.ns.Tenant, Namespace: s.ns.Namespace, Local: name}
	return t, t.Validate()
}

// kafkaPartitions is how many partitions Kafka clients see: a
// non-partitioned topic is one partition.
func kafkaPartitions(t protocols.TopicInfo) int {
	if t.Partitions == 0 {
		return 1
	}
	return t.Partitions
}

// logPartition maps a Kafka partition index to the log the broker knows.
func logPartition(t *protocols.TopicInfo, idx int32) (protocols.Partition, error) {
	if idx < 0 || int(idx) >= kafkaPartitions(*t) {
		return protocols.Partition{}, fmt.Errorf("%w: %s has %d partitions, not partition %d", protocols.ErrPartitionNotFound, t.Name.Local, kafkaPartitions(*t), idx)
	}
	if t.Partitions == 0 {
		return protocols.Partition{Topic: t.Name, Index: -1}, nil
	}
	return protocols.Partition{Topic: t.Name, Index: int(idx)}, nil
}

// lookupTopic resolves a Kafka topic, creating it when create is set and
// the node auto-creates topics.
func (s *Server) lookupTopic(ctx context.Context, name string, create bool) (protocols.TopicInfo, error) {
	tn, err := s.topicName(name)
	if err != nil {
		return protocols.TopicInfo{}, err
	}
	t, err := s.b.Topic(ctx, tn)
	if err == nil || !create {
		return t, err
	}
	on, parts := s.b.AutoCreate()
	if !on {
		return t, err
	}
	t, err = s.b.CreateTopic(ctx, tn, parts, nil)
	if err != nil {
		// Another connection may have created it meanwhile.
		if t2, err2 := s.b.Topic(ctx, tn); err2 == nil {
			return t2, nil
		}
	}
	return t, err
}

// topicCache resolves each topic once per request.
type topicCache struct {
	s      *Server
	create bool
	m      map[string]*topicLookup
	// last is the topic looked up last: a request's partitions come
	// topic by topic.
	last *topicLookup
}

type topicLookup struct {
	name string
	t    protocols.TopicInfo
	err  error
}

func (s *Server) newTopicCache(create bool) *topicCache {
	return &topicCache{s: s, create: create}
}

// lookup resolves a topic once per request.
func (tc *topicCache) lookup(ctx context.Context, name string) *topicLookup {
	if tc.last != nil && tc.last.name == name {
		return tc.last
	}
	l, ok := tc.m[name]
	if !ok {
		t, err := tc.s.lookupTopic(ctx, name, tc.create)
		if tc.m == nil {
			tc.m = map[string]*topicLookup{}
		}
		l = &topicLookup{name, t, err}
		tc.m[name] = l
	}
	tc.last = l
	return l
}

// partition resolves a Kafka (topic, partition) to a log.
func (tc *topicCache) partition(ctx context.Context, topic string, idx int32) (protocols.Partition, error) {
	l := tc.lookup(ctx, topic)
	if l.err != nil {
		return protocols.Partition{}, l.err
	}
	return logPartition(&l.t, idx)
}
