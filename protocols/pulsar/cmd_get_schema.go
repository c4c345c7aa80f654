package pulsar

// GET_SCHEMA -> GET_SCHEMA_RESPONSE.
//
// schema_version is an 8-byte big-endian number; absent means the latest.
// A topic without a schema (or without that version) answers error_code
// TopicNotFound and no schema, which the Go client reports as "schema not
// found".

import (
	"context"
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

func (c *conn) handleGetSchema(cmd *pb.CommandGetSchema) {
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	reply := &pb.CommandGetSchemaResponse{RequestId: proto.Uint64(cmd.GetRequestId())}
	name, err := protocols.ParseTopicName(cmd.GetTopic(), "public/default")
	version := int64(-1)
	if v := cmd.GetSchemaVersion(); len(v) == 8 {
		version = int64(binary.BigEndian.Uint64(v))
	} else if len(v) != 0 {
		err = protocols.ErrSchemaNotFound
	}
	var info protocols.SchemaInfo
	if err == nil {
		info, version, err = c.s.b.Schema(ctx, name, version)
	}
	if err != nil {
		code, msg := serverError(err)
		if code == pb.ServerError_UnknownError {
			code = pb.ServerError_TopicNotFound
		}
		reply.ErrorCode = code.Enum()
		reply.ErrorMessage = proto.String(msg)
		c.queue(NewCommand(reply))
		return
	}
	reply.Schema = pbSchema(info)
	reply.SchemaVersion = binary.BigEndian.AppendUint64(nil, uint64(version))
	c.queue(NewCommand(reply))
}
