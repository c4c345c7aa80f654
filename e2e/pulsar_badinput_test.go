package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/internal/testcluster"
	tp "github.com/ternmq/tern/protocols/pulsar"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// pulsarRawConn speaks the Pulsar protocol frame by frame with this repository's
// codec, to send what no real client would.
type pulsarRawConn struct {
	t  testing.TB
	c  net.Conn
	fr *tp.FrameReader
}

func dialPulsarRaw(t testing.TB, n *testcluster.Node) *pulsarRawConn {
	t.Helper()
	c, err := net.Dial("tcp", n.PulsarAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &pulsarRawConn{t: t, c: c, fr: tp.NewFrameReader(c, tp.DefaultMaxFrameSize)}
}

func (r *pulsarRawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *pulsarRawConn) cmd(body proto.Message) {
	r.t.Helper()
	b, err := tp.AppendCommand(nil, tp.NewCommand(body))
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(b)
}

// read returns the next command from the broker.
func (r *pulsarRawConn) read() *pb.BaseCommand {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var cmd pb.BaseCommand
	if _, err := r.fr.ReadCommand(&cmd); err != nil {
		r.t.Fatalf("reading from the broker: %v", err)
	}
	return &cmd
}

// closed waits for the broker to close the connection.
func (r *pulsarRawConn) closed() bool {
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		if _, err := r.c.Read(buf); err != nil {
			var ne net.Error
			return errors.Is(err, io.EOF) || !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

func (r *pulsarRawConn) connect() {
	r.t.Helper()
	r.cmd(&pb.CommandConnect{ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(20)})
	if c := r.read(); c.GetType() != pb.BaseCommand_CONNECTED {
		r.t.Fatalf("CONNECT answered with %v", c.GetType())
	}
}

func (r *pulsarRawConn) producer(topic string) {
	r.t.Helper()
	r.cmd(&pb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)})
	if c := r.read(); c.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		r.t.Fatalf("PRODUCER answered with %v %v", c.GetType(), c.GetError())
	}
}

// sendFrame builds a SEND of one message; corrupt flips a payload byte
// after the checksum was computed.
func sendFrame(t testing.TB, seq uint64, payload string, corrupt bool) []byte {
	md := &pb.MessageMetadata{ProducerName: proto.String("raw"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))}
	b, err := tp.AppendPayloadCommand(nil, tp.NewCommand(&pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(seq)}), nil, md, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	if corrupt {
		b[len(b)-1] ^= 0xff
	}
	return b
}

// TestPulsarChecksumMismatch: a SEND whose checksum does not match gets
// SEND_ERROR ChecksumError, writes nothing, and the connection goes on.
func TestPulsarChecksumMismatch(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	topic := newTopic(t, "checksum")
	r := dialPulsarRaw(t, n)
	r.connect()
	r.producer(topic)
	r.write(sendFrame(t, 0, "bad", true))
	reply := r.read()
	if reply.GetType() != pb.BaseCommand_SEND_ERROR || reply.GetSendError().GetError() != pb.ServerError_ChecksumError || reply.GetSendError().GetSequenceId() != 0 {
		t.Fatalf("corrupt SEND answered with %v", reply)
	}
	if got := countMessages(t, n, topic); got != 0 {
		t.Fatalf("%d messages written for a corrupt SEND", got)
	}
	r.write(sendFrame(t, 0, "good", false))
	if reply := r.read(); reply.GetType() != pb.BaseCommand_SEND_RECEIPT {
		t.Fatalf("the resend was answered with %v", reply)
	}
	if got := countMessages(t, n, topic); got != 1 {
		t.Fatalf("%d messages after one good SEND", got)
	}
}

// TestPulsarBadFrames: garbage, a truncated frame, an oversized size
// prefix, a malformed command and a SEND without its payload section each
// close only their own connection, write nothing, and leave a real client
// on the same node working.
func TestPulsarBadFrames(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	cl := newClient(t, n)
	good := newTopic(t, "good")
	victim := newTopic(t, "victim")
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: good, SubscriptionName: "s"})
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: good, DisableBatching: true})

	rng := rand.New(rand.NewPCG(7, 7))
	garbage := make([]byte, 512)
	for i := range garbage {
		garbage[i] = byte(rng.IntN(256))
	}
	size := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	valid := sendFrame(t, 0, "never stored", false)
	cases := map[string]struct {
		connect   bool
		bytes     []byte
		halfClose bool
	}{
		"garbage before CONNECT":   {bytes: garbage},
		"garbage after CONNECT":    {connect: true, bytes: garbage},
		"oversized frame":          {connect: true, bytes: size(1 << 30)},
		"tiny frame":               {connect: true, bytes: append(size(2), 0, 0)},
		"truncated SEND":           {connect: true, bytes: valid[:len(valid)-7], halfClose: true},
		"command size past frame":  {connect: true, bytes: append(size(8), append(size(100), 0, 0, 0, 0)...)},
		"undecodable command":      {connect: true, bytes: append(size(8), append(size(4), 0xff, 0xff, 0xff, 0xff)...)},
		"SEND without a payload":   {connect: true, bytes: mustCommand(t, &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(1)})},
		"payload without checksum": {connect: true, bytes: sendWithoutMagic(t)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := dialPulsarRaw(t, n)
			if tc.connect {
				r.connect()
				r.producer(victim)
			}
			r.write(tc.bytes)
			if tc.halfClose {
				_ = r.c.(*net.TCPConn).CloseWrite()
			}
			if !r.closed() {
				t.Fatal("the broker kept the connection open")
			}
			if tc.connect {
				if got := countMessages(t, n, victim); got != 0 {
					t.Fatalf("%d messages written", got)
				}
			}
			send(t, p, &pulsar.ProducerMessage{Payload: []byte(name)})
			if m := receive(t, cons, 10*time.Second); string(m.Payload()) != name {
				t.Fatalf("the real client got %q", m.Payload())
			} else {
				_ = cons.Ack(m)
			}
		})
	}
}

// mustCommand frames a command with no payload section, whatever its type
// (the codec refuses to write a SEND without one).
func mustCommand(t testing.TB, body proto.Message) []byte {
	cmd, err := proto.Marshal(tp.NewCommand(body))
	if err != nil {
		t.Fatal(err)
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(cmd)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(cmd)))
	return append(b, cmd...)
}

// sendWithoutMagic is a SEND whose payload section lacks the 0x0e01 magic.
func sendWithoutMagic(t testing.TB) []byte {
	cmd, err := proto.Marshal(tp.NewCommand(&pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(1)}))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'x'}
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(cmd)+len(payload)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(cmd)))
	b = append(b, cmd...)
	return append(b, payload...)
}

// TestPulsarConnectionQueueBounded: a consumer that grants 40 MB of
// permits and does not read its socket gets no more queued for it than
// about 4 MiB; the node holds it back meanwhile, and once it reads, every
// message arrives, in order.
func TestPulsarConnectionQueueBounded(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	cl := newClient(t, n)
	topic := newTopic(t, "queuebound")
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 100, BatchingMaxSize: 1 << 20, MaxPendingMessages: 10000})
	const msgs, size = 40000, 1000
	sendAsyncAll(t, p, msgs, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Payload: bytes.Repeat([]byte{byte(i)}, size)}
	})

	r := dialPulsarRaw(t, n)
	r.connect()
	r.cmd(&pb.CommandSubscribe{Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(2), InitialPosition: pb.CommandSubscribe_Earliest.Enum()})
	if cmd := r.read(); cmd.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("SUBSCRIBE answered with %v", cmd)
	}
	r.cmd(&pb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(msgs)})

	// Not reading: the socket's buffers fill, then the connection's queue.
	deadline := time.Now().Add(10 * time.Second)
	for scrapeValue(t, n, "tern_pulsar_held_consumers_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the consumer was never held back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	// The bound, and one batch of 100 messages over it.
	if q := scrapeValue(t, n, "tern_pulsar_queued_bytes"); q > 4<<20+100*(size+64) {
		t.Fatalf("%v bytes queued for a consumer that does not read", q)
	}

	next := int64(0)
	for next < msgs {
		var cmd pb.BaseCommand
		_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		pl, err := r.fr.ReadCommand(&cmd)
		if err != nil {
			t.Fatalf("after %d messages: %v", next, err)
		}
		if cmd.GetType() != pb.BaseCommand_MESSAGE {
			continue
		}
		var md pb.MessageMetadata
		if err := pl.DecodeMetadata(&md); err != nil {
			t.Fatal(err)
		}
		if id := int64(cmd.GetMessage().GetMessageId().GetEntryId()); id != next {
			t.Fatalf("MESSAGE at entry %d, want %d", id, next)
		}
		next += int64(max(md.GetNumMessagesInBatch(), 1))
	}
	if q := scrapeValue(t, n, "tern_pulsar_queued_bytes"); q != 0 {
		t.Errorf("%v bytes still queued after every message was read", q)
	}
}
