package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/proxy"
)

// quota is the disk quota of the nodes quotaNode starts.
const quota = 16 << 20

// quotaNode starts a node with a 16 MiB disk quota (tweak adjusts the rest)
// and a topic; it returns the topic's log and a batch of 64 1 KiB messages
// to fill it with.
func quotaNode(t *testing.T, tweak func(*configs.Node)) (*testcluster.Node, protocols.Partition, []byte) {
	t.Helper()
	n := testcluster.Start(t, testcluster.Spec{Tweak: func(cfg *configs.Node) {
		cfg.Limits.DiskQuota = quota
		cfg.Storage.SegmentSize = quota / 16 // at most a quarter of the quota
		if tweak != nil {
			tweak(cfg)
		}
	}}).Node(0)
	name, _ := protocols.ParseTopicName("filling", "public/default")
	if _, err := n.Proxy().CreateTopic(context.Background(), name, 0, nil); err != nil {
		t.Fatal(err)
	}
	vals := make([]string, 64)
	for i := range vals {
		vals[i] = strings.Repeat("x", 1024)
	}
	return n, protocols.Partition{Topic: name, Index: -1}, batchOf(t, vals...)
}

// TestDiskQuotaRefusesProduce fills a node with a 16 MiB disk quota: once
// the store reaches it, produce is refused with ErrStorage and a message
// naming the setting, and every write acknowledged before that is still
// there to read.
func TestDiskQuotaRefusesProduce(t *testing.T) {
	n, p, batch := quotaNode(t, nil)
	ctx := context.Background()
	vals := 64

	// 1000 batches of 64 KiB would be 4x the quota; stop at the first refusal.
	acked, deadline := int64(0), time.Now().Add(60*time.Second)
	var refusal error
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		r, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: bytes.Clone(batch)})
		if err != nil {
			refusal = err
			break
		}
		if r.BaseOffset != acked {
			t.Fatalf("batch %d at offset %d, want %d", i, r.BaseOffset, acked)
		}
		acked += int64(vals)
	}
	if refusal == nil {
		t.Fatalf("%d messages (%d MiB) accepted under a %d MiB quota", acked, acked>>10, quota>>20)
	}
	if !errors.Is(refusal, protocols.ErrStorage) || !strings.Contains(refusal.Error(), "limits.disk_quota") {
		t.Fatalf("refusal %q: want ErrStorage naming limits.disk_quota", refusal)
	}
	if acked == 0 {
		t.Fatal("the quota refused the first write of an empty node")
	}
	// Everything acknowledged reads back.
	var read int64
	for off := int64(0); off < acked; {
		f, err := n.Proxy().Fetch(ctx, p, off, 1<<20)
		if err != nil {
			t.Fatalf("fetch at %d: %v", off, err)
		}
		if f.HighWatermark != acked {
			t.Fatalf("high watermark %d, want the %d acknowledged messages", f.HighWatermark, acked)
		}
		for _, e := range f.Entries {
			d, err := protocols.DecodeEntry(e.Value)
			if err != nil {
				t.Fatal(err)
			}
			if got := int64(d.Header.LastOffsetDelta) + 1; got != e.Count {
				t.Fatalf("entry at %d holds %d records, the log says %d", e.BaseOffset, got, e.Count)
			}
			read += e.Count
			off = e.BaseOffset + e.Count
		}
	}
	if read != acked {
		t.Fatalf("read %d messages back, want %d", read, acked)
	}
	t.Logf("refused after %d messages (%d KiB of values): %v", acked, acked, refusal)
}

// TestDiskQuotaRetentionFreesSpace fills a node to its quota, then lowers
// the topic's retention: once retention has removed the old entries and
// their space is reclaimed, produce is accepted again.
func TestDiskQuotaRetentionFreesSpace(t *testing.T) {
	n, p, batch := quotaNode(t, func(cfg *configs.Node) {
		cfg.Retention.CheckInterval = configs.Duration(100 * time.Millisecond)
	})
	ctx := context.Background()
	full := false
	for i := 0; i < 1000 && !full; i++ {
		_, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: bytes.Clone(batch)})
		full = errors.Is(err, protocols.ErrStorage)
		if err != nil && !full {
			t.Fatal(err)
		}
	}
	if !full {
		t.Fatal("the quota never refused a write")
	}
	if err := n.Proxy().AlterTopicConfig(ctx, p.Topic, map[string]string{proxy.ConfRetentionBytes: "1048576"}, nil); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 60*time.Second, "produce accepted after retention freed space", func() bool {
		_, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: bytes.Clone(batch)})
		return err == nil
	})
	// The removed segments are still on disk, kept to be written again;
	// the quota counts them as free, or produce would never resume.
	if m := n.Proxy().Store().Metrics(); m.SegmentPoolBytes == 0 || m.DiskBytes < m.SegmentPoolBytes {
		t.Errorf("after retention: %d of %d bytes on disk kept for reuse; want the removed segments kept", m.SegmentPoolBytes, m.DiskBytes)
	}
}
