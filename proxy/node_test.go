package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

func batchOf(t *testing.T, vals ...string) []byte {
	t.Helper()
	msgs := make([]protocols.Message, len(vals))
	for i, v := range vals {
		msgs[i] = protocols.Message{Timestamp: int64(1000 + i), Key: []byte("k" + v), Value: []byte(v)}
	}
	b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBrokerProduceFetchAcrossRestart(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("orders", "public/default")
	if _, err := n.Proxy().CreateTopic(ctx, name, 3, map[string]string{"retention.ms": "3600000"}); err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: 2}
	r, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: batchOf(t, "a", "b")})
	if err != nil || r.BaseOffset != 0 || r.LastOffset != 1 {
		t.Fatalf("produce: %+v %v", r, err)
	}
	n.Restart()
	r, err = n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: batchOf(t, "c")})
	if err != nil || r.BaseOffset != 2 {
		t.Fatalf("produce after restart: %+v %v", r, err)
	}
	f, err := n.Proxy().Fetch(ctx, p, 1, 1<<20)
	if err != nil || len(f.Entries) != 2 || f.HighWatermark != 3 {
		t.Fatalf("fetch: %+v %v", f, err)
	}
	e, _ := protocols.DecodeEntry(f.Entries[1].Value)
	msgs, _ := protocols.Records(e.Batch, e.Header, &protocols.Decompressor{})
	if string(msgs[0].Value) != "c" || msgs[0].Offset != 2 {
		t.Fatalf("fetched %+v", msgs)
	}
	// The non-partitioned form is refused for a partitioned topic.
	if _, err := n.Proxy().Produce(ctx, protocols.Partition{Topic: name, Index: -1}, protocols.ProduceRequest{Batch: batchOf(t, "x")}); !errors.Is(err, protocols.ErrPartitionNotFound) {
		t.Fatalf("produce to the base name of a partitioned topic: %v", err)
	}
	// Event-time lookup lands inside the batch.
	off, err := n.Proxy().OffsetForTime(ctx, p, 1001, protocols.EventTime)
	if err != nil || off != 1 {
		t.Fatalf("OffsetForTime(1001) = %d %v, want 1", off, err)
	}
}

func TestBrokerValidatesInput(t *testing.T) {
	c := testcluster.Start(t)
	b := c.Node(0).Proxy()
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("v", "public/default")
	if _, err := b.CreateTopic(ctx, name, 1, map[string]string{"retention.ms": "soon", "bogus": "1"}); !errors.Is(err, protocols.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "retention.ms") || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("bad config: %v", err)
	}
	if _, err := b.CreateTopic(ctx, name, 1, map[string]string{"max.message.bytes": "100"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, name, 1, nil); !errors.Is(err, protocols.ErrTopicExists) {
		t.Fatalf("create twice: %v", err)
	}
	p := protocols.Partition{Topic: name, Index: 0}
	big := batchOf(t, strings.Repeat("x", 200))
	if _, err := b.Produce(ctx, p, protocols.ProduceRequest{Batch: big}); !errors.Is(err, protocols.ErrMessageTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	corrupt := batchOf(t, "ok")
	corrupt[len(corrupt)-1] ^= 1
	if _, err := b.Produce(ctx, p, protocols.ProduceRequest{Batch: corrupt}); !errors.Is(err, protocols.ErrCorruptBatch) {
		t.Fatalf("corrupt batch: %v", err)
	}
	if o, _ := b.Offsets(ctx, p); o.HighWatermark != 0 {
		t.Fatalf("a refused produce wrote: hw %d", o.HighWatermark)
	}
	ns, _ := protocols.ParseNamespace("nope/none")
	other := protocols.TopicName{Tenant: ns.Tenant, Namespace: ns.Namespace, Local: "t"}
	if _, err := b.CreateTopic(ctx, other, 1, nil); !errors.Is(err, protocols.ErrNamespaceNotFound) {
		t.Fatalf("topic in a missing namespace: %v", err)
	}
	if err := b.AlterTopicConfig(ctx, name, map[string]string{"retention.bytes": "1000"}, []string{"max.message.bytes"}); err != nil {
		t.Fatal(err)
	}
	conf, _ := b.TopicConfig(ctx, name)
	got := map[string]string{}
	for _, e := range conf {
		got[e.Name] = e.Value + "/" + e.Source
	}
	if got["retention.bytes"] != "1000/topic" || got["max.message.bytes"] != fmt.Sprint(5<<20)+"/default" {
		t.Fatalf("effective config %v", got)
	}
}

func TestGroupOffsetsSurviveRestart(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("g", "public/default")
	_, _ = n.Proxy().CreateTopic(ctx, name, 2, nil)
	p0, p1 := protocols.Partition{Topic: name, Index: 0}, protocols.Partition{Topic: name, Index: 1}
	if err := n.Proxy().CommitOffsets(ctx, "grp", []protocols.CommittedOffset{{Partition: p0, Offset: 5, Metadata: "m"}}); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	got, err := n.Proxy().FetchOffsets(ctx, "grp", []protocols.Partition{p0, p1})
	if err != nil || !got[0].Found || got[0].Offset != 5 || got[0].Metadata != "m" || got[1].Found || got[1].Offset != -1 {
		t.Fatalf("fetch offsets: %+v %v", got, err)
	}
	all, _ := n.Proxy().FetchOffsets(ctx, "grp", nil)
	if len(all) != 1 || all[0].Partition != p0 {
		t.Fatalf("all offsets: %+v", all)
	}
	groups, _ := n.Proxy().ListGroupsWithOffsets(ctx)
	if len(groups) != 1 || groups[0] != "grp" {
		t.Fatalf("groups %v", groups)
	}
	_ = n.Proxy().DeleteGroupOffsets(ctx, "grp")
	if groups, _ := n.Proxy().ListGroupsWithOffsets(ctx); len(groups) != 0 {
		t.Fatalf("groups after delete %v", groups)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	get := func(path string) (int, string) {
		resp, err := http.Get(n.HTTPURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("m", "public/default")
	_, _ = n.Proxy().CreateTopic(ctx, name, 0, nil)
	_, _ = n.Proxy().Produce(ctx, protocols.Partition{Topic: name, Index: -1}, protocols.ProduceRequest{Batch: batchOf(t, "a", "b", "c")})
	_, body := get("/metrics")
	for _, want := range []string{`tern_storage_appended_records_total{node="node-1",region="local"} 3`, "tern_ready{", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The produce waited for the segments' fdatasync, and the topic's
	// creation for a WAL fsync; the histograms count them.
	if n := metricValue(t, body, `tern_storage_segment_fsync_seconds_count{node="node-1",region="local"}`); n < 1 {
		t.Errorf("segment fsync histogram counts %v fsyncs after a synced produce", n)
	}
	if n := metricValue(t, body, `tern_storage_append_commit_seconds_count{node="node-1",region="local"}`); n < 1 {
		t.Errorf("append commit histogram counts %v commits after a synced produce", n)
	}
	if n := metricValue(t, body, `tern_storage_wal_fsync_seconds_count{node="node-1",region="local"}`); n < 1 {
		t.Errorf("WAL fsync histogram counts %v fsyncs after a topic's creation", n)
	}
	// The default segment cache is auto: at least its floor of 32MiB.
	if n := metricValue(t, body, `tern_storage_segment_cache_bytes{node="node-1",region="local"}`); n < 32<<20 {
		t.Errorf("segment cache bound %v bytes with storage.segment_cache auto", n)
	}
}

// metricValue is the value of the exposition line starting with series,
// or -1 when there is none.
func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	for _, l := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return v
		}
	}
	return -1
}
