package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

func segmentioCodec(name string) kafka.Compression {
	switch name {
	case "gzip":
		return kafka.Gzip
	case "snappy":
		return kafka.Snappy
	case "lz4":
		return kafka.Lz4
	case "zstd":
		return kafka.Zstd
	}
	return 0
}

// TestKafkaSegmentioCodecs: a kafka-go Writer writes with every codec and
// a kafka-go Reader in a group reads everything back, committing as it
// goes.
func TestKafkaSegmentioCodecs(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	n := recordsPerCase()
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			topic := "segmentio-" + codec
			createTopic(t, addr, topic, 3, nil)
			w := &kafka.Writer{
				Addr:         kafka.TCP(addr),
				Topic:        topic,
				Balancer:     &kafka.Hash{},
				RequiredAcks: kafka.RequireAll,
				Compression:  segmentioCodec(codec),
				BatchTimeout: 5 * time.Millisecond,
				BatchSize:    100,
				// A transport per writer: the shared default one caches
				// metadata from before this subtest created its topic.
				Transport: &kafka.Transport{},
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for i := 0; i < n; i += 100 {
				var msgs []kafka.Message
				for j := i; j < min(i+100, n); j++ {
					msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", j%7), Value: payload(topic, j)})
				}
				if err := w.WriteMessages(ctx, msgs...); err != nil {
					t.Fatalf("write: %v", err)
				}
			}
			r := kafka.NewReader(kafka.ReaderConfig{
				Brokers:     []string{addr},
				GroupID:     "g-" + topic,
				Topic:       topic,
				MinBytes:    1,
				MaxBytes:    10 << 20,
				MaxWait:     200 * time.Millisecond,
				StartOffset: kafka.FirstOffset,
			})
			defer r.Close()
			l := newLedger(topic, n)
			for l.count() < n {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatalf("read after %d records: %v", l.count(), err)
				}
				l.add(int32(m.Partition), m.Offset, m.Value)
			}
			l.check(t)
			if codec == "snappy" {
				checkXerialStored(t, node, topic)
			}
		})
	}
}

// checkXerialStored checks that kafka-go's snappy batches, which use the
// xerial framing Java clients use too, were accepted and stored as
// received: framed, not re-encoded.
func checkXerialStored(t *testing.T, node *testcluster.Node, topic string) {
	t.Helper()
	name, _ := protocols.ParseTopicName(topic, "public/default")
	res, err := node.Proxy().Fetch(context.Background(), protocols.Partition{Topic: name, Index: 0}, 0, 1)
	if err != nil || len(res.Entries) == 0 {
		t.Fatalf("reading the stored entry: %v", err)
	}
	e, err := protocols.DecodeEntry(res.Entries[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	xerial := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
	if e.Header.Codec() != protocols.CodecSnappy || !bytes.HasPrefix(e.Batch[protocols.BatchHeaderSize:], xerial) {
		t.Fatalf("stored batch codec %v, payload %x...: want the xerial-framed snappy batch as sent", e.Header.Codec(), e.Batch[protocols.BatchHeaderSize:][:8])
	}
}
