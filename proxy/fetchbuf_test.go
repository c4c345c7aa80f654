package proxy_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

// TestLargeFetchesReuseTheirBuffers: a consumer fetching 10 MiB per
// partition (max.partition.fetch.bytes of throughput-tuned consumers) reads
// into a buffer the node keeps between fetches. With buffers over 8 MiB
// never kept, every such fetch allocated and cleared a new one: consuming
// through 10 MiB fetches cost the node 3.4-3.9 us/msg against 0.7-0.9 at
// 1 MiB.
func TestLargeFetchesReuseTheirBuffers(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0).Proxy()
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("large-fetch", "public/default")
	if _, err := n.CreateTopic(ctx, name, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: 0}
	msgs := make([]protocols.Message, 100)
	for i := range msgs {
		msgs[i] = protocols.Message{Timestamp: 1000, Value: make([]byte, 1000)}
	}
	batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 120 { // 12 MiB
		if _, err := n.Produce(ctx, p, protocols.ProduceRequest{Batch: batch}); err != nil {
			t.Fatal(err)
		}
	}
	const maxBytes = 10 << 20
	fetch := func() {
		t.Helper()
		f, err := n.Fetch(ctx, p, 0, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, e := range f.Entries {
			size += len(e.Value)
		}
		if size < maxBytes-len(batch)-1024 {
			t.Fatalf("fetched %d bytes, want about %d", size, maxBytes)
		}
		if f.Recycle == nil {
			t.Fatal("a fetch offers no buffer to recycle")
		}
		f.Recycle()
	}
	for range 4 {
		fetch()
	}
	// A pool may drop an item (the race detector drops a quarter of
	// them on purpose), so most fetches, not all, must reuse a buffer.
	const rounds = 16
	reused := 0
	var before, after runtime.MemStats
	for range rounds {
		runtime.ReadMemStats(&before)
		fetch()
		runtime.ReadMemStats(&after)
		if after.TotalAlloc-before.TotalAlloc < 1<<20 {
			reused++
		}
	}
	if reused < rounds*3/8 {
		t.Errorf("%d of %d fetches of %d bytes allocated less than 1 MiB: the read buffer is not reused", reused, rounds, maxBytes)
	}
}
