package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/ternmq/tern/configs"
	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/replicator"
)

// TestReplRefusesPeerWithoutMeshCertificate: a region whose node holds a certificate from
// another CA (another mesh secret) never gets a link, and its data never arrives; the status
// names the certificate problem. A client presenting no certificate at all is refused in the
// handshake.
func TestReplRefusesPeerWithoutMeshCertificate(t *testing.T) {
	c := testcluster.Start(t,
		testcluster.Spec{Name: "us-1", Region: "us"},
		testcluster.Spec{Name: "eu-1", Region: "eu", Tweak: func(cfg *configs.Node) { cfg.Mesh.Secret = "an entirely different mesh secret" }},
	)
	c.WaitMesh(20 * time.Second)
	us, eu := c.Node(0), c.Node(1)
	putPolicy(t, us, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu"}})
	name := topicName(t, "secret")
	if _, err := us.Proxy().CreateTopic(context.Background(), name, 0, nil); err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: -1}
	produceMany(t, us, p, "us", "x", 0, 5, 1)
	testcluster.WaitFor(t, 20*time.Second, "us to report the refused link", func() bool {
		s, ok := streamTo(us, name, -1, "eu")
		return ok && s.State == replicator.StreamDisconnected && s.LagMessages == 5 &&
			(strings.Contains(s.LastError, "certificate") || strings.Contains(s.LastError, "tls"))
	})
	if _, ok := eu.Proxy().Replication().Policy(nsKey("public/default")); ok {
		t.Fatal("eu received the policy over a link it should not have")
	}
	if got := hw(eu, p); got > 0 {
		t.Fatalf("eu holds %d messages", got)
	}

	// No client certificate: the node refuses the handshake. In TLS 1.3 the client may think
	// it is done before the server has checked its (missing) certificate, so the refusal can
	// arrive just after the dial returns: the connection must end either way.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qc, err := quic.DialAddr(ctx, us.Config.Mesh.MeshAddr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{replicator.ALPN}}, nil)
	if err == nil {
		select {
		case <-qc.Context().Done():
			err = context.Cause(qc.Context())
		case <-ctx.Done():
			t.Fatal("a client without a certificate kept its connection")
		}
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("connection without a certificate ended with %v, want a certificate error", err)
	}
	t.Logf("client without a certificate: %v", err)
}

// rawLink speaks the link protocol by hand with a valid mesh certificate, to send frames a
// real node never would.
type rawLink struct {
	t  *testing.T
	qc *quic.Conn
}

func frameBytes(typ byte, payload []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

func uv(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func str(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// readFrame reads one frame: its type and payload.
func readFrame(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(h[1:]))
	_, err := io.ReadFull(r, p)
	return h[0], p, err
}

func dialRawLink(t *testing.T, addr, name, region string) *rawLink {
	t.Helper()
	caDER, caKey, err := replicator.DevCA(testcluster.TestMeshSecret)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := replicator.IssueLeaf(caDER, caKey, name, region, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qc, err := quic.DialAddr(ctx, addr, &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, NextProtos: []string{replicator.ALPN}},
		&quic.Config{KeepAlivePeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = qc.CloseWithError(0, "") })
	ctrl, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hello := uv(uv(nil, 1), 1)
	hello = str(str(hello, name), region)
	hello = uv(uv(uv(hello, 4<<20), 77), 0)
	if _, err := ctrl.Write(frameBytes(1, hello)); err != nil {
		t.Fatal(err)
	}
	typ, _, err := readFrame(ctrl)
	if err != nil || typ != 1 {
		t.Fatalf("answer to HELLO: type %d, %v", typ, err)
	}
	// Answer heartbeats so the node keeps the connection.
	go func() {
		for {
			typ, p, err := readFrame(ctrl)
			if err != nil {
				return
			}
			if typ == 7 {
				if _, err := ctrl.Write(frameBytes(8, p)); err != nil {
					return
				}
			}
		}
	}()
	return &rawLink{t: t, qc: qc}
}

// open opens a partition stream with a well-formed OPEN and waits for the receiver's first
// answer (ACK or CREDIT).
func (l *rawLink) open(topic, dest string) *quic.Stream {
	l.t.Helper()
	s, err := l.qc.OpenStreamSync(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	extra := binary.BigEndian.AppendUint64([]byte{1, 0}, 1)
	open := str(nil, topic)
	open = uv(uv(open, 0), 0)
	open = uv(str(open, dest), 0)
	open = append(uv(open, uint64(len(extra))), extra...)
	if _, err := s.Write(frameBytes(2, open)); err != nil {
		l.t.Fatal(err)
	}
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, p, err := readFrame(s)
	if err != nil || (typ != 4 && typ != 5) {
		l.t.Fatalf("answer to OPEN: type %d %q %v", typ, p, err)
	}
	return s
}

// expectError reads until the receiver's ERROR frame and returns its code and message; the
// stream must then end.
func expectError(t *testing.T, s *quic.Stream) (uint64, string) {
	t.Helper()
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		typ, p, err := readFrame(s)
		if err != nil {
			t.Fatalf("stream ended without an ERROR frame: %v", err)
		}
		if typ != 6 {
			continue // ACK, CREDIT
		}
		code, n := binary.Uvarint(p)
		l, m := binary.Uvarint(p[n:])
		msg := string(p[n+m : n+m+int(l)])
		var se *quic.StreamError
		if _, _, err := readFrame(s); err == nil || !(errors.Is(err, io.EOF) || errors.As(err, &se)) {
			t.Fatalf("stream still open after ERROR: %v", err)
		}
		return code, msg
	}
}

// TestReplMalformedFramesFromValidPeer: a peer with a valid mesh certificate sends malformed
// link frames and entries that do not decode. Each closes that stream with a protocol error;
// nothing is written; the connection, the node and replication from a real region carry on.
func TestReplMalformedFramesFromValidPeer(t *testing.T) {
	c, name := twoRegions(t, "victim")
	us, eu := c.Node(0), c.Node(1)
	p := protocols.Partition{Topic: name, Index: 0}
	before := produceMany(t, us, p, "us", "v", 0, 10, 1)
	waitCount(t, eu, p, len(before), 20*time.Second)

	l := dialRawLink(t, eu.Config.Mesh.MeshAddr, "rogue-1", "zz")
	rogue := "persistent://public/default/rogue"
	junk := make([]byte, 300)
	_, _ = rand.Read(junk)
	cases := []struct {
		name  string
		frame []byte
	}{
		{"entry with zero offsets", frameBytes(3, str(uv(uv(uv(nil, 1), 0), 0), "x"))},
		{"truncated varint", frameBytes(3, []byte{1, 0x80})},
		{"unknown frame type", frameBytes(99, nil)},
		{"frame larger than the limit", []byte{3, 0x7f, 0xff, 0xff, 0xff}},
		{"trailing bytes", frameBytes(3, append(str(uv(uv(uv(nil, 1), 0), 1), "x"), 0))},
		{"entry that is not a tern entry", frameBytes(3, append(uv(uv(uv(nil, 1), 0), 1), append(uv(nil, uint64(len(junk))), junk...)...))},
		{"ACK from a sender", frameBytes(4, uv(nil, 5))},
	}
	for _, tc := range cases {
		s := l.open(rogue, "eu")
		if _, err := s.Write(tc.frame); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		code, msg := expectError(t, s)
		if code != uint64(replicator.CodeProtocolViolation) {
			t.Fatalf("%s: error code %d (%s), want protocol violation", tc.name, code, msg)
		}
		t.Logf("%s: closed with %q", tc.name, msg)
	}
	// A valid frame carrying a real entry without an origin is refused as well.
	msgs := []protocols.Message{{Timestamp: 1, Value: []byte("forged")}}
	b, _ := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	ent, _ := protocols.AppendEntry(nil, &protocols.Envelope{}, b)
	s := l.open(rogue, "eu")
	if _, err := s.Write(frameBytes(3, append(uv(uv(uv(nil, 1), 0), 1), append(uv(nil, uint64(len(ent))), ent...)...))); err != nil {
		t.Fatal(err)
	}
	if code, msg := expectError(t, s); code != uint64(replicator.CodeProtocolViolation) || !strings.Contains(msg, "no origin") {
		t.Fatalf("entry without origin: %d %q", code, msg)
	}

	// Nothing was written, the connection still works, and real replication carries on.
	if got := hw(eu, protocols.Partition{Topic: topicName(t, "rogue"), Index: -1}); got > 0 {
		t.Fatalf("the rogue peer wrote %d messages", got)
	}
	_ = l.open(rogue, "eu")
	after := produceMany(t, us, p, "us", "v", 10, 10, 1)
	checkExactlyOnce(t, "eu", waitCount(t, eu, p, 20, 20*time.Second), map[string][]string{"us": append(before, after...)})
}
