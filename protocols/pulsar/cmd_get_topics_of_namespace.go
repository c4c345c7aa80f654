package pulsar

// GET_TOPICS_OF_NAMESPACE -> GET_TOPICS_OF_NAMESPACE_RESPONSE.
//
// Lists the namespace's topics as Java brokers do: a non-partitioned topic
// by its name, a partitioned one by the names of its partitions. Every tern
// topic is persistent, so mode NON_PERSISTENT lists nothing. When the client
// sends topics_pattern the list is filtered with it (Go's regex consumer
// filters on its own and sends none).

import (
	"context"
	"regexp"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleTopicsOfNamespace(cmd *pb.CommandGetTopicsOfNamespace) {
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	ns, err := protocols.ParseNamespace(cmd.GetNamespace())
	if err != nil {
		c.replyError(cmd.GetRequestId(), err)
		return
	}
	var names []string
	if cmd.GetMode() != pb.CommandGetTopicsOfNamespace_NON_PERSISTENT {
		topics, err := c.s.b.ListTopics(ctx, ns)
		if err != nil {
			c.replyError(cmd.GetRequestId(), err)
			return
		}
		for _, t := range topics {
			for _, p := range t.Logs() {
				names = append(names, p.Name().String())
			}
		}
	}
	reply := &pb.CommandGetTopicsOfNamespaceResponse{RequestId: proto.Uint64(cmd.GetRequestId())}
	if pat := cmd.GetTopicsPattern(); pat != "" {
		re, err := regexp.Compile(pat)
		if err != nil {
			c.queue(errorCommand(cmd.GetRequestId(), pb.ServerError_NotAllowedError, "topics_pattern does not compile: "+err.Error()))
			return
		}
		kept := names[:0]
		for _, n := range names {
			if re.MatchString(n) {
				kept = append(kept, n)
			}
		}
		names = kept
		reply.Filtered = proto.Bool(true)
	}
	reply.Topics = names
	c.queue(NewCommand(reply))
}
