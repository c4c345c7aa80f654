package proxy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
)

// TestProducerRegistry: assigned names, busy names, epoch takeover,
// exclusive access and the WaitForExclusive queue.
func TestProducerRegistry(t *testing.T) {
	f := newSubFixture(t)
	ctx := context.Background()
	open := func(req protocols.ProducerRequest) (protocols.ProducerLease, error) {
		return f.n.OpenProducer(ctx, f.p, req)
	}
	a, err := open(protocols.ProducerRequest{})
	must(t, err)
	b, err := open(protocols.ProducerRequest{})
	must(t, err)
	if a.Name() == b.Name() || a.LastSequence() != -1 {
		t.Fatalf("names %q %q, last sequence %d", a.Name(), b.Name(), a.LastSequence())
	}
	if _, err := open(protocols.ProducerRequest{Name: a.Name()}); !errors.Is(err, protocols.ErrProducerBusy) {
		t.Fatalf("same name again: %v", err)
	}
	// The same producer reconnecting (higher epoch) takes its name over.
	a2, err := open(protocols.ProducerRequest{Name: a.Name(), Epoch: 1})
	must(t, err)
	select {
	case <-a.Revoked():
	case <-time.After(time.Second):
		t.Fatal("the replaced lease was not revoked")
	}
	if _, err := open(protocols.ProducerRequest{AccessMode: protocols.AccessExclusive}); !errors.Is(err, protocols.ErrProducerFenced) {
		t.Fatalf("exclusive beside shared producers: %v", err)
	}
	w, err := open(protocols.ProducerRequest{AccessMode: protocols.AccessWaitForExclusive})
	must(t, err)
	select {
	case <-w.Ready():
		t.Fatal("WaitForExclusive was ready beside shared producers")
	default:
	}
	a2.Close()
	b.Close()
	select {
	case <-w.Ready():
	case <-time.After(time.Second):
		t.Fatal("WaitForExclusive not ready once alone")
	}
	if _, err := open(protocols.ProducerRequest{}); !errors.Is(err, protocols.ErrProducerBusy) {
		t.Fatalf("shared beside an exclusive holder: %v", err)
	}
	fence, err := open(protocols.ProducerRequest{AccessMode: protocols.AccessExclusiveWithFencing})
	must(t, err)
	select {
	case <-w.Revoked():
	case <-time.After(time.Second):
		t.Fatal("fencing did not revoke the holder")
	}
	fence.Close()
}

const avroV0 = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`

// TestSchemaVersions: identical schemas share a version, BACKWARD
// compatible ones add one, incompatible or different types are refused.
func TestSchemaVersions(t *testing.T) {
	f := newSubFixture(t)
	ctx := context.Background()
	topic := f.p.Topic
	if _, _, err := f.n.Schema(ctx, topic, -1); !errors.Is(err, protocols.ErrSchemaNotFound) {
		t.Fatalf("schema of a new topic: %v", err)
	}
	v, err := f.n.AddSchema(ctx, topic, protocols.SchemaInfo{Type: "AVRO", Data: []byte(avroV0)})
	if err != nil || v != 0 {
		t.Fatalf("first version %d %v", v, err)
	}
	if v, _ := f.n.AddSchema(ctx, topic, protocols.SchemaInfo{Type: "AVRO", Data: []byte(avroV0)}); v != 0 {
		t.Fatalf("identical schema got version %d", v)
	}
	withDefault := `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}]}`
	if v, err := f.n.AddSchema(ctx, topic, protocols.SchemaInfo{Type: "AVRO", Data: []byte(withDefault)}); err != nil || v != 1 {
		t.Fatalf("compatible evolution: %d %v", v, err)
	}
	noDefault := `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"},{"name":"c","type":"long"}]}`
	if _, err := f.n.AddSchema(ctx, topic, protocols.SchemaInfo{Type: "AVRO", Data: []byte(noDefault)}); !errors.Is(err, protocols.ErrIncompatibleSchema) {
		t.Fatalf("a field without default: %v", err)
	}
	if _, err := f.n.AddSchema(ctx, topic, protocols.SchemaInfo{Type: "JSON", Data: []byte(avroV0)}); !errors.Is(err, protocols.ErrIncompatibleSchema) {
		t.Fatalf("a type change: %v", err)
	}
	if err := f.n.CheckSchema(ctx, topic, protocols.SchemaInfo{Type: "AVRO", Data: []byte(noDefault)}); !errors.Is(err, protocols.ErrIncompatibleSchema) {
		t.Fatalf("CheckSchema of an incompatible reader: %v", err)
	}
	info, v, err := f.n.Schema(ctx, topic, 0)
	if err != nil || v != 0 || string(info.Data) != avroV0 || info.Timestamp == 0 {
		t.Fatalf("version 0: %+v %d %v", info, v, err)
	}
	if _, err := f.n.AddSchema(ctx, topic, protocols.SchemaInfo{Type: "AVRO", Data: []byte("{not avro")}); err == nil {
		t.Fatal("an unparsable AVRO schema was accepted")
	}
}
