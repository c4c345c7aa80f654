package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLargeBatchBuffersAreKept: the buffer a 10 MiB partition fetch copies
// its record batches into goes back to the pool once the response is
// encoded and serves the next fetch (at 8 MiB it never did, and every such
// fetch allocated and cleared a new one). A pool may drop an item, so the
// test passes if any of ten rounds reuses the buffer.
func TestLargeBatchBuffersAreKept(t *testing.T) {
	const size = 10 << 20
	for range 10 {
		b := getBatchBuf(size)
		b = append(b, make([]byte, size)...)
		resp := kmsg.NewPtrFetchResponse()
		resp.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: b}}}}
		putFetchBufs(resp)
		if again := getBatchBuf(size); cap(again) >= size && &again[:1][0] == &b[0] {
			return
		}
	}
	t.Fatalf("a %d-byte batch buffer was never reused", size)
}

// TestFetchRespSizeCoversTheEncoding: the size a fetch response's buffer
// is grown to before encoding holds the whole encoding, at the oldest and
// newest versions, so encoding a large fetch allocates once.
func TestFetchRespSizeCoversTheEncoding(t *testing.T) {
	fr := kmsg.NewPtrFetchResponse()
	for ti, sizes := range [][]int{{0, 100, 1 << 20}, {5 << 20, 17}} {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = fmt.Sprintf("topic-%d-with-a-longer-name", ti)
		for pi, n := range sizes {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = int32(pi)
			p.RecordBatches = make([]byte, n)
			for k := range 3 {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID = int64(k)
				p.AbortedTransactions = append(p.AbortedTransactions, at)
			}
			rt.Partitions = append(rt.Partitions, p)
		}
		fr.Topics = append(fr.Topics, rt)
	}
	for _, v := range []int16{4, 12, fr.MaxVersion()} {
		fr.SetVersion(v)
		if enc := fr.AppendTo(nil); fetchRespSize(fr) < len(enc) {
			t.Errorf("v%d: estimated %d bytes for a %d-byte encoding", v, fetchRespSize(fr), len(enc))
		}
	}
}

// TestSentBatchGoesBackToItsReader: a record batch sent from the buffer it
// was read into goes back to the reader once the response is encoded, and
// never into the batch buffers' pool, whose next user would write into
// the reader's buffer.
func TestSentBatchGoesBackToItsReader(t *testing.T) {
	const size = 1 << 20
	read := make([]byte, size)
	resp := kmsg.NewPtrFetchResponse()
	resp.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: read}}}}
	recycled := 0
	recycleSent([]sentBatch{{p: &resp.Topics[0].Partitions[0], recycle: func() { recycled++ }}})
	putFetchBufs(resp)
	if recycled != 1 {
		t.Fatalf("the read buffer was recycled %d times, want once", recycled)
	}
	for range 10 {
		if b := getBatchBuf(size); cap(b) >= size && &b[:1][0] == &read[0] {
			t.Fatal("a sent batch's read buffer went into the batch buffers' pool")
		}
	}
}
