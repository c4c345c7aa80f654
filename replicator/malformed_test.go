package replicator

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// A peer with a valid certificate sends malformed frames on several partition streams of one
// connection; each bad stream is closed with an ERROR, while a healthy stream on the same
// connection keeps replicating and the control stream keeps answering.
func TestMalformedFramesCloseOnlyTheirStream(t *testing.T) {
	cfg, logs := testConfig(t, "b1", "eu")
	cfg.MaxFrameBytes = 64 << 10
	cfg.StreamCreditBytes = 64 << 10
	cfg.StreamCreditEntries = 1000
	sink := newSink()
	// Streams of topic "nogrant" only take the initial credit, so a sender can overrun it.
	h := HandlerFunc(func(ctx context.Context, s *RecvStream) error {
		if s.Request().Topic != "nogrant" {
			return sink.Accept(ctx, s)
		}
		for {
			if _, err := s.Recv(ctx); err != nil {
				return nil
			}
		}
	})
	b := startNode(t, cfg, logs, h)
	p, first := dialRaw(t, b.Addr().String(), defaultHello("raw1"))
	if _, ok := first.(helloFrame); !ok {
		t.Fatalf("server answered HELLO with %+v", first)
	}
	if p.hello.Node != "b1" || p.hello.MaxFrame != 64<<10 || p.hello.MinVersion != 1 || p.hello.MaxVersion != 1 {
		t.Fatalf("server HELLO %+v", p.hello)
	}
	ctx := testCtx(t, 30*time.Second)

	good, goodR := p.stream(ctx)
	open := func(topic string) []byte {
		return appendFrame(nil, openFrame{Req: OpenRequest{Topic: topic, Partition: 0, PartitionCount: 1, DestRegion: "eu"}})
	}
	if _, err := good.Write(open("good")); err != nil {
		t.Fatal(err)
	}
	if c := readUntil(t, good, goodR, frameCredit).(creditFrame); c.Credit.Bytes != 64<<10 || c.Credit.Entries != 1000 {
		t.Fatalf("initial credit %+v", c.Credit)
	}
	if _, err := good.Write(appendEntries(nil, entriesOf(0, 10, 100))); err != nil {
		t.Fatal(err)
	}
	if a := readUntil(t, good, goodR, frameAck).(ackFrame); a.Next != 20 {
		t.Fatalf("ack %d, want 20", a.Next)
	}

	valid := appendEntries(nil, entriesOf(0, 2, 10))
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	cases := []struct {
		name string
		open []byte // sent first; the sender then waits for CREDIT like a real one
		bad  []byte
		code ErrorCode
	}{
		{"unknown frame type", open("t"), rawFrame(99, uv(1)), CodeProtocolViolation},
		{"entries larger than the limit", open("t"), header(frameEntries, 64<<10+1), CodeProtocolViolation},
		{"entry count lies", open("t"), rawFrame(frameEntries, uv(1000), uv(1), uv(1), uv(0)), CodeProtocolViolation},
		{"bad varint", open("t"), rawFrame(frameEntries, bytes.Repeat([]byte{0xff}, 12)), CodeProtocolViolation},
		{"entries go backwards across frames", open("t"), cat(valid, appendEntries(nil, entriesOf(1, 1, 10))), CodeProtocolViolation},
		{"entries before the start offset", appendFrame(nil, openFrame{Req: OpenRequest{Topic: "t", PartitionCount: 1, DestRegion: "eu", StartOffset: 50}}), valid, CodeProtocolViolation},
		{"ACK from the sender", open("t"), appendFrame(nil, ackFrame{Next: 1}), CodeProtocolViolation},
		{"truncated frame then FIN", open("t"), valid[:len(valid)-3], CodeProtocolViolation},
		{"HELLO on a partition stream", nil, appendFrame(nil, defaultHello("x")), CodeProtocolViolation},
		{"ENTRIES before OPEN", nil, valid, CodeProtocolViolation},
		{"OPEN with partition past the count", nil, rawFrame(frameOpen, str("t"), uv(4), uv(4), str("eu"), uv(0), uv(0)), CodeProtocolViolation},
		{"garbage header", nil, []byte{0xde, 0xad, 0xbe, 0xef, 0x00, 0x01, 0x02}, CodeProtocolViolation},
		{"credit exceeded", open("nogrant"), cat(appendEntries(nil, entriesOf(0, 60, 1000)), appendEntries(nil, entriesOf(1000, 10, 1000))), CodeCreditExceeded},
	}
	for i, tc := range cases {
		s, r := p.stream(ctx)
		if tc.open != nil {
			if _, err := s.Write(tc.open); err != nil {
				t.Fatalf("%s: write OPEN: %v", tc.name, err)
			}
			readUntil(t, s, r, frameCredit)
		}
		if _, err := s.Write(tc.bad); err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		if strings.HasPrefix(tc.name, "truncated") {
			_ = s.Close()
		}
		e := readUntil(t, s, r, frameError).(errorFrame)
		if e.Code != tc.code || e.Message == "" {
			t.Fatalf("%s: ERROR %d %q, want code %d with a message", tc.name, e.Code, e.Message, tc.code)
		}
		t.Logf("%s -> %s: %s", tc.name, e.Code, e.Message)
		s.CancelWrite(0)
		s.CancelRead(0)

		// The healthy stream on the same connection is unaffected.
		base := int64(100 + 100*i)
		if _, err := good.Write(appendEntries(nil, entriesOf(base, 5, 100))); err != nil {
			t.Fatalf("after %s: healthy stream write: %v", tc.name, err)
		}
		if a := readUntil(t, good, goodR, frameAck).(ackFrame); a.Next != base+10 {
			t.Fatalf("after %s: ack %d, want %d", tc.name, a.Next, base+10)
		}
		if !p.ping(uint64(i + 1)) {
			t.Fatalf("after %s: control stream stopped answering", tc.name)
		}
	}
	if got := len(sink.entries("good/0")); got != 10+5*len(cases) {
		t.Fatalf("healthy stream delivered %d entries, want %d", got, 10+5*len(cases))
	}
	st := linkState(b, "raw1")
	if st.State != LinkUp || st.Connects != 1 {
		t.Fatalf("connection disturbed: %+v", st)
	}
	if n := len(logs.lines("level=WARN", "stream")); n < len(cases) {
		t.Fatalf("%d warnings logged for %d bad streams", n, len(cases))
	}
}

// A malformed frame on the control stream ends the connection (it carries liveness), and the
// node keeps serving others.
func TestMalformedControlFrameClosesConnection(t *testing.T) {
	cfg, logs := testConfig(t, "b1", "eu")
	b := startNode(t, cfg, logs, newSink())
	p, _ := dialRaw(t, b.Addr().String(), defaultHello("raw1"))
	waitFor(t, 5*time.Second, "raw1 up at b", func() bool { return linkState(b, "raw1").State == LinkUp })
	if _, err := p.ctrl.Write(rawFrame(frameEntries, uv(0))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.qc.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection survived a malformed control frame")
	}
	waitFor(t, 5*time.Second, "raw1 down at b", func() bool {
		st := linkState(b, "raw1")
		return st.State == LinkDown && strings.Contains(st.LastError, "malformed")
	})
	// Another peer still gets in.
	if _, f := dialRaw(t, b.Addr().String(), defaultHello("raw2")); f.frameType() != frameHello {
		t.Fatalf("second peer got %+v", f)
	}
}

func TestIncompatibleVersionRefused(t *testing.T) {
	cfg, logs := testConfig(t, "b1", "eu")
	b := startNode(t, cfg, logs, newSink())
	h := defaultHello("future")
	h.MinVersion, h.MaxVersion = 2, 5
	_, f := dialRaw(t, b.Addr().String(), h)
	e, ok := f.(errorFrame)
	if !ok || e.Code != CodeIncompatibleVersion {
		t.Fatalf("answer %+v, want ERROR incompatible version", f)
	}
	if !strings.Contains(e.Message, "1..1") || !strings.Contains(e.Message, "2..5") {
		t.Fatalf("message does not name both version ranges: %q", e.Message)
	}
	t.Logf("refusal: %s", e.Message)

	// A peer offering a range that includes ours gets our version.
	h.MinVersion, h.MaxVersion = 1, 9
	_, f = dialRaw(t, b.Addr().String(), h)
	if hf, ok := f.(helloFrame); !ok || hf.MinVersion != 1 || hf.MaxVersion != 1 {
		t.Fatalf("answer %+v, want HELLO at version 1", f)
	}

	// A peer using this node's own name is refused.
	_, f = dialRaw(t, b.Addr().String(), defaultHello("b1"))
	if e, ok := f.(errorFrame); !ok || e.Code != CodeNameConflict {
		t.Fatalf("answer %+v, want ERROR name conflict", f)
	}
}
