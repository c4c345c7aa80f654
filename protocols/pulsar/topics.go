package pulsar

import (
	"context"
	"errors"
	"fmt"

	"github.com/ternmq/tern/protocols"
)

// resolve turns a topic name from a command into the partition it names:
// a non-partitioned topic, or partition i of a partitioned topic when the
// name ends in -partition-i and the topic without that suffix is
// partitioned. With create set, a missing topic is created non-partitioned
// when AutoCreateTopics is on.
func (c *conn) resolve(ctx context.Context, topic string, create bool) (protocols.Partition, error) {
	name, err := protocols.ParseTopicName(topic, "public/default")
	if err != nil {
		return protocols.Partition{}, err
	}
	if base, i := name.PartitionIndex(); i >= 0 {
		if t, err := c.s.b.Topic(ctx, base); err == nil && t.Partitions > 0 {
			if i >= t.Partitions {
				return protocols.Partition{}, fmt.Errorf("%w: %s has %d partitions, so %s does not exist", protocols.ErrTopicNotFound, base, t.Partitions, name)
			}
			return protocols.Partition{Topic: base, Index: i}, nil
		}
	}
	t, err := c.s.b.Topic(ctx, name)
	if errors.Is(err, protocols.ErrTopicNotFound) && create && c.s.cfg.AutoCreateTopics {
		t, err = c.s.b.CreateTopic(ctx, name, 0, nil)
		if errors.Is(err, protocols.ErrTopicExists) {
			t, err = c.s.b.Topic(ctx, name)
		}
	}
	if err != nil {
		return protocols.Partition{}, err
	}
	if t.Partitions > 0 {
		return protocols.Partition{}, fmt.Errorf("%w: %s is a partitioned topic with %d partitions; name one of them (%s)",
			protocols.ErrTopicNotFound, name, t.Partitions, name.Partition(0))
	}
	return protocols.Partition{Topic: name, Index: -1}, nil
}
