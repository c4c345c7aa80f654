package e2e

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/testcluster"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchReq is a v12 fetch without a session of partition 0 of topic.
func fetchReq(topic string, offset int64, maxWait time.Duration) *kmsg.FetchRequest {
	return sessionFetch(topic, 0, -1, maxWait, map[int32]int64{0: offset})
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

// produceKiB writes n 1 KiB records, numbered in their first bytes, to
// partition 0 of topic, uncompressed, in batches of at most batchBytes.
func produceKiB(t *testing.T, addr, topic string, n int, batchBytes int32) {
	t.Helper()
	cl := kgoClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(batchBytes),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := make([]byte, 1024)
		binary.BigEndian.PutUint32(v, uint32(i))
		recs[i] = &kgo.Record{Value: v}
	}
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestKafkaFetchIsCapped: a fetch asking 10 MiB of a partition holding 6
// MiB gets at most kafka.fetch_max_bytes (4 MiB by default; the broker's
// fetch.max.bytes), filled close to it, and the next fetch goes on from
// where it stopped. Before the cap the node copied all 6 MiB through its
// heap for one response.
func TestKafkaFetchIsCapped(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic, cap, batch = "capped", 4 << 20, 256 << 10
	createTopic(t, addr, topic, 1, nil)
	produceKiB(t, addr, topic, 6<<10, batch)

	rc := dialRaw(t, addr)
	req := fetchReq(topic, 0, 0)
	req.MaxBytes, req.Topics[0].Partitions[0].PartitionMaxBytes = 10<<20, 10<<20
	p := rc.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 6<<10 {
		t.Fatalf("fetch: error %d, high watermark %d", p.ErrorCode, p.HighWatermark)
	}
	if n := len(p.RecordBatches); n > cap || n < cap-2*batch {
		t.Fatalf("a 10 MiB fetch got %d bytes: want at most the %d-byte cap, and close to it", n, cap)
	}
	next, count := lastOffset(t, p.RecordBatches)
	req.Topics[0].Partitions[0].FetchOffset = next
	p = rc.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	first, more := lastOffset(t, p.RecordBatches)
	if count+more != 6<<10 || first != 6<<10 {
		t.Fatalf("two fetches got %d+%d records ending at %d, want all %d", count, more, first, 6<<10)
	}
}

// TestKafkaFetchCapKeepsProgress: with a cap below one batch, each fetch
// still returns one whole batch (KIP-74), and a consumer asking 10 MiB per
// partition reads every record in order.
func TestKafkaFetchCapKeepsProgress(t *testing.T) {
	c := testcluster.Start(t, testcluster.Spec{Tweak: func(cfg *configs.Node) { cfg.Kafka.FetchMaxBytes = 1 << 10 }})
	addr := c.Node(0).KafkaAddr()
	const topic, n = "capped-small", 2000
	createTopic(t, addr, topic, 1, nil)
	produceKiB(t, addr, topic, n, 64<<10)

	rc := dialRaw(t, addr)
	req := fetchReq(topic, 0, 0)
	req.MaxBytes, req.Topics[0].Partitions[0].PartitionMaxBytes = 10<<20, 10<<20
	p := rc.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if _, got := lastOffset(t, p.RecordBatches); p.ErrorCode != 0 || got < 1 || len(p.RecordBatches) > 64<<10+1<<10 {
		t.Fatalf("fetch under a 1 KiB cap: error %d, %d records in %d bytes; want one whole batch", p.ErrorCode, got, len(p.RecordBatches))
	}

	consumeKiB(t, addr, topic, n, kgo.FetchMaxPartitionBytes(10<<20))
}

// consumeKiB reads partition 0 of topic from its start with franz-go and
// checks it holds produceKiB's n records, in order.
func consumeKiB(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	cl := kgoClient(t, addr, opts...)
	ctx := ctxT(t)
	for want := 0; want < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("after %d records: %v", want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if got := int(binary.BigEndian.Uint32(r.Value)); got != want || r.Offset != int64(want) || len(r.Value) != 1024 {
				t.Fatalf("record at offset %d holds %d (%d bytes), want %d", r.Offset, got, len(r.Value), want)
			}
			want++
		})
	}
}

// TestKafkaFetchOfManyBatchesReadsAsProduced: a consumer of a backlog of
// 24 KiB batches, about forty to a fetch (written to the connection from
// the buffers they were read into, each from its own place), reads every
// record in order, and franz-go finds every batch's CRC right.
func TestKafkaFetchOfManyBatchesReadsAsProduced(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic, n = "many-batches", 4000
	createTopic(t, addr, topic, 1, nil)
	produceKiB(t, addr, topic, n, 24<<10)

	rc := dialRaw(t, addr)
	p := rc.roundTrip(fetchReq(topic, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if batches := countBatches(t, p.RecordBatches); p.ErrorCode != 0 || batches < 30 {
		t.Fatalf("a 1 MiB fetch: error %d, %d batches in %d bytes; want thirty or more", p.ErrorCode, batches, len(p.RecordBatches))
	}

	consumeKiB(t, addr, topic, n)
}

// countBatches counts the record batches in a fetch's records.
func countBatches(t *testing.T, batches []byte) int {
	t.Helper()
	n := 0
	for len(batches) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(batches); err != nil {
			t.Fatalf("a fetched batch does not parse: %v", err)
		}
		batches = batches[int(b.Length)+12:]
		n++
	}
	return n
}

// lastOffset parses a fetch's record batches and returns the offset after
// the last record and the number of records.
func lastOffset(t *testing.T, batches []byte) (next int64, records int) {
	t.Helper()
	for len(batches) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(batches); err != nil {
			t.Fatalf("a fetched batch does not parse: %v", err)
		}
		size := int(b.Length) + 12
		next, records = b.FirstOffset+int64(b.LastOffsetDelta)+1, records+int(b.NumRecords)
		batches = batches[size:]
	}
	return next, records
}

// TestKafkaPipelinedAnswerIsNotHeldByALongPoll: a client that pipelines a
// produce and a long-polling fetch on one connection (sarama shares one
// per broker) gets the produce's answer once it is durable, not when the
// fetch behind it ends. The write loop flushed only when no request was
// queued, so the answer sat in its buffer for the fetch's MaxWait.
func TestKafkaPipelinedAnswerIsNotHeldByALongPoll(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic = "pipelined"
	createTopic(t, addr, topic, 1, nil)
	rc := dialRaw(t, addr)

	prod := produceReq(topic, idemBatch(t, -1, -1, -1, 1))
	// The fetch waits for a MiB the log will not have, for 4s.
	const maxWait = 4 * time.Second
	fetch := fetchReq(topic, 0, maxWait)
	fetch.MinBytes = 1 << 20
	b := append(frame(prod, 1, "raw-test"), frame(fetch, 2, "raw-test")...)
	start := time.Now()
	if _, err := rc.c.Write(b); err != nil {
		t.Fatal(err)
	}
	first := rc.readFrame()
	took := time.Since(start)
	if corr := int32(binary.BigEndian.Uint32(first)); corr != 1 {
		t.Fatalf("first answer has correlation id %d, want the produce's 1", corr)
	}
	if took > maxWait/2 {
		t.Fatalf("the produce was answered after %v: held behind the fetch's %v long poll", took, maxWait)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(prod.GetVersion()) // v7: no tag buffer after the correlation id
	if err := resp.ReadFrom(first[4:]); err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce answer: error %d, base offset %d", p.ErrorCode, p.BaseOffset)
	}
	if corr := int32(binary.BigEndian.Uint32(rc.readFrame())); corr != 2 {
		t.Fatalf("second answer has correlation id %d, want the fetch's 2", corr)
	}
}

// TestKafkaFetchOfPartitionsBehind: a fetch of six partitions, each with a
// backlog interleaved with the others' in the log, answers the first ones
// the response budget covers (read together) with their records from the
// fetch offset on, within the budget, and the rest with their offsets
// only; franz-go then reads every partition whole and in order.
func TestKafkaFetchOfPartitionsBehind(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic, parts, n = "behind", 6, 600
	createTopic(t, addr, topic, parts, nil)
	produceIndexed(t, addr, topic, parts, n)

	offsets := map[int32]int64{}
	for p := range int32(parts) {
		offsets[p] = 100
	}
	req := sessionFetch(topic, 0, -1, 0, offsets)
	req.MaxBytes = 1 << 20 // four partitions of 256 KiB
	for i := range req.Topics[0].Partitions {
		req.Topics[0].Partitions[i].PartitionMaxBytes = 256 << 10
	}
	resp := dialRaw(t, addr).roundTrip(req).(*kmsg.FetchResponse)
	total, empty := 0, -1
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.HighWatermark != n {
			t.Fatalf("partition %d: error %d, high watermark %d", p.Partition, p.ErrorCode, p.HighWatermark)
		}
		total += len(p.RecordBatches)
		if len(p.RecordBatches) == 0 {
			if empty < 0 {
				empty = int(p.Partition)
			}
			continue
		}
		if empty >= 0 {
			t.Fatalf("partition %d got records after partition %d got none: the budget goes in order", p.Partition, empty)
		}
		if len(p.RecordBatches) > 256<<10+32<<10 {
			t.Fatalf("partition %d got %d bytes, over its 256 KiB and one batch", p.Partition, len(p.RecordBatches))
		}
		next, count := lastOffset(t, p.RecordBatches)
		if next <= 100 || count < int(next-100) {
			t.Fatalf("partition %d: records up to %d, %d of them; want from offset 100 on", p.Partition, next, count)
		}
	}
	if empty >= 0 && empty < 4 {
		t.Fatalf("partition %d got no records, within the first four the budget covers", empty)
	}
	if total > 1<<20+32<<10 {
		t.Fatalf("the answer holds %d record bytes, over its 1 MiB budget", total)
	}

	consumeIndexed(t, addr, topic, parts, n)
}

// produceIndexed produces n records of 1 KiB to each of parts partitions of
// topic, in batches of up to 32 KiB: record i of partition p holds i and p.
func produceIndexed(t *testing.T, addr, topic string, parts, n int) {
	t.Helper()
	prod := kgoClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(32<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := range n {
		for p := range int32(parts) {
			v := make([]byte, 1024)
			binary.BigEndian.PutUint32(v, uint32(i))
			v[4] = byte(p)
			recs = append(recs, &kgo.Record{Partition: p, Value: v})
		}
	}
	if err := prod.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumeIndexed reads produceIndexed's records from the start with a
// consumer made with opts, and fails unless each partition's come in order,
// each at its own offset, each once.
func consumeIndexed(t *testing.T, addr, topic string, parts, n int, opts ...kgo.Opt) {
	t.Helper()
	cons := kgoClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx := ctxT(t)
	next := map[int32]int{}
	for got := 0; got < parts*n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("after %d records: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if i := int(binary.BigEndian.Uint32(r.Value)); i != next[r.Partition] || r.Value[4] != byte(r.Partition) || r.Offset != int64(i) {
				t.Fatalf("partition %d offset %d holds record %d of partition %d, want %d", r.Partition, r.Offset, i, r.Value[4], next[r.Partition])
			}
			next[r.Partition]++
			got++
		})
	}
}

// TestKafkaSessionReadsTheNextFetchAhead: a consumer of many partitions
// behind, whose fetches each fill their budget with a few of them, gets
// every record once and in order, while the node reads the partitions of
// each next fetch as the answer before it goes out; those reads serve most
// of the fetches' reads. A consumer of one partition is read on from where
// each read ends instead, with nothing asked ahead.
func TestKafkaSessionReadsTheNextFetchAhead(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	// Fetches of 256 KiB, 64 KiB a partition: four partitions a fetch.
	small := []kgo.Opt{kgo.FetchMaxBytes(256 << 10), kgo.FetchMaxPartitionBytes(64 << 10)}

	const many, parts, n = "many-behind", 24, 300
	createTopic(t, addr, many, parts, nil)
	produceIndexed(t, addr, many, parts, n)
	consumeIndexed(t, addr, many, parts, n, small...)
	fetches := familyValue(scrape(t, node), `tern_kafka_requests_total{api="Fetch"}`)
	asked := scrapeValue(t, node, "tern_storage_read_ahead_asked_hits_total")
	hits := scrapeValue(t, node, "tern_storage_read_ahead_hits_total")
	t.Logf("%d partitions: %v fetches, %v reads served by reads started ahead, %v of them asked for", parts, fetches, hits, asked)
	// 7.2 MiB in fetches of 256 KiB is some 29 fetches of four partitions.
	if asked < 2*fetches {
		t.Fatalf("%v reads asked ahead served %v fetches of four partitions; want at least two a fetch", asked, fetches)
	}

	const one, m = "one-behind", 2000
	createTopic(t, addr, one, 1, nil)
	produceIndexed(t, addr, one, 1, m)
	consumeIndexed(t, addr, one, 1, m, small...)
	if got := scrapeValue(t, node, "tern_storage_read_ahead_asked_hits_total"); got != asked {
		t.Fatalf("a consumer of one partition was served %v reads asked ahead; want none", got-asked)
	}
	if got := scrapeValue(t, node, "tern_storage_read_ahead_hits_total"); got < hits+10 {
		t.Fatalf("a consumer of one partition reading 2 MiB 64 KiB at a time was served %v reads started ahead; want it read on", got-hits)
	}
}
