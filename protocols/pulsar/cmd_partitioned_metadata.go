package pulsar

// PARTITIONED_METADATA -> PARTITIONED_METADATA_RESPONSE.
//
// The partition count of a partitioned topic, 0 for a non-partitioned one,
// for a partition's own name, and for a topic that does not exist yet (a
// producer or consumer then creates it non-partitioned, as Pulsar's default
// auto-creation does). The transaction coordinator's topic does not exist,
// which tells clients that transactions are not enabled.

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handlePartitionedMetadata(cmd *pb.CommandPartitionedTopicMetadata) {
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	reply := &pb.CommandPartitionedTopicMetadataResponse{RequestId: proto.Uint64(cmd.GetRequestId())}
	n, err := c.partitions(ctx, cmd.GetTopic())
	if err != nil {
		code, msg := serverError(err)
		reply.Response = pb.CommandPartitionedTopicMetadataResponse_Failed.Enum()
		reply.Error = code.Enum()
		reply.Message = proto.String(msg)
	} else {
		reply.Response = pb.CommandPartitionedTopicMetadataResponse_Success.Enum()
		reply.Partitions = proto.Uint32(uint32(n))
	}
	c.queue(NewCommand(reply))
}

// partitions is a topic's partition count, 0 when not partitioned or
// missing.
func (c *conn) partitions(ctx context.Context, topic string) (int, error) {
	name, err := protocols.ParseTopicName(topic, "public/default")
	if err != nil {
		return 0, err
	}
	t, err := c.s.b.Topic(ctx, name)
	if errors.Is(err, protocols.ErrTopicNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return t.Partitions, nil
}
