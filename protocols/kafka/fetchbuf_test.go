package kafka

import (
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
