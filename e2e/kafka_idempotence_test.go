package e2e

import (
	"testing"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// idemBatch builds a RecordBatch v2 of n records for producer pid.
func idemBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	msgs := make([]protocols.Message, n)
	for i := range msgs {
		msgs[i] = protocols.Message{Timestamp: 1000 + int64(i), Value: []byte{byte(seq), byte(i)}}
	}
	b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// produceReq is an acks=all produce of batch to partition 0 of topic.
func produceReq(topic string, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return req
}

func produceRaw(t *testing.T, rc *rawConn, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := rc.roundTrip(produceReq(topic, batch)).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

func initProducerID(t *testing.T, rc *rawConn) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: error %d", resp.ErrorCode)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// TestKafkaIdempotence drives the idempotence rules with hand-made
// batches: a resend gets its original offsets and writes nothing (also
// after a restart), a gap gets OUT_OF_ORDER_SEQUENCE_NUMBER, a new epoch
// must start at 0, an old epoch is fenced, and producer ids are never
// handed out twice, restarts included.
func TestKafkaIdempotence(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic = "idem"
	createTopic(t, addr, topic, 1, nil)
	rc := dialRaw(t, addr)
	pid, epoch := initProducerID(t, rc)

	expect := func(what string, got kmsg.ProduceResponseTopicPartition, code int16, base int64) {
		t.Helper()
		if got.ErrorCode != code || (code == 0 && got.BaseOffset != base) {
			t.Fatalf("%s: error %d base %d, want error %d base %d", what, got.ErrorCode, got.BaseOffset, code, base)
		}
	}
	b0 := idemBatch(t, pid, epoch, 0, 3)
	expect("first batch", produceRaw(t, rc, topic, b0), 0, 0)
	b1 := idemBatch(t, pid, epoch, 3, 2)
	expect("second batch", produceRaw(t, rc, topic, b1), 0, 3)
	expect("resend of the first", produceRaw(t, rc, topic, idemBatch(t, pid, epoch, 0, 3)), 0, 0)
	expect("resend of the second", produceRaw(t, rc, topic, idemBatch(t, pid, epoch, 3, 2)), 0, 3)
	if hw := highWatermarks(t, node, topic, 1)[0]; hw != 5 {
		t.Fatalf("high watermark %d after two batches and two resends, want 5", hw)
	}
	expect("gap", produceRaw(t, rc, topic, idemBatch(t, pid, epoch, 9, 1)), kerr.OutOfOrderSequenceNumber.Code, 0)
	expect("new epoch not at 0", produceRaw(t, rc, topic, idemBatch(t, pid, epoch+1, 5, 1)), kerr.OutOfOrderSequenceNumber.Code, 0)

	node.Restart()
	rc = dialRaw(t, addr)
	expect("resend after restart", produceRaw(t, rc, topic, idemBatch(t, pid, epoch, 3, 2)), 0, 3)
	expect("next batch after restart", produceRaw(t, rc, topic, idemBatch(t, pid, epoch, 5, 1)), 0, 5)
	expect("gap after restart", produceRaw(t, rc, topic, idemBatch(t, pid, epoch, 7, 1)), kerr.OutOfOrderSequenceNumber.Code, 0)
	expect("new epoch", produceRaw(t, rc, topic, idemBatch(t, pid, epoch+1, 0, 1)), 0, 6)
	expect("fenced old epoch", produceRaw(t, rc, topic, idemBatch(t, pid, epoch, 6, 1)), kerr.InvalidProducerEpoch.Code, 0)
	if hw := highWatermarks(t, node, topic, 1)[0]; hw != 7 {
		t.Fatalf("high watermark %d, want 7", hw)
	}
	if pid2, _ := initProducerID(t, rc); pid2 == pid {
		t.Fatalf("producer id %d handed out again after a restart", pid)
	}
	// A producer this partition never saw may start anywhere (KIP-360).
	pid3, _ := initProducerID(t, rc)
	expect("unknown producer mid-sequence", produceRaw(t, rc, topic, idemBatch(t, pid3, 0, 42, 1)), 0, 7)
}
