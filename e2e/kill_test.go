package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKillNineKeepsAcknowledgedRecords: a franz-go producer (acks=all)
// writes to `tern serve` until the process is killed with SIGKILL, which
// gives it no chance to flush what it holds in memory (pebble's WAL
// buffer among it). Started again on the same data directory, the node
// has every acknowledged record at the offset it was acknowledged at,
// with its bytes, and each partition's offsets are dense.
func TestKillNineKeepsAcknowledgedRecords(t *testing.T) {
	bin := buildTern(t)
	dir := t.TempDir()
	httpAddr, kafkaAddr, addrFlags := serveAddrs(t)
	args := append([]string{"serve", "--data-dir", dir}, addrFlags...)
	logf := filepath.Join(t.TempDir(), "serve.log")
	start := func() *exec.Cmd {
		f, err := os.OpenFile(logf, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitHealthy(t, httpAddr, func() string { b, _ := os.ReadFile(logf); return string(b) })
		return cmd
	}
	cmd := start()
	const topic, parts = "killed", 3
	createTopic(t, kafkaAddr, topic, parts, nil)

	type ack struct {
		partition int32
		offset    int64
		value     []byte
	}
	var (
		mu    sync.Mutex
		acked []ack
	)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordRetries(1), kgo.RequestTimeoutOverhead(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 300000 && ctx.Err() == nil; i++ {
			v := []byte(fmt.Sprintf("k9-%07d-%s", i, bytes.Repeat([]byte{'x'}, 200)))
			cl.Produce(ctx, &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked = append(acked, ack{r.Partition, r.Offset, r.Value})
					mu.Unlock()
				}
			})
		}
	}()
	// Kill once a good number of records is acknowledged, while the
	// producer is still sending.
	for deadline := time.Now().Add(10 * time.Second); ; {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 20000 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	cancel()
	wg.Wait()
	cl.Close()
	mu.Lock()
	before := append([]ack(nil), acked...)
	mu.Unlock()
	if len(before) < 1000 {
		t.Fatalf("only %d records acknowledged before the kill; the test proves little", len(before))
	}

	start()
	// Read each partition up to its high watermark after the restart.
	cons := kgoClient(t, kafkaAddr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := map[int32]int64{}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for p := range int32(parts) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lreq.Topics = append(lreq.Topics, lt)
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	lresp, err := lreq.RequestWith(rctx, cons)
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range lresp.Topics[0].Partitions {
		if lp.ErrorCode != 0 {
			t.Fatalf("list offsets of partition %d: error %d", lp.Partition, lp.ErrorCode)
		}
		want[lp.Partition] = lp.Offset
	}
	for _, a := range before {
		if a.offset >= want[a.partition] {
			t.Fatalf("acknowledged record %.11s at partition %d offset %d is past the log end %d after the restart", a.value, a.partition, a.offset, want[a.partition])
		}
	}
	got := map[int32]map[int64][]byte{}
	for {
		done := true
		for p, end := range want {
			if int64(len(got[p])) < end {
				done = false
			}
		}
		if done {
			break
		}
		fs := cons.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("reading back: %v (have %d/%d/%d of %v)", rctx.Err(), len(got[0]), len(got[1]), len(got[2]), want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if got[r.Partition] == nil {
				got[r.Partition] = map[int64][]byte{}
			}
			if _, dup := got[r.Partition][r.Offset]; dup {
				t.Fatalf("partition %d offset %d read twice", r.Partition, r.Offset)
			}
			got[r.Partition][r.Offset] = r.Value
		})
	}
	for p, m := range got {
		for o := range int64(len(m)) {
			if _, ok := m[o]; !ok {
				t.Fatalf("partition %d: offset %d missing below %d records read: offsets not dense", p, o, len(m))
			}
		}
	}
	for _, a := range before {
		if v, ok := got[a.partition][a.offset]; !ok || !bytes.Equal(v, a.value) {
			t.Fatalf("acknowledged record %.11s at partition %d offset %d: read back %.11q (found %v)", a.value, a.partition, a.offset, v, ok)
		}
	}
	t.Logf("%d records acknowledged before SIGKILL, all read back after the restart", len(before))
	if b, _ := os.ReadFile(logf); bytes.Contains(b, []byte("replayed appends")) {
		i := bytes.Index(b, []byte("replayed appends"))
		t.Logf("%s", b[i:i+bytes.IndexByte(b[i:], '\n')])
	}
}
