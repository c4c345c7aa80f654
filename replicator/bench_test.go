package replicator

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// rawMBps is the raw QUIC figure of the current run; the link benchmarks report their ratio to
// it, so run them together: go test -run=NONE -bench=Throughput ./replicator/
var rawMBps float64

func benchConfig(tb testing.TB, name, region string) Config {
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.NodeName, cfg.Region = name, region
	cfg.TLS.MeshSecret = testSecret
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func mbps(b *testing.B, bytes int64) float64 {
	return float64(bytes) / b.Elapsed().Seconds() / 1e6
}

// rawPair is a plain quic-go connection with the transport's TLS and QUIC settings.
func rawPair(b *testing.B) (client *quic.Conn, server *quic.Conn) {
	cfg := benchConfig(b, "raw-server", "eu")
	mt, err := loadMeshTLS(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", mt.serverConfig(), cfg.quicConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan *quic.Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = quic.DialAddr(ctx, ln.Addr().String(), mt.clientConfig(), cfg.quicConfig())
	if err != nil {
		b.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		b.Fatal("accept failed")
	}
	b.Cleanup(func() {
		client.CloseWithError(0, "")
		server.CloseWithError(0, "")
	})
	return client, server
}

func benchRawQUIC(b *testing.B) {
	client, server := rawPair(b)
	s, err := client.OpenStreamSync(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	read := make(chan int64, 1)
	go func() {
		rs, err := server.AcceptStream(context.Background())
		if err != nil {
			read <- -1
			return
		}
		n, _ := io.Copy(io.Discard, rs)
		read <- n
	}()
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := s.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	if n := <-read; n != int64(b.N*len(buf)) {
		b.Fatalf("server read %d bytes, want %d", n, b.N*len(buf))
	}
	b.StopTimer()
	rawMBps = mbps(b, int64(b.N*len(buf)))
}

// benchHandler is the receiving pattern of the replication logic: take a batch, ack it, grant
// its credit back.
var benchHandler = HandlerFunc(func(ctx context.Context, s *RecvStream) error {
	for {
		bt, err := s.Recv(ctx)
		if err != nil {
			return nil
		}
		if err := s.AckAndGrant(bt.End(), bt.Credit()); err != nil {
			return nil
		}
	}
})

func linkPair(b *testing.B) (*Transport, *Transport) {
	a, err := New(benchConfig(b, "a1", "us"), nil)
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(benchConfig(b, "b1", "eu"), benchHandler)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(); r.Close() })
	if err := a.AddPeer(Peer{Name: "b1", Region: "eu", Addr: r.Addr().String()}); err != nil {
		b.Fatal(err)
	}
	return a, r
}

func benchLink(b *testing.B, run, size int) {
	a, _ := linkPair(b)
	ctx := context.Background()
	s, err := a.OpenPartitionStream(ctx, "b1", OpenRequest{Topic: "bench", PartitionCount: 1, DestRegion: "eu"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, size)
	entries := make([]Entry, run)
	for i := range entries {
		entries[i] = Entry{Count: 1, Value: value}
	}
	b.SetBytes(int64(run * size))
	b.ResetTimer()
	var next int64
	for range b.N {
		for i := range entries {
			entries[i].Offset = next
			next++
		}
		if n, err := s.Send(ctx, entries); err != nil || n != run {
			b.Fatalf("Send = %d, %v", n, err)
		}
	}
	for {
		ack, err := s.NextAck(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if ack == next {
			break
		}
	}
	b.StopTimer()
	if st, ok := a.LinkStats("b1"); ok {
		b.ReportMetric(float64(st.PacketsLost), "lost-pkts")
	}
	got := mbps(b, int64(b.N*run*size))
	if rawMBps > 0 {
		b.ReportMetric(got/rawMBps, "x-raw")
	}
}

// BenchmarkThroughput: the raw QUIC single-stream limit with 64 KiB writes, then the framed
// link with 1 KiB entries in runs of 100 and 1000 under credit flow control (the receiver acks
// and re-grants every batch), each with its ratio to the raw figure of the same run.
func BenchmarkThroughput(b *testing.B) {
	b.Run("raw-quic-64KiB-writes", benchRawQUIC)
	b.Run("link-1KiB-run100", func(b *testing.B) { benchLink(b, 100, 1024) })
	b.Run("link-1KiB-run1000", func(b *testing.B) { benchLink(b, 1000, 1024) })
}

// BenchmarkPingPong: one 100-byte round trip on a raw QUIC stream, then a PING/PONG on the
// link's control stream.
func BenchmarkPingPong(b *testing.B) {
	b.Run("raw-quic-100B", func(b *testing.B) {
		client, server := rawPair(b)
		s, err := client.OpenStreamSync(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			rs, err := server.AcceptStream(context.Background())
			if err != nil {
				return
			}
			buf := make([]byte, 100)
			for {
				if _, err := io.ReadFull(rs, buf); err != nil {
					return
				}
				if _, err := rs.Write(buf); err != nil {
					return
				}
			}
		}()
		buf := make([]byte, 100)
		b.ResetTimer()
		for range b.N {
			if _, err := s.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(s, buf); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
	})
	b.Run("link-control-ping", func(b *testing.B) {
		a, _ := linkPair(b)
		ctx := context.Background()
		if _, err := a.Ping(ctx, "b1"); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, err := a.Ping(ctx, "b1"); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
	})
}
