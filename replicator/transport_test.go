package replicator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

func TestDevModeConnectAndExchange(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	sink := newSink()
	a := startNode(t, cfgA, logsA, nil)
	b := startNode(t, cfgB, logsB, sink)
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 20*time.Second)
	s, err := a.OpenPartitionStream(ctx, "b1", openReq("persistent://public/default/orders", 2))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Peer(); got.Name != "b1" || got.Region != "eu" || got.Version != 1 {
		t.Fatalf("peer info %+v", got)
	}
	if st := linkState(a, "b1"); st.Streams != 1 {
		t.Fatalf("a counts %d streams, want 1", st.Streams)
	}
	waitFor(t, 5*time.Second, "b counts the stream", func() bool { return linkState(b, "a1").Streams == 1 })
	want := entriesOf(0, 300, 700)
	n, err := s.Send(ctx, want)
	if err != nil || n != len(want) {
		t.Fatalf("Send = %d, %v", n, err)
	}
	end := want[len(want)-1].End()
	for {
		acked, err := s.NextAck(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if acked == end {
			break
		}
		if acked > end {
			t.Fatalf("acked %d past the end %d", acked, end)
		}
	}
	sameEntries(t, sink.entries("persistent://public/default/orders/2"), want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "streams closed on both sides", func() bool {
		return linkState(a, "b1").Streams == 0 && linkState(b, "a1").Streams == 0
	})

	rtt, err := a.Ping(ctx, "b1")
	if err != nil || rtt <= 0 {
		t.Fatalf("Ping = %v, %v", rtt, err)
	}
	st := linkState(a, "b1")
	if st.State != LinkUp || !st.DialedByLocal || st.Connects != 1 || st.Region != "eu" {
		t.Fatalf("a's link stats %+v", st)
	}
	if st.FramesSent < 3 || st.BytesSent < uint64(300*700) || st.FramesReceived < 2 || st.SmoothedRTT <= 0 {
		t.Fatalf("a's traffic stats %+v", st)
	}
	// b learned of a from the inbound connection: a passive link.
	sb := linkState(b, "a1")
	if sb.State != LinkUp || sb.DialedByLocal || sb.Addr != "" || sb.Region != "us" {
		t.Fatalf("b's link stats %+v", sb)
	}
	if sb.BytesReceived < uint64(300*700) {
		t.Fatalf("b received %d bytes", sb.BytesReceived)
	}
}

// The node that was dialed can open streams back over the same connection: an edge node that
// can only dial out still receives.
func TestReverseStreamOverInboundConnection(t *testing.T) {
	cfgA, logsA := testConfig(t, "edge", "edge1")
	cfgB, logsB := testConfig(t, "hub", "eu")
	sinkA := newSink()
	a := startNode(t, cfgA, logsA, sinkA)
	b := startNode(t, cfgB, logsB, nil)
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	waitUp(t, a, "hub")
	ctx := testCtx(t, 20*time.Second)
	waitFor(t, 5*time.Second, "hub sees edge", func() bool { return linkState(b, "edge").State == LinkUp })
	req := openReq("t", 0)
	req.DestRegion = "edge1"
	s, err := b.OpenPartitionStream(ctx, "edge", req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := entriesOf(10, 20, 100)
	if _, err := s.Send(ctx, want); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "entries at the edge", func() bool { return len(sinkA.entries("t/0")) == len(want) })
	sameEntries(t, sinkA.entries("t/0"), want)
}

func TestDifferentSecretsRefused(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	cfgB.TLS.MeshSecret = "another mesh's secret, 32 bytes"
	a := startNode(t, cfgA, logsA, nil)
	b := startNode(t, cfgB, logsB, newSink())
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a's link down with an error", func() bool {
		st := linkState(a, "b1")
		return st.State == LinkDown && st.LastError != ""
	})
	if st := linkState(a, "b1"); !strings.Contains(st.LastError, "mesh CA") {
		t.Fatalf("a's last error does not say why: %q", st.LastError)
	}
	waitFor(t, 5*time.Second, "b logs the refusal", func() bool {
		return len(logsB.lines("refused incoming connection", "err=")) > 0
	})
	line := logsB.lines("refused incoming connection")[0]
	t.Logf("b: %s", line)
	t.Logf("a: %s", linkState(a, "b1").LastError)
	if !strings.Contains(line, "tls") {
		t.Fatalf("refusal log line does not give the TLS reason: %s", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := a.OpenPartitionStream(ctx, "b1", openReq("t", 0)); err == nil {
		t.Fatal("opened a stream across meshes")
	}
	if st := linkState(b, "a1"); st.State == LinkUp {
		t.Fatal("b has a link up to a node of another mesh")
	}
}

func TestClientWithoutCertificateRefused(t *testing.T) {
	cfgB, logsB := testConfig(t, "b1", "eu")
	b := startNode(t, cfgB, logsB, newSink())
	ctx := testCtx(t, 10*time.Second)
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ALPN}}
	qc, err := quic.DialAddr(ctx, b.Addr().String(), tlsConf, &quic.Config{HandshakeIdleTimeout: 2 * time.Second})
	if err == nil {
		// TLS 1.3: the client may finish its side before the server checked the certificate;
		// the server then closes the connection.
		st, err2 := qc.AcceptStream(ctx)
		if err2 == nil {
			_, err2 = st.Read(make([]byte, 1))
		}
		err = err2
	}
	if err == nil {
		t.Fatal("a client without a certificate got a working connection")
	}
	waitFor(t, 5*time.Second, "b logs the refusal", func() bool {
		return len(logsB.lines("refused incoming connection", "certificate")) > 0
	})
	t.Logf("b: %s", logsB.lines("refused incoming connection")[0])
	if n := len(b.Stats()); n != 0 {
		t.Fatalf("b created %d links for an unauthenticated client", n)
	}
}

// writeCertFiles makes a CA and a node certificate signed by it, as PEM files.
func writeCertFiles(t *testing.T, dir, node string, caCert *x509.Certificate, caKey *ecdsa.PrivateKey) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: node},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(dir, node+".crt")
	keyFile = filepath.Join(dir, node+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func makeCA(t *testing.T, dir, name string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".pem")
	writePEM(t, path, "CERTIFICATE", der)
	return cert, key, path
}

func TestMutualTLSFromFiles(t *testing.T) {
	dir := t.TempDir()
	caCert, caKey, caFile := makeCA(t, dir, "mesh-ca")
	fileCfg := func(name, region string) (Config, *logCapture) {
		cfg, logs := testConfig(t, name, region)
		cfg.TLS.MeshSecret = ""
		cfg.TLS.CertFile, cfg.TLS.KeyFile = writeCertFiles(t, dir, name, caCert, caKey)
		cfg.TLS.CAFile = caFile
		return cfg, logs
	}
	cfgA, logsA := fileCfg("a1", "us")
	cfgB, logsB := fileCfg("b1", "eu")
	sink := newSink()
	a := startNode(t, cfgA, logsA, nil)
	b := startNode(t, cfgB, logsB, sink)
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 20*time.Second)
	s, err := a.OpenPartitionStream(ctx, "b1", openReq("t", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := entriesOf(0, 50, 1000)
	if _, err := s.Send(ctx, want); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "entries received", func() bool { return len(sink.entries("t/1")) == len(want) })
	sameEntries(t, sink.entries("t/1"), want)

	// A node whose certificate comes from another CA (but which trusts ours) is refused by b.
	otherCA, otherKey, _ := makeCA(t, dir, "other-ca")
	cfgC, logsC := fileCfg("c1", "ap")
	cfgC.TLS.CertFile, cfgC.TLS.KeyFile = writeCertFiles(t, dir, "c1-foreign", otherCA, otherKey)
	c := startNode(t, cfgC, logsC, nil)
	if err := c.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "c's link down", func() bool {
		st := linkState(c, "b1")
		return st.State == LinkDown && st.LastError != ""
	})
	waitFor(t, 5*time.Second, "b logs the refusal of c", func() bool {
		return len(logsB.lines("refused incoming connection", "certificate")) > 0
	})
	if _, ok := b.LinkStats("c1"); ok {
		t.Fatal("b has a link to c, whose certificate is from a foreign CA")
	}
}

func TestOpenRefusedByHandler(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	sink := newSink()
	sink.reject = func(r OpenRequest) error {
		if r.PartitionCount != 8 {
			return &LinkError{Code: CodePartitionCountMismatch,
				Message: "topic t has 8 partitions in region eu, 4 in the sender's region: make the counts equal (CreatePartitions) before replicating"}
		}
		return nil
	}
	a := startNode(t, cfgA, logsA, nil)
	b := startNode(t, cfgB, logsB, sink)
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 20*time.Second)
	_, err := a.OpenPartitionStream(ctx, "b1", openReq("t", 0))
	var le *LinkError
	if !errors.As(err, &le) || le.Code != CodePartitionCountMismatch || !le.Remote || !strings.Contains(le.Message, "make the counts equal") {
		t.Fatalf("OpenPartitionStream error = %v, want a remote partition-count mismatch", err)
	}

	req := openReq("t", 0)
	req.DestRegion = "ap"
	_, err = a.OpenPartitionStream(ctx, "b1", req)
	if !errors.As(err, &le) || le.Code != CodeWrongRegion {
		t.Fatalf("wrong region: error = %v", err)
	}
	if _, err := a.OpenPartitionStream(ctx, "nobody", req); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("unknown peer: error = %v", err)
	}
	if _, err := a.OpenPartitionStream(ctx, "b1", OpenRequest{Topic: "t", Partition: 5, PartitionCount: 4, DestRegion: "eu"}); !errors.Is(err, ErrInvalidOpen) {
		t.Fatalf("invalid request: error = %v", err)
	}
	// a has no handler: b's stream to a is refused.
	req = openReq("t", 0)
	req.DestRegion = "us"
	_, err = b.OpenPartitionStream(ctx, "a1", req)
	if !errors.As(err, &le) || le.Code != CodeNoReceiver {
		t.Fatalf("no handler: error = %v", err)
	}
	if st := linkState(a, "b1"); st.State != LinkUp || st.Connects != 1 {
		t.Fatalf("refused streams disturbed the link: %+v", st)
	}
}

func TestSenderCloseEndsReceiverWithEOF(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	result := make(chan error, 1)
	b := startNode(t, cfgB, logsB, HandlerFunc(func(ctx context.Context, s *RecvStream) error {
		var n int
		for {
			bt, err := s.Recv(ctx)
			if err != nil {
				if err == io.EOF && n == 10 {
					result <- nil
				} else {
					result <- errors.Join(err, errors.New("unexpected end"))
				}
				return nil
			}
			n += len(bt.Entries)
			_ = s.Grant(bt.Credit())
		}
	}))
	a := startNode(t, cfgA, logsA, nil)
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 20*time.Second)
	s, err := a.OpenPartitionStream(ctx, "b1", openReq("t", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, entriesOf(0, 10, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("receiver never saw the end of the stream")
	}
	if _, err := s.Send(ctx, entriesOf(100, 1, 10)); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
}

func TestCloseWaitsForHandlers(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	var running, returned atomic.Int32
	udp, err := net.ListenPacket("udp", cfgB.ListenAddr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWithConn(cfgB, HandlerFunc(func(ctx context.Context, s *RecvStream) error {
		running.Add(1)
		defer returned.Add(1)
		for {
			if _, err := s.Recv(ctx); err != nil {
				return nil
			}
		}
	}), udp)
	if err != nil {
		t.Fatal(err)
	}
	_ = logsB
	a := startNode(t, cfgA, logsA, nil)
	if err := a.AddPeer(Peer{Name: "b1", Region: "eu", Addr: b.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 20*time.Second)
	var streams []*SendStream
	for p := range int32(3) {
		s, err := a.OpenPartitionStream(ctx, "b1", openReq("t", p))
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	waitFor(t, 5*time.Second, "three handlers running", func() bool { return running.Load() == 3 })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if returned.Load() != 3 {
		t.Fatalf("Close returned with %d of 3 handlers still running", 3-returned.Load())
	}
	for _, s := range streams {
		if _, err := s.NextAck(ctx); err == nil {
			t.Fatal("stream survived the peer's shutdown")
		}
		s.Close()
	}
	waitFor(t, 5*time.Second, "a sees b gone", func() bool { return linkState(a, "b1").State != LinkUp })
	if _, err := b.OpenPartitionStream(ctx, "a1", openReq("t", 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("OpenPartitionStream after Close = %v", err)
	}
}

// A receiver that acks its durable position before receiving tells the sender where to resume:
// OpenPartitionStream returns with that position, and entries below it can be skipped.
func TestAckBeforeRecvTellsSenderWhereToResume(t *testing.T) {
	cfgA, logsA := testConfig(t, "a1", "us")
	cfgB, logsB := testConfig(t, "b1", "eu")
	var got []Entry
	done := make(chan struct{})
	b := startNode(t, cfgB, logsB, HandlerFunc(func(ctx context.Context, s *RecvStream) error {
		defer close(done)
		if err := s.Ack(500); err != nil { // durable high-water mark from storage
			return err
		}
		for {
			bt, err := s.Recv(ctx)
			if err != nil {
				return nil
			}
			got = append(got, bt.Entries...)
			if err := s.AckAndGrant(bt.End(), bt.Credit()); err != nil {
				return nil
			}
		}
	}))
	a := startNode(t, cfgA, logsA, nil)
	if err := a.AddPeer(b.peer()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 20*time.Second)
	req := openReq("t", 0)
	req.StartOffset = 100 // the sender's cursor is behind the receiver
	s, err := a.OpenPartitionStream(ctx, "b1", req)
	if err != nil {
		t.Fatal(err)
	}
	acked, ok := s.Acked()
	if !ok || acked != 500 {
		t.Fatalf("Acked() = %d, %v; want 500 from the receiver's first ACK", acked, ok)
	}
	if v, err := s.NextAck(ctx); err != nil || v != 500 {
		t.Fatalf("NextAck = %d, %v", v, err)
	}
	want := entriesOf(acked, 5, 10)
	if _, err := s.Send(ctx, want); err != nil {
		t.Fatal(err)
	}
	if v, err := s.NextAck(ctx); err != nil || v != want[4].End() {
		t.Fatalf("NextAck = %d, %v; want %d", v, err, want[4].End())
	}
	s.Close()
	<-done
	sameEntries(t, got, want)
}
