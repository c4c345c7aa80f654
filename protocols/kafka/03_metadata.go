package kafka

// Metadata, versions 0-12. v13 (top-level error code) is not advertised.
//
// Brokers are the region's nodes (the node ids are stable hashes of node
// names), with their racks; the controller is the local node. Every
// partition is led by the node that owns it, with itself as the only
// replica and in-sync replica; leader epochs are -1, so clients skip
// OffsetForLeaderEpoch truncation checks (tern does not serve it). Topic
// ids are all zero. Unknown topics are created when the node auto-creates
// topics and the request allows it (always below v4).

import (
	"net"
	"strconv"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.Metadata, 0, 12, handleMetadata) }

func handleMetadata(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	s := c.s
	ctx := c.ctx
	resp.Brokers = s.brokers()
	id := s.b.ClusterID()
	resp.ClusterID = &id
	resp.ControllerID = s.b.LocalNode().ID
	resp.AuthorizedOperations = -2147483648

	var topics []protocols.TopicInfo
	var errs []kmsg.MetadataResponseTopic
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		ts, err := s.b.ListTopics(ctx, s.ns)
		if err == nil {
			for _, t := range ts {
				if validKafkaName(t.Name.Local) == nil {
					topics = append(topics, t)
				}
			}
		}
	} else {
		create := req.Version < 4 || req.AllowAutoTopicCreation
		for _, rt := range req.Topics {
			if rt.Topic == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.ErrorCode = kerr.UnknownTopicID.Code
				mt.TopicID = rt.TopicID
				errs = append(errs, mt)
				continue
			}
			t, err := s.lookupTopic(ctx, *rt.Topic, create)
			if err != nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = kmsg.StringPtr(*rt.Topic)
				mt.ErrorCode = errCode(err)
				mt.AuthorizedOperations = -2147483648
				errs = append(errs, mt)
				continue
			}
			topics = append(topics, t)
		}
	}
	for _, t := range topics {
		resp.Topics = append(resp.Topics, s.metadataTopic(c, t))
	}
	resp.Topics = append(resp.Topics, errs...)
	r.resp = resp
	return nil
}

func (s *Server) metadataTopic(c *conn, t protocols.TopicInfo) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name.Local)
	mt.AuthorizedOperations = -2147483648
	n := kafkaPartitions(t)
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, n)
	for i := 0; i < n; i++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.LeaderEpoch = -1
		part, _ := logPartition(&t, int32(i))
		owner, err := s.b.Owner(c.ctx, part)
		if err != nil {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.Leader = -1
		} else {
			mp.Leader = owner.ID
			mp.Replicas = []int32{owner.ID}
			mp.ISR = []int32{owner.ID}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// brokers lists the region's nodes as Kafka brokers.
func (s *Server) brokers() []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, n := range s.b.RegionNodes() {
		host, port, err := net.SplitHostPort(n.KafkaAddr)
		if err != nil {
			continue
		}
		p, _ := strconv.Atoi(port)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = n.ID
		b.Host = host
		b.Port = int32(p)
		if n.Rack != "" {
			b.Rack = kmsg.StringPtr(n.Rack)
		}
		out = append(out, b)
	}
	return out
}
