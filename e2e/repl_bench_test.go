package e2e

// Replication benchmarks on loopback, two in-process nodes (regions us and eu) with default
// durability (fsync before acknowledging) on both sides:
//
//	go test -run=NONE -bench=Replication -benchtime=1x ./e2e/
//
// raw-quic is the ceiling: one quic-go stream with the mesh's TLS and windows, 64 KiB writes.
// The others report their ratio to it. Environment knobs: TERN_BENCH_BACKLOG_MB (default 1024),
// TERN_BENCH_STEP (seconds per rate step, default 3), TERN_BENCH_MSG (message bytes, default 1024),
// TERN_BENCH_PARTITIONS (partitions of the catch-up's topic, default 1).

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/replicator"
)

var rawQUICMBps float64

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func BenchmarkReplication(b *testing.B) {
	b.Run("raw-quic-1-stream", benchRawQUIC)
	b.Run("latency-and-max-rate", benchLatencyAndRate)
	b.Run("catch-up-backlog", benchCatchUp)
}

// benchRawQUIC: one quic-go stream between two endpoints with mesh certificates and the
// transport's default windows, writing 64 KiB chunks.
func benchRawQUIC(b *testing.B) {
	caDER, caKey, err := replicator.DevCA(testcluster.TestMeshSecret)
	if err != nil {
		b.Fatal(err)
	}
	leaf := func(name string) tls.Certificate {
		c, err := replicator.IssueLeaf(caDER, caKey, name, "x", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	def := replicator.DefaultConfig()
	qc := &quic.Config{
		InitialStreamReceiveWindow: def.InitialStreamReceiveWindow, MaxStreamReceiveWindow: def.MaxStreamReceiveWindow,
		InitialConnectionReceiveWindow: def.InitialConnectionReceiveWindow, MaxConnectionReceiveWindow: def.MaxConnectionReceiveWindow,
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf("srv")}, NextProtos: []string{replicator.ALPN}, MinVersion: tls.VersionTLS13}, qc)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ctx := context.Background()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			got <- -1
			return
		}
		s, err := c.AcceptStream(ctx)
		if err != nil {
			got <- -1
			return
		}
		n, _ := io.Copy(io.Discard, s)
		got <- n
	}()
	conn, err := quic.DialAddr(ctx, ln.Addr().String(), &tls.Config{Certificates: []tls.Certificate{leaf("cli")}, InsecureSkipVerify: true, NextProtos: []string{replicator.ALPN}}, qc)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.CloseWithError(0, "")
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	// At least 1 GiB so the figure is not a warm-up artefact.
	n := max(b.N, (1<<30)/len(buf))
	b.SetBytes(int64(len(buf)))
	start := time.Now()
	for range n {
		if _, err := s.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	if r := <-got; r != int64(n*len(buf)) {
		b.Fatalf("read %d bytes, want %d", r, n*len(buf))
	}
	rawQUICMBps = float64(n*len(buf)) / time.Since(start).Seconds() / 1e6
	b.ReportMetric(rawQUICMBps, "MB/s")
	b.Logf("raw QUIC, one stream, 64 KiB writes: %.0f MB/s", rawQUICMBps)
}

// benchPair is two regions (plain UDP sockets, as in production) with a single-partition topic
// in us; replicate sets the policy that replicates it to eu.
func benchPair(b *testing.B, topic string, partitions int) (c *testcluster.Cluster, p protocols.Partition, replicate func()) {
	tweak := func(cfg *configs.Node) {
		if v := envInt("TERN_BENCH_READ_KB", 0); v > 0 {
			cfg.Replication.ReadBytes = configs.Bytes(v << 10)
		}
		if v := envInt("TERN_BENCH_CREDIT_KB", 0); v > 0 {
			cfg.Replication.StreamCredit = configs.Bytes(v << 10)
		}
	}
	c = testcluster.Start(b, testcluster.Spec{Name: "us-1", Region: "us", PlainMeshSocket: true, Tweak: tweak},
		testcluster.Spec{Name: "eu-1", Region: "eu", PlainMeshSocket: true, Tweak: tweak})
	c.WaitMesh(20 * time.Second)
	us := c.Node(0)
	name, _ := protocols.ParseTopicName(topic, "public/default")
	if _, err := us.Proxy().CreateTopic(context.Background(), name, partitions, nil); err != nil {
		b.Fatal(err)
	}
	p = protocols.Partition{Topic: name, Index: -1}
	if partitions > 0 {
		p.Index = 0
	}
	return c, p, func() {
		if _, err := us.Proxy().Replication().SetPolicy(context.Background(), replicator.PolicyWrite{
			Key: replicator.PolicyKey{Kind: replicator.KindNamespace, Name: "public/default"}, Spec: replicator.PolicySpec{Regions: []string{"us", "eu"}},
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// timedBatch is one entry of n messages whose values start with the produce time (Unix ns).
func timedBatch(b testing.TB, n, size int, at time.Time) []byte {
	msgs := make([]protocols.Message, n)
	for i := range msgs {
		v := make([]byte, size)
		binary.BigEndian.PutUint64(v, uint64(at.UnixNano()))
		msgs[i] = protocols.Message{Timestamp: at.UnixMilli(), Value: v}
	}
	batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

func produceTimed(b testing.TB, n *testcluster.Node, p protocols.Partition, msgs, size int, at time.Time) {
	if _, err := n.Proxy().Produce(context.Background(), p, protocols.ProduceRequest{Batch: timedBatch(b, msgs, size, at)}); err != nil {
		b.Fatal(err)
	}
}

// latencyReader follows eu's log and records, per message, now minus its produce time.
type latencyReader struct {
	mu   sync.Mutex
	lat  []time.Duration
	next atomic.Int64
}

func (lr *latencyReader) run(ctx context.Context, n *testcluster.Node, p protocols.Partition, from int64) {
	lr.next.Store(from)
	px := n.Proxy()
	dec := &protocols.Decompressor{}
	for ctx.Err() == nil {
		off := lr.next.Load()
		f, err := px.Fetch(ctx, p, off, 4<<20)
		if err != nil {
			return
		}
		if len(f.Entries) == 0 {
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_ = px.Wait(wctx, []protocols.Watch{{Partition: p, Offset: off}})
			cancel()
			continue
		}
		now := time.Now()
		var ls []time.Duration
		for _, e := range f.Entries {
			de, err := protocols.DecodeEntry(e.Value)
			if err != nil {
				return
			}
			ms, err := protocols.Records(de.Batch, de.Header, dec)
			if err != nil {
				return
			}
			for _, m := range ms {
				ls = append(ls, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(m.Value)))))
			}
			off = e.BaseOffset + e.Count
		}
		lr.mu.Lock()
		lr.lat = append(lr.lat, ls...)
		lr.mu.Unlock()
		lr.next.Store(off)
	}
}

func (lr *latencyReader) take() []time.Duration {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	out := lr.lat
	lr.lat = nil
	return out
}

func pct(ls []time.Duration, q float64) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	slices.Sort(ls)
	return ls[min(len(ls)-1, int(q*float64(len(ls))))]
}

type stepResult struct {
	rate, achieved     float64
	p50, p99, maxLat   time.Duration
	local50, local99   time.Duration
	endLag             int64
	lagEarly, lagLate  int64
	bounded, producing bool
}

// benchLatencyAndRate produces into us at fixed rates in steps (entries of 10 messages, up to
// 64 appends in flight), measuring the produce-to-visible-in-eu latency of every message and the
// replication lag. A step is bounded when the producer kept its rate and, one second after it
// stopped, eu had caught up. The rate grows by 1.5x until a step is not bounded.
func benchLatencyAndRate(b *testing.B) {
	const perEntry = 10
	size := envInt("TERN_BENCH_MSG", 1024)
	step := time.Duration(envInt("TERN_BENCH_STEP", 3)) * time.Second
	c, p, replicate := benchPair(b, "latency", 0)
	us, eu := c.Node(0), c.Node(1)
	replicate()
	// Wait for the stream, so the first step does not measure its setup.
	produceTimed(b, us, p, 1, 16, time.Now())
	testcluster.WaitFor(b, 20*time.Second, "the stream to eu", func() bool { return hw(eu, p) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lr := &latencyReader{}
	go lr.run(ctx, eu, p, 1)

	var results []stepResult
	best := stepResult{}
	for rate := 2000.0; rate <= 400000; rate *= 1.5 {
		lr.take()
		entriesPerSec := rate / perEntry
		interval := time.Duration(float64(time.Second) / entriesPerSec)
		start := time.Now()
		var sent int
		// Sample the lag (messages in us not yet in eu) through the step to see its trend.
		var lagMu sync.Mutex
		var lags []int64
		sampleDone := make(chan struct{})
		go func() {
			defer close(sampleDone)
			for time.Since(start) < step {
				l := hw(us, p) - hw(eu, p)
				lagMu.Lock()
				lags = append(lags, l)
				lagMu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		}()
		// Appends are started in order here and waited for in order by another goroutine, as a
		// producer connection does: an append is visible (and replicated) once waited for.
		type inflightAppend struct {
			pp protocols.PendingProduce
			at time.Time
		}
		inflight := make(chan inflightAppend, 256)
		waited := make(chan error, 1)
		var local []time.Duration
		go func() {
			var err error
			for a := range inflight {
				if _, e := a.pp.Wait(); e != nil && err == nil {
					err = e
				}
				local = append(local, time.Since(a.at))
			}
			waited <- err
		}()
		for time.Since(start) < step {
			due := start.Add(time.Duration(sent) * interval)
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
			at := time.Now()
			pp, err := us.Proxy().StartProduce(ctx, p, protocols.ProduceRequest{Batch: timedBatch(b, perEntry, size, at)})
			if err != nil {
				b.Fatal(err)
			}
			inflight <- inflightAppend{pp: pp, at: at}
			sent++
		}
		close(inflight)
		if err := <-waited; err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		<-sampleDone
		target := hw(us, p)
		caught := time.Now().Add(time.Second)
		for time.Now().Before(caught) && hw(eu, p) < target {
			time.Sleep(5 * time.Millisecond)
		}
		r := stepResult{rate: rate, achieved: float64(sent*perEntry) / elapsed.Seconds(), endLag: target - hw(eu, p)}
		for lr.next.Load() < target && time.Now().Before(caught.Add(5*time.Second)) {
			time.Sleep(5 * time.Millisecond)
		}
		ls := lr.take()
		r.p50, r.p99 = pct(ls, 0.50), pct(ls, 0.99)
		if len(ls) > 0 {
			r.maxLat = ls[len(ls)-1]
		}
		r.local50, r.local99 = pct(local, 0.50), pct(local, 0.99)
		r.producing = r.achieved >= 0.95*rate
		// Bounded: the median lag of the last third of the step is not above twice that of the
		// first third plus 100 ms of traffic (a backlog that keeps growing is), and the lag
		// drains within a second after the step. Medians, so one slow fsync is not a trend.
		third := max(len(lags)/3, 1)
		median := func(v []int64) int64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
		r.lagEarly, r.lagLate = median(lags[:third]), median(lags[len(lags)-third:])
		r.bounded = r.producing && r.endLag == 0 && float64(r.lagLate) <= 2*float64(r.lagEarly)+rate*0.1
		results = append(results, r)
		b.Logf("rate %7.0f msg/s (%6.1f MB/s): achieved %7.0f; durable in us p50 %v p99 %v; visible in eu p50 %v p99 %v max %v; lag early %d late %d, 1s after %d; bounded %v",
			rate, rate*float64(size)/1e6, r.achieved, r.local50.Round(10*time.Microsecond), r.local99.Round(10*time.Microsecond),
			r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.maxLat.Round(time.Millisecond), r.lagEarly, r.lagLate, r.endLag, r.bounded)
		if !r.producing {
			b.Logf("the producer in us could not keep %.0f msg/s: the local log, not replication, is the limit here", rate)
			break
		}
		if !r.bounded {
			break
		}
		best = r
		// Let eu drain fully before the next step.
		testcluster.WaitFor(b, 30*time.Second, "eu to catch up", func() bool { return hw(eu, p) == hw(us, p) })
	}
	if len(results) > 0 {
		first := results[0]
		b.ReportMetric(float64(first.p50.Microseconds())/1000, "p50-ms@2k")
		b.ReportMetric(float64(first.p99.Microseconds())/1000, "p99-ms@2k")
	}
	b.ReportMetric(best.rate, "max-bounded-msg/s")
	b.ReportMetric(best.rate*float64(size)/1e6, "max-bounded-MB/s")
	if rawQUICMBps > 0 {
		b.ReportMetric(best.rate*float64(size)/1e6/rawQUICMBps, "max-bounded-x-raw")
	}
	b.Logf("highest bounded rate %.0f msg/s of %d B (%.1f MB/s): latency p50 %v p99 %v",
		best.rate, size, best.rate*float64(size)/1e6, best.p50.Round(10*time.Microsecond), best.p99.Round(10*time.Microsecond))
}

// benchCatchUp builds a backlog in us before the topic replicates (entries of 100 messages),
// then adds eu to the policy from the earliest offset and measures how fast eu catches up: the
// same path as a link that comes back after days.
func benchCatchUp(b *testing.B) {
	const perEntry = 100
	size := envInt("TERN_BENCH_MSG", 1024)
	total := int64(envInt("TERN_BENCH_BACKLOG_MB", 1024)) << 20
	// With TERN_BENCH_PARTITIONS over 1 the backlog is spread over that many partitions of one
	// topic, an entry at a time to each in turn, and each partition is a stream of its own.
	parts := envInt("TERN_BENCH_PARTITIONS", 1)
	created := parts
	if parts == 1 {
		created = 0 // a non-partitioned topic, as before
	}
	c, p0, replicate := benchPair(b, "backlog", created)
	us, eu := c.Node(0), c.Node(1)
	partition := func(i int) protocols.Partition {
		p := p0
		if created > 0 {
			p.Index = i % parts
		}
		return p
	}
	ctx := context.Background()
	entries := int(total / int64(perEntry*size))
	batch := timedBatch(b, perEntry, size, time.Now())
	start := time.Now()
	var pending []protocols.PendingProduce
	for i := 0; i < entries; i++ {
		pp, err := us.Proxy().StartProduce(ctx, partition(i), protocols.ProduceRequest{Batch: batch})
		if err != nil {
			b.Fatal(err)
		}
		pending = append(pending, pp)
		if len(pending) == 64 || i == entries-1 {
			for _, pp := range pending {
				if _, err := pp.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			pending = pending[:0]
		}
	}
	produced := time.Since(start)
	targets := make([]int64, parts)
	var target int64
	for i := range targets {
		targets[i] = hw(us, partition(i))
		target += targets[i]
	}
	bytes := float64(entries) * float64(perEntry*size)
	b.Logf("backlog: %d messages on %d partitions, %.0f MiB produced in %v (%.0f MB/s into the local log)", target, parts, bytes/(1<<20), produced.Round(time.Millisecond), bytes/produced.Seconds()/1e6)
	var before uint64
	for _, l := range us.Proxy().Replication().Status().Links {
		before = l.BytesSent
	}
	// The process's Go heap (both nodes') during the catch-up, sampled with every check.
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcs, heapPeak := ms.NumGC, ms.HeapInuse
	healed := time.Now()
	replicate()
	var samples, blocked int
	testcluster.WaitFor(b, 10*time.Minute, "eu to catch up", func() bool {
		runtime.ReadMemStats(&ms)
		heapPeak = max(heapPeak, ms.HeapInuse)
		if s, ok := streamTo(us, p0.Topic, p0.Index, "eu"); ok {
			samples++
			if s.CreditBlocked {
				blocked++
			}
		}
		for i := range targets {
			if hw(eu, partition(i)) != targets[i] {
				return false
			}
		}
		return true
	})
	took := time.Since(healed)
	runtime.ReadMemStats(&ms)
	gcs = ms.NumGC - gcs
	b.Logf("sender of the first partition waiting for credit in %d of %d samples", blocked, samples)
	var after, lost uint64
	var rtt float64
	for _, l := range us.Proxy().Replication().Status().Links {
		after, lost, rtt = l.BytesSent, l.PacketsLost, l.RTTMs
	}
	b.Logf("link: %d packets lost, smoothed RTT %.2f ms", lost, rtt)
	b.Logf("Go heap in use (both nodes) peaked at %.0f MiB; %d collections during the catch-up", float64(heapPeak)/(1<<20), gcs)
	rate := bytes / took.Seconds() / 1e6
	b.ReportMetric(rate, "catch-up-MB/s")
	b.ReportMetric(float64(target)/took.Seconds(), "catch-up-msg/s")
	b.ReportMetric(float64(heapPeak)/(1<<20), "heap-peak-MiB")
	b.ReportMetric(float64(gcs)/took.Seconds(), "gc/s")
	if rawQUICMBps > 0 {
		b.ReportMetric(rate/rawQUICMBps, "catch-up-x-raw")
	}
	b.Logf("catch-up of %.0f MiB: %v, %.0f MB/s (%.0f msg/s), %.0f MiB on the wire (link overhead %.1f%%)%s",
		bytes/(1<<20), took.Round(time.Millisecond), rate, float64(target)/took.Seconds(), float64(after-before)/(1<<20),
		(float64(after-before)/bytes-1)*100, ratio(rate))
}

func ratio(mbps float64) string {
	if rawQUICMBps == 0 {
		return ""
	}
	return fmt.Sprintf(", %.2fx the raw QUIC stream", mbps/rawQUICMBps)
}
