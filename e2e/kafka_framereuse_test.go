package e2e

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ternmq/tern/protocols"
)

// TestKafkaProduceFramesOfVaryingSize: a connection reuses its Produce
// frame buffers, sized with room for larger frames, and keeps its spare
// across other requests and across frames too large to keep. Produce
// requests of 10 KiB to 20 MiB, with Metadata requests between them, must
// all be stored byte for byte: a frame read into a buffer still in use
// would corrupt the one before it.
func TestKafkaProduceFramesOfVaryingSize(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic, parts = "frames", 8
	createTopic(t, addr, topic, parts, nil)
	rc := dialRaw(t, addr)
	rng := rand.New(rand.NewPCG(1, 2))
	sent := map[int32][][]byte{}
	// produce sends one request with a batch of batchBytes (in values of
	// 64 KiB or less) to each of the first n partitions.
	produce := func(n int32, batchBytes int) {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(7)
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for p := range n {
			var msgs []protocols.Message
			for left := batchBytes; left > 0; left -= 64 << 10 {
				v := make([]byte, min(left, 64<<10))
				for i := range v {
					v[i] = byte(rng.Uint32())
				}
				msgs = append(msgs, protocols.Message{Timestamp: 1000, Value: v})
				sent[p] = append(sent[p], v)
			}
			b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
			if err != nil {
				t.Fatal(err)
			}
			rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: b})
		}
		req.Topics = []kmsg.ProduceRequestTopic{rt}
		resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("produce of %d x %d bytes: partition %d error %d", n, batchBytes, p.Partition, p.ErrorCode)
			}
		}
	}
	metadata := func() {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(9)
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
		if resp := rc.roundTrip(req).(*kmsg.MetadataResponse); len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != parts {
			t.Fatalf("metadata: %+v", resp.Topics)
		}
	}
	produce(1, 10<<10)
	produce(4, 3<<20) // 12 MiB: a new buffer with room for 16
	metadata()        // not a Produce frame: a buffer of its own
	produce(2, 2<<20) // in the spare
	produce(8, 5<<19) // 20 MiB: over what a connection keeps
	produce(1, 10<<10)
	produce(5, 3<<20) // 15 MiB: the spare again
	metadata()
	produce(3, 1<<20)

	cl := kgoClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(8<<20))
	want := 0
	for _, vs := range sent {
		want += len(vs)
	}
	got := map[int32]int{}
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; n < want; {
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d records in 30 s", n, want)
		}
		fs := cl.PollFetches(ctxT(t))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			i := got[r.Partition]
			if i >= len(sent[r.Partition]) || !bytes.Equal(r.Value, sent[r.Partition][i]) {
				t.Fatalf("partition %d record %d (offset %d) differs from the one sent", r.Partition, i, r.Offset)
			}
			got[r.Partition]++
			n++
		})
	}
}
