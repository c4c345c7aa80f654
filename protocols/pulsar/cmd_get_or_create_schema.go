package pulsar

// GET_OR_CREATE_SCHEMA -> GET_OR_CREATE_SCHEMA_RESPONSE.
//
// Returns the version of an identical schema, or adds the schema as the
// next version after the compatibility check (BACKWARD for AVRO and JSON).
// A refusal answers error_code IncompatibleSchema with the reason.

import (
	"context"
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleGetOrCreateSchema(cmd *pb.CommandGetOrCreateSchema) {
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	reply := &pb.CommandGetOrCreateSchemaResponse{RequestId: proto.Uint64(cmd.GetRequestId())}
	name, err := protocols.ParseTopicName(cmd.GetTopic(), "public/default")
	var v int64
	if err == nil {
		base, _ := name.PartitionIndex()
		v, err = c.s.b.AddSchema(ctx, base, schemaInfo(cmd.GetSchema()))
	}
	if err != nil {
		code, msg := serverError(err)
		reply.ErrorCode = code.Enum()
		reply.ErrorMessage = proto.String(msg)
		c.queue(NewCommand(reply))
		return
	}
	reply.SchemaVersion = binary.BigEndian.AppendUint64(nil, uint64(v))
	c.queue(NewCommand(reply))
}
