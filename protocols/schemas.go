package protocols

import (
	"context"
	"errors"
)

// Schemas stores Pulsar-model schemas: each topic (all partitions of a
// partitioned topic together) has a list of schema versions numbered from
// 0. A producer or consumer that brings a schema either finds an identical
// version or adds one that passes the compatibility check against the latest
// version: by default BACKWARD for AVRO and JSON (the new schema can read
// what the latest one wrote), equality of type for the other types.
type Schemas interface {
	// Schema returns a version of the topic's schema, the latest when
	// version < 0. ErrSchemaNotFound if there is none.
	Schema(ctx context.Context, topic TopicName, version int64) (SchemaInfo, int64, error)
	// AddSchema returns the version of an identical schema when the topic
	// has one, and otherwise checks s against the latest version and
	// stores it as the next one. ErrIncompatibleSchema (wrapped, saying
	// why) when the check fails; ErrInvalidSchema when s cannot be parsed.
	AddSchema(ctx context.Context, topic TopicName, s SchemaInfo) (int64, error)
	// CheckSchema reports whether a consumer bringing s can read the topic:
	// nil when the topic has no schema, an identical one, or one s is
	// compatible with.
	CheckSchema(ctx context.Context, topic TopicName, s SchemaInfo) error
	// DeleteSchema removes every version of the topic's schema.
	DeleteSchema(ctx context.Context, topic TopicName) error
}

// SchemaInfo is one schema. Type uses Pulsar's type names (AVRO, JSON,
// PROTOBUF, PROTOBUF_NATIVE, KEY_VALUE, STRING, BYTES, INT32, ...), as the
// admin REST API writes them.
type SchemaInfo struct {
	Type       string
	Name       string
	Data       []byte
	Properties map[string]string
	// Timestamp is when the version was stored (Unix ms); set by the node.
	Timestamp int64
}

// Errors of the schema registry.
var (
	ErrSchemaNotFound     = errors.New("protocols: schema not found")
	ErrIncompatibleSchema = errors.New("protocols: incompatible schema")
	ErrInvalidSchema      = errors.New("protocols: invalid schema")
)
