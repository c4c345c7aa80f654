package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestPulsarProducerNamesAndAccessModes: the broker names producers, a
// second producer with a name in use is refused, an exclusive producer
// keeps others out, and a WaitForExclusive producer gets the topic once it
// is free.
func TestPulsarProducerNamesAndAccessModes(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "access")

	a := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic})
	b := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic})
	if a.Name() == "" || a.Name() == b.Name() {
		t.Fatalf("broker-assigned names %q and %q", a.Name(), b.Name())
	}
	if _, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: a.Name()}); err == nil || !strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("a second producer named %q: %v", a.Name(), err)
	}
	if _, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive}); err == nil {
		t.Fatal("an exclusive producer joined a topic with shared producers")
	}
	a.Close()
	b.Close()

	excl := newTopic(t, "exclusive")
	holder, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: excl, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: excl}); err == nil {
		t.Fatal("a shared producer joined a topic held exclusively")
	}
	waiting := make(chan pulsar.Producer, 1)
	go func() {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: excl, ProducerAccessMode: pulsar.ProducerAccessModeWaitForExclusive})
		if err != nil {
			t.Error(err)
			close(waiting)
			return
		}
		waiting <- p
	}()
	select {
	case <-waiting:
		t.Fatal("the waiting producer got the topic while it was held")
	case <-time.After(300 * time.Millisecond):
	}
	holder.Close()
	var next pulsar.Producer
	select {
	case next = <-waiting:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting producer did not get the topic after the holder left")
	}
	if next == nil {
		t.FailNow()
	}
	defer next.Close()
	send(t, next, &pulsar.ProducerMessage{Payload: []byte("mine now")})
}

// TestPulsarDelayedDelivery: on a Shared subscription a message sent with
// DeliverAfter arrives after the delay, behind messages sent later.
func TestPulsarDelayedDelivery(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "delayed")
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic})
	sent := time.Now()
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("later"), DeliverAfter: 700 * time.Millisecond})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("now")})
	if m := receive(t, cons, 10*time.Second); string(m.Payload()) != "now" {
		t.Fatalf("first message %q", m.Payload())
	}
	m := receive(t, cons, 10*time.Second)
	if string(m.Payload()) != "later" || time.Since(sent) < 650*time.Millisecond {
		t.Fatalf("delayed message %q after %v", m.Payload(), time.Since(sent))
	}
	_ = cons.Ack(m)
}

type user struct {
	Name string `avro:"name"`
	Age  int    `avro:"age"`
}

type userV2 struct {
	Name  string `avro:"name"`
	Age   int    `avro:"age"`
	Email string `avro:"email"`
}

const userSchema = `{"type":"record","name":"User","namespace":"test","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}`

// TestPulsarSchemas: an AVRO producer registers its schema; a compatible
// evolution (a field with a default) becomes version 1; an incompatible one
// (a new field without a default, which BACKWARD forbids) is refused; a
// consumer decodes with the stored schema.
func TestPulsarSchemas(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	cl := newClient(t, n)
	topic := newTopic(t, "schema")
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewAvroSchema(userSchema, nil)})
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Schema: pulsar.NewAvroSchema(userSchema, nil),
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Value: user{Name: "ada", Age: 36}}); err != nil {
		t.Fatal(err)
	}
	m := receive(t, cons, 10*time.Second)
	var got user
	if err := m.GetSchemaValue(&got); err != nil || got.Name != "ada" || got.Age != 36 {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if v := m.SchemaVersion(); len(v) != 8 || v[7] != 0 {
		t.Fatalf("schema version %v, want 0 as 8 bytes", v)
	}

	evolved := `{"type":"record","name":"User","namespace":"test","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"},{"name":"email","type":"string","default":""}]}`
	p2 := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewAvroSchema(evolved, nil)})
	if _, err := p2.Send(context.Background(), &pulsar.ProducerMessage{Value: userV2{Name: "bob", Age: 7, Email: "b@x"}}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, cons, 10*time.Second); len(m.SchemaVersion()) != 8 || m.SchemaVersion()[7] != 1 {
		t.Fatalf("evolved schema version %v, want 1", m.SchemaVersion())
	}

	broken := `{"type":"record","name":"User","namespace":"test","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"},{"name":"email","type":"string"},{"name":"phone","type":"string"}]}`
	if _, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewAvroSchema(broken, nil)}); err == nil ||
		!strings.Contains(err.Error(), "IncompatibleSchema") {
		t.Fatalf("an incompatible schema: %v", err)
	}
	if _, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewStringSchema(nil)}); err == nil {
		t.Fatal("a STRING schema replaced an AVRO one")
	}
}
