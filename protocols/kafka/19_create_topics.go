package kafka

// CreateTopics, versions 0-5. Topics are created partitioned (so
// CreatePartitions can grow them) in the Kafka namespace. -1 partitions
// means the node default; the replication factor must be -1 or at most the
// region's node count (each partition has one replica until regions hold
// several nodes); manual replica assignments are refused. Configs are the
// topic configs tern honours (retention.ms, retention.bytes,
// max.message.bytes, cleanup.policy=delete); others get INVALID_CONFIG
// with a message naming them.

import (
	"errors"
	"fmt"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.CreateTopics, 0, 5, handleCreateTopics) }

func handleCreateTopics(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	nodes := len(c.s.b.RegionNodes())
	_, defParts := c.s.b.AutoCreate()
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		err := func() error {
			name, err := c.s.topicName(rt.Topic)
			if err != nil {
				return err
			}
			parts := int(rt.NumPartitions)
			if parts == -1 {
				parts = defParts
			}
			if parts < 1 {
				return fmt.Errorf("%w: %d partitions: want 1 or more, or -1 for the default", protocols.ErrInvalidPartitions, rt.NumPartitions)
			}
			if len(rt.ReplicaAssignment) > 0 {
				return errReplicaAssignment
			}
			if rt.ReplicationFactor != -1 && (rt.ReplicationFactor < 1 || int(rt.ReplicationFactor) > nodes) {
				return fmt.Errorf("%w: replication factor %d: this region has %d node(s); use -1 or 1 to %d", errReplicationFactor, rt.ReplicationFactor, nodes, nodes)
			}
			conf := map[string]string{}
			for _, kv := range rt.Configs {
				if kv.Value != nil {
					conf[kv.Name] = *kv.Value
				}
			}
			if req.ValidateOnly {
				if err := c.s.b.ValidateTopicConfig(conf); err != nil {
					return err
				}
				if _, err := c.s.b.Topic(c.ctx, name); err == nil {
					return fmt.Errorf("%w: %s", protocols.ErrTopicExists, rt.Topic)
				}
				st.NumPartitions, st.ReplicationFactor = int32(parts), 1
				return nil
			}
			t, err := c.s.b.CreateTopic(c.ctx, name, parts, conf)
			if err != nil {
				return err
			}
			st.NumPartitions, st.ReplicationFactor = int32(kafkaPartitions(t)), 1
			if entries, err := c.s.b.TopicConfig(c.ctx, name); err == nil {
				for _, e := range entries {
					st.Configs = append(st.Configs, kmsg.CreateTopicsResponseTopicConfig{
						Name: e.Name, Value: kmsg.StringPtr(e.Value), ReadOnly: e.ReadOnly,
						Source: int8(configSource(e.Source)), IsSensitive: e.Sensitive,
					})
				}
			}
			return nil
		}()
		if err != nil {
			st.ErrorCode = createErrCode(err)
			st.ErrorMessage = errMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.resp = resp
	return nil
}

var (
	errReplicaAssignment = errors.New("kafka: manual replica assignment is not supported; give a partition count")
	errReplicationFactor = errors.New("kafka: invalid replication factor")
)

func createErrCode(err error) int16 {
	switch {
	case errors.Is(err, errReplicaAssignment):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, errReplicationFactor):
		return kerr.InvalidReplicationFactor.Code
	}
	return errCode(err)
}
