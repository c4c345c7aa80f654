package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ternmq/tern/protocols"
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

// TestResponsePartitionsAreKept: the partitions of an answer of many go
// back to the pool once it is encoded, whole even when a fetch session
// cut the answer to a few, and serve the next; a few partitions are
// allocated as before. A pool may drop an item, so the test passes if any
// of ten rounds reuses them.
func TestResponsePartitionsAreKept(t *testing.T) {
	reused := false
	for range 10 {
		ps := getRespParts(1000)
		ps[999].ErrorCode = 3
		resp := kmsg.NewPtrFetchResponse()
		resp.Topics = []kmsg.FetchResponseTopic{{Partitions: ps[:2]}}
		putFetchBufs(resp)
		again := getRespParts(800)
		if len(again) != 800 {
			t.Fatalf("asked for 800 partitions, got %d", len(again))
		}
		if &again[0] == &ps[0] {
			if again[:cap(again)][999].ErrorCode != 0 {
				t.Fatal("a kept partition was not cleared")
			}
			reused = true
			break
		}
	}
	if !reused {
		t.Fatal("the partitions of a 1000-partition answer were never reused")
	}
	if small := getRespParts(3); len(small) != 3 {
		t.Fatalf("asked for 3 partitions, got %d", len(small))
	}
}

// TestPartitionReadsGoBackWhenNotSent: a partition read ahead is handed
// to the fetch when it read no more than the fetch now gives it; one that
// read more, and those the fetch never reached, hand their buffers back,
// once each; one taken is the fetch's to hand back.
func TestPartitionReadsGoBackWhenNotSent(t *testing.T) {
	recycled := make([]int, 3)
	pr := &partitionReads{at: map[[2]int]int{}, reads: make([]partitionRead, 3), taken: make([]bool, 3)}
	for i := range pr.reads {
		pr.at[[2]int{0, i}] = i
		r := &pr.reads[i]
		r.maxBytes, r.done = 1000, make(chan struct{})
		r.res = protocols.FetchResult{Recycle: func() { recycled[i]++ }}
		close(r.done)
	}
	if res, ok, err := pr.take(0, 0, 1000); err != nil || res.Recycle == nil || !ok {
		t.Fatalf("a read within the budget was not handed over: %v", err)
	}
	if _, ok, _ := pr.take(0, 1, 999); ok {
		t.Fatal("a read of more than the fetch now gives was handed over")
	}
	if _, ok, _ := pr.take(0, 5, 1000); ok {
		t.Fatal("a partition never read ahead was handed over")
	}
	pr.drop()
	if recycled[0] != 0 || recycled[1] != 1 || recycled[2] != 1 {
		t.Fatalf("recycled %v: want the taken read kept, the others handed back once", recycled)
	}
	var none *partitionReads
	none.drop()
	if _, ok, _ := none.take(0, 0, 1000); ok {
		t.Fatal("no reads ahead, but one was handed over")
	}
}
