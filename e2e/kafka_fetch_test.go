package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func fetchReq(topic string, offset int64, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxWaitMillis = int32(maxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	return req
}

// TestKafkaFetchLongPoll: a fetch at the end of the log waits for data
// (MinBytes) up to MaxWaitMillis and is woken by a produce on another
// connection; a fetch naming a session is told there is none.
func TestKafkaFetchLongPoll(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic = "longpoll"
	createTopic(t, addr, topic, 1, nil)
	rc := dialRaw(t, addr)

	start := time.Now()
	resp := rc.roundTrip(fetchReq(topic, 0, 300*time.Millisecond)).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("an empty fetch returned after %v, before its 300ms MaxWait", waited)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 || resp.SessionID != 0 {
		t.Fatalf("empty fetch: %+v session %d", p, resp.SessionID)
	}

	prod := kgoClient(t, addr, kgo.DefaultProduceTopic(topic))
	ctx := ctxT(t)
	produced := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond) // let the fetch park first
		produced <- prod.ProduceSync(ctx, &kgo.Record{Value: []byte("wake up")}).FirstErr()
	}()
	start = time.Now()
	resp = rc.roundTrip(fetchReq(topic, 0, 20*time.Second)).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the fetch was not woken by the produce: answered after %v", waited)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
		t.Fatalf("woken fetch: %+v", p)
	}

	req := fetchReq(topic, 0, 0)
	req.SessionID, req.SessionEpoch = 42, 3
	if resp := rc.roundTrip(req).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("fetch with a session: error %d, want FETCH_SESSION_ID_NOT_FOUND", resp.ErrorCode)
	}
	if resp := rc.roundTrip(fetchReq(topic, 5, 0)).(*kmsg.FetchResponse); resp.Topics[0].Partitions[0].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past the end: %+v", resp.Topics[0].Partitions[0])
	}
}
