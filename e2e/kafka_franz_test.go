package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func kgoCodec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// TestKafkaFranzCodecs: an idempotent franz-go producer writes with every
// codec and a cooperative-sticky consumer group reads everything back: no
// loss, no duplicates, order kept per partition.
func TestKafkaFranzCodecs(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	n := recordsPerCase()
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			topic := "franz-" + codec
			createTopic(t, addr, topic, 3, nil)
			prod := kgoClient(t, addr, kgo.ProducerBatchCompression(kgoCodec(codec)), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for i := 0; i < n; i++ {
				prod.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: payload(topic, i)}, func(r *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce %d: %v", i, err)
					}
				})
			}
			if err := prod.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			l := newLedger(topic, n)
			cons := kgoClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g-"+topic),
				kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			for l.count() < n && ctx.Err() == nil {
				fs := cons.PollFetches(ctx)
				fs.EachError(func(tp string, p int32, err error) {
					if ctx.Err() == nil {
						t.Errorf("fetch %s/%d: %v", tp, p, err)
					}
				})
				fs.EachRecord(func(r *kgo.Record) { l.add(r.Partition, r.Offset, r.Value) })
			}
			l.check(t)
			if err := cons.CommitUncommittedOffsets(ctx); err != nil {
				t.Errorf("commit: %v", err)
			}
		})
	}
}
