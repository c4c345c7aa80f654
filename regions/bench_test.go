package regions

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkDirectoryApply measures the run goroutine's work per serf event
// (state machine only): how fast a burst of membership changes is absorbed.
func BenchmarkDirectoryApply(b *testing.B) {
	d := newDirState("n0")
	const nodes = 100
	now := time.Now()
	b.ReportAllocs()
	for i := range b.N {
		n := Node{Name: fmt.Sprintf("n%d", i%nodes), Addr: "10.0.0.1:7946", Tags: Tags{Region: "eu"}}
		switch (i / nodes) % 3 {
		case 0:
			d.join(n, now)
		case 1:
			n.Version = "v2"
			d.update(n, now)
		case 2:
			d.fail(n, now)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkFanout measures delivery of directory events to subscribers
// through their queues and goroutines, next to the raw limit: one
// unbuffered channel hand-off per event per receiver.
func BenchmarkFanout(b *testing.B) {
	for _, subs := range []int{1, 8} {
		b.Run(fmt.Sprintf("raw-channel/subs=%d", subs), func(b *testing.B) {
			chans := make([]chan Event, subs)
			done := make(chan struct{})
			for i := range chans {
				chans[i] = make(chan Event)
				go func() {
					for range b.N {
						<-chans[i]
					}
					done <- struct{}{}
				}()
			}
			ev := Event{Kind: EventUpdate}
			b.ResetTimer()
			for i := range b.N {
				ev.Seq = uint64(i)
				for _, c := range chans {
					c <- ev
				}
			}
			for range subs {
				<-done
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
		b.Run(fmt.Sprintf("mesh/subs=%d", subs), func(b *testing.B) {
			m := &Mesh{
				cfg:      Config{Region: "eu", SubscriberBuffer: b.N + 1},
				log:      slog.New(slog.DiscardHandler),
				subsDone: make(chan struct{}),
			}
			m.mu.dir = newDirState("n0")
			m.mu.subs = make(map[*subscriber]struct{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			for range subs {
				ch := m.Subscribe(ctx)
				go func() {
					for range b.N {
						<-ch
					}
					done <- struct{}{}
				}()
			}
			now := time.Now()
			n := Node{Name: "n1", Addr: "10.0.0.1:7946", Tags: Tags{Region: "eu"}}
			b.ResetTimer()
			for i := range b.N {
				n.Version = fmt.Sprint(i)
				m.mu.Lock()
				m.publishLocked(m.mu.dir.update(n, now))
				m.mu.Unlock()
			}
			for range subs {
				<-done
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.StopTimer()
			close(m.subsDone)
			m.subWG.Wait()
		})
	}
}

// BenchmarkSnapshot measures building the admin API view of a 300-node
// mesh (directory copy, grouping, RTT lookups) on a real serf node.
func BenchmarkSnapshot(b *testing.B) {
	cfg := DefaultConfig()
	cfg.NodeName, cfg.BindAddr, cfg.Timings = "bench", "127.0.0.1:0", fastTimings()
	cfg.Logger = slog.New(slog.DiscardHandler)
	m, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// Freeze the directory: stop the run goroutine, whose reconcile would
	// rightly reap the synthetic nodes serf knows nothing about.
	tick := time.NewTicker(5 * time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); ; <-tick.C {
		if _, ok := m.Directory().Node("bench"); ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the node never saw itself join")
		}
	}
	tick.Stop()
	close(m.stopRun)
	m.coreWG.Wait()
	defer m.serf.Shutdown()
	now := time.Now()
	m.mu.Lock()
	for i := range 300 {
		m.mu.dir.join(Node{Name: fmt.Sprintf("n%03d", i), Addr: "10.0.0.1:7946",
			Tags: Tags{Region: fmt.Sprintf("r%d", i%6), Advertise: Advertise{QUIC: "10.0.0.1:7947"}}}, now)
	}
	m.mu.Unlock()
	want := len(m.Snapshot().Regions)
	if want < 6 {
		b.Fatalf("%d regions", want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if s := m.Snapshot(); len(s.Regions) < want {
			b.Fatalf("%d regions", len(s.Regions))
		}
	}
}
