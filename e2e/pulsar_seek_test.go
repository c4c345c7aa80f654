package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestPulsarSeekByID: after consuming everything, seeking to a message id
// delivers what follows it again, as with Pulsar.
func TestPulsarSeekByID(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprint("batching=", batching), func(t *testing.T) {
			topic := newTopic(t, "seekid")
			cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching})
			ids := sendAsyncAll(t, p, 20, func(i int) *pulsar.ProducerMessage { return &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))} })
			receiveN(t, cons, 20, true)
			if err := cons.Seek(ids[7]); err != nil {
				t.Fatal(err)
			}
			m := receive(t, cons, 10*time.Second)
			// The broker redelivers from the start of the entry holding
			// #7; the Go client drops what precedes the seek id and, as it
			// compares exclusively, #7 itself.
			first := 8
			if string(m.Payload()) != fmt.Sprint(first) {
				t.Fatalf("first message after seeking to #7: %q", m.Payload())
			}
			rest := receiveN(t, cons, 19-first, true)
			for i, r := range rest {
				if string(r.Payload()) != fmt.Sprint(first+1+i) {
					t.Fatalf("after seek: %v", payloads(rest))
				}
			}
			expectNone(t, cons, 300*time.Millisecond)
		})
	}
}

// TestPulsarSeekByTime: seeking to a publish time delivers the messages
// published at or after it.
func TestPulsarSeekByTime(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "seektime")
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := 0; i < 5; i++ {
		send(t, p, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint("old-", i))})
	}
	time.Sleep(30 * time.Millisecond) // publish times are milliseconds: leave a gap
	mark := time.Now()
	time.Sleep(30 * time.Millisecond)
	for i := 0; i < 5; i++ {
		send(t, p, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint("new-", i))})
	}
	receiveN(t, cons, 10, true)
	if err := cons.SeekByTime(mark); err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, cons, 5, true)
	for i, m := range got {
		if string(m.Payload()) != fmt.Sprint("new-", i) {
			t.Fatalf("after seek by time: %v", payloads(got))
		}
	}
	expectNone(t, cons, 300*time.Millisecond)
}

func mustReader(t testing.TB, cl pulsar.Client, opts pulsar.ReaderOptions) pulsar.Reader {
	t.Helper()
	r, err := cl.CreateReader(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func readN(t testing.TB, r pulsar.Reader, n int) []pulsar.Message {
	t.Helper()
	var out []pulsar.Message
	for len(out) < n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := r.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("reader after %d messages: %v", len(out), err)
		}
		out = append(out, m)
	}
	return out
}

// TestPulsarReaders: readers from the earliest message, the latest, and a
// message id (exclusive and inclusive), with HasNext.
func TestPulsarReaders(t *testing.T) {
	c := testcluster.Start(t)
	cl := newClient(t, c.Node(0))
	topic := newTopic(t, "readers")
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 4})
	ids := sendAsyncAll(t, p, 10, func(i int) *pulsar.ProducerMessage { return &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))} })

	earliest := mustReader(t, cl, pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	for i, m := range readN(t, earliest, 10) {
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("earliest reader: message %d is %q", i, m.Payload())
		}
	}
	if earliest.HasNext() {
		t.Fatal("HasNext after the last message")
	}

	fromID := mustReader(t, cl, pulsar.ReaderOptions{Topic: topic, StartMessageID: ids[4]})
	if got := readN(t, fromID, 5); string(got[0].Payload()) != "5" || string(got[4].Payload()) != "9" {
		t.Fatalf("reader after #4: %v", payloads(got))
	}
	inclusive := mustReader(t, cl, pulsar.ReaderOptions{Topic: topic, StartMessageID: ids[4], StartMessageIDInclusive: true})
	if got := readN(t, inclusive, 6); string(got[0].Payload()) != "4" || string(got[5].Payload()) != "9" {
		t.Fatalf("inclusive reader from #4: %v", payloads(got))
	}

	latest := mustReader(t, cl, pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.LatestMessageID()})
	if latest.HasNext() {
		t.Fatal("a reader at the latest position has a next message")
	}
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("10")})
	if got := readN(t, latest, 1); string(got[0].Payload()) != "10" {
		t.Fatalf("latest reader: %q", got[0].Payload())
	}
	testcluster.WaitFor(t, 5*time.Second, "HasNext on the earliest reader", earliest.HasNext)
}
