package pulsar

// LOOKUP -> LOOKUP_RESPONSE.
//
// Any node answers authoritatively with Connect and the owner's address, so
// a client never follows redirects. A topic that does not exist yet resolves
// to the answering node, which creates it when the producer or consumer
// attaches. When regions grow past one node the answer can become
// proxy_through_service_url=true with the owner as the logical broker, so
// clients keep one connection per node they already reach.

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleLookup(cmd *pb.CommandLookupTopic) {
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	reply := &pb.CommandLookupTopicResponse{RequestId: proto.Uint64(cmd.GetRequestId())}
	owner := c.s.b.LocalNode()
	p, err := c.resolve(ctx, cmd.GetTopic(), false)
	switch {
	case err == nil:
		owner, err = c.s.b.Owner(ctx, p)
	case errors.Is(err, protocols.ErrTopicNotFound) && c.s.cfg.AutoCreateTopics:
		err = nil
	}
	if err != nil {
		code, msg := serverError(err)
		if code == pb.ServerError_ServiceNotReady {
			// The Go client closes the connection on ServiceNotReady in a
			// lookup; a retryable error keeps it.
			code = pb.ServerError_TooManyRequests
		}
		reply.Response = pb.CommandLookupTopicResponse_Failed.Enum()
		reply.Error = code.Enum()
		reply.Message = proto.String(msg)
		c.queue(NewCommand(reply))
		return
	}
	url := "pulsar://" + owner.PulsarAddr
	reply.Response = pb.CommandLookupTopicResponse_Connect.Enum()
	reply.BrokerServiceUrl = proto.String(url)
	reply.Authoritative = proto.Bool(true)
	c.queue(NewCommand(reply))
}
