package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"

	"github.com/ternmq/tern/protocols"
)

// Schemas (protocols.Schemas) are metadata records, one per version:
//
//	schema/<topic>/<version, 20 digits>   storedSchema (JSON)
//
// <topic> is the full name of the topic (the partitioned topic, never one of
// its partitions), so every partition shares one schema history. Versions
// count from 0 and sort in numeric order because they are zero-padded.
//
// Compatibility is checked against the latest version only, with Pulsar's
// default strategy, BACKWARD: AVRO and JSON schemas (the Pulsar clients
// describe both in Avro's schema language) are parsed and the new schema
// must be able to read data written with the latest one; any other type must
// keep the type. Avro resolution rules come from github.com/hamba/avro.

type storedSchema struct {
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Data       []byte            `json:"data"`
	Properties map[string]string `json:"properties,omitempty"`
	Timestamp  int64             `json:"timestamp"`
}

func schemaPrefix(topic protocols.TopicName) string {
	base, _ := topic.PartitionIndex()
	return "schema/" + base.String() + "/"
}

func schemaKey(topic protocols.TopicName, v int64) string {
	return fmt.Sprintf("%s%020d", schemaPrefix(topic), v)
}

// schemaVersions lists a topic's schema versions in order.
func (n *Node) schemaVersions(ctx context.Context, topic protocols.TopicName) ([]storedSchema, error) {
	var out []storedSchema
	prefix := schemaPrefix(topic)
	err := n.store.ScanMeta(ctx, prefix, func(name string, v []byte) error {
		if _, err := strconv.ParseInt(strings.TrimPrefix(name, prefix), 10, 64); err != nil {
			return nil
		}
		var s storedSchema
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("%w: schema record %s: %v", protocols.ErrStorage, name, err)
		}
		out = append(out, s)
		return nil
	})
	return out, mapStoreErr(err)
}

func (s storedSchema) info() protocols.SchemaInfo {
	return protocols.SchemaInfo{Type: s.Type, Name: s.Name, Data: s.Data, Properties: s.Properties, Timestamp: s.Timestamp}
}

// Schema implements protocols.Schemas.
func (n *Node) Schema(ctx context.Context, topic protocols.TopicName, version int64) (protocols.SchemaInfo, int64, error) {
	vs, err := n.schemaVersions(ctx, topic)
	if err != nil {
		return protocols.SchemaInfo{}, 0, err
	}
	if len(vs) == 0 {
		return protocols.SchemaInfo{}, 0, fmt.Errorf("%w: topic %s has no schema", protocols.ErrSchemaNotFound, topic)
	}
	if version < 0 {
		version = int64(len(vs) - 1)
	}
	if version >= int64(len(vs)) {
		return protocols.SchemaInfo{}, 0, fmt.Errorf("%w: topic %s has schema versions 0 to %d, not %d", protocols.ErrSchemaNotFound, topic, len(vs)-1, version)
	}
	return vs[version].info(), version, nil
}

// AddSchema implements protocols.Schemas.
func (n *Node) AddSchema(ctx context.Context, topic protocols.TopicName, s protocols.SchemaInfo) (int64, error) {
	s.Type = strings.ToUpper(s.Type)
	m := n.messaging()
	m.schemaMu.Lock()
	defer m.schemaMu.Unlock()
	vs, err := n.schemaVersions(ctx, topic)
	if err != nil {
		return 0, err
	}
	if v := identicalSchema(vs, s); v >= 0 {
		return v, nil
	}
	if len(vs) > 0 {
		if err := schemaCompatible(s, vs[len(vs)-1].info()); err != nil {
			return 0, err
		}
	} else if err := parseCheck(s); err != nil {
		return 0, err
	}
	rec := storedSchema{Type: s.Type, Name: s.Name, Data: s.Data, Properties: s.Properties, Timestamp: n.now().UnixMilli()}
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	v := int64(len(vs))
	if err := n.store.PutMeta(schemaKey(topic, v), b); err != nil {
		return 0, mapStoreErr(err)
	}
	n.log.Info("schema version added", "topic", topic.String(), "version", v, "type", s.Type)
	return v, nil
}

// CheckSchema implements protocols.Schemas.
func (n *Node) CheckSchema(ctx context.Context, topic protocols.TopicName, s protocols.SchemaInfo) error {
	s.Type = strings.ToUpper(s.Type)
	vs, err := n.schemaVersions(ctx, topic)
	if err != nil || len(vs) == 0 {
		return err
	}
	if identicalSchema(vs, s) >= 0 {
		return nil
	}
	return schemaCompatible(s, vs[len(vs)-1].info())
}

// DeleteSchema implements protocols.Schemas.
func (n *Node) DeleteSchema(ctx context.Context, topic protocols.TopicName) error {
	m := n.messaging()
	m.schemaMu.Lock()
	defer m.schemaMu.Unlock()
	vs, err := n.schemaVersions(ctx, topic)
	if err != nil {
		return err
	}
	for v := range vs {
		if err := n.store.DeleteMeta(schemaKey(topic, int64(v))); err != nil {
			return mapStoreErr(err)
		}
	}
	return nil
}

func identicalSchema(vs []storedSchema, s protocols.SchemaInfo) int64 {
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Type == s.Type && bytes.Equal(vs[i].Data, s.Data) {
			return int64(i)
		}
	}
	return -1
}

// avroTyped reports whether a schema type is described in Avro's language.
func avroTyped(t string) bool { return t == "AVRO" || t == "JSON" }

// parseCheck validates a first schema version.
func parseCheck(s protocols.SchemaInfo) error {
	if s.Type == "AVRO" {
		if _, err := avro.ParseBytes(s.Data); err != nil {
			return fmt.Errorf("%w: the AVRO schema does not parse: %v", protocols.ErrInvalidSchema, err)
		}
	}
	return nil
}

// schemaCompatible applies BACKWARD compatibility: next must read what
// latest wrote.
func schemaCompatible(next, latest protocols.SchemaInfo) error {
	if next.Type != latest.Type {
		return fmt.Errorf("%w: the topic's schema is %s; a %s schema cannot replace it", protocols.ErrIncompatibleSchema, latest.Type, next.Type)
	}
	if !avroTyped(next.Type) {
		return nil
	}
	reader, rerr := avro.ParseBytes(next.Data)
	writer, werr := avro.ParseBytes(latest.Data)
	switch {
	case rerr != nil && next.Type == "AVRO":
		return fmt.Errorf("%w: the AVRO schema does not parse: %v", protocols.ErrInvalidSchema, rerr)
	case rerr != nil || werr != nil:
		// A JSON schema outside Avro's language: only identical ones match.
		return fmt.Errorf("%w: JSON schemas that are not Avro definitions must be identical to be compatible", protocols.ErrIncompatibleSchema)
	}
	if err := avro.NewSchemaCompatibility().Compatible(reader, writer); err != nil {
		return fmt.Errorf("%w: BACKWARD check failed: the new %s schema cannot read data written with the latest version: %v",
			protocols.ErrIncompatibleSchema, next.Type, err)
	}
	return nil
}
