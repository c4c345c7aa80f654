package pulsar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// These tests put the real Pulsar Go client on one end of a loopback TCP
// connection and this package's codec on the other. A small scripted
// broker answers the handshake, lookup, producer and consumer commands just
// well enough for the client to produce and consume, so every byte the
// client sends is decoded here and every byte it receives is encoded here.

// scriptBroker is a test peer built only from the codec under test.
type scriptBroker struct {
	t     *testing.T
	ln    net.Listener
	codec *Codec
	url   string

	connects chan []byte // CONNECT frames as received, size prefix included
	pings    chan []byte // PING frames as received
	sends    chan receivedSend
	flows    chan *pb.CommandFlow
	acks     chan *pb.CommandAck

	mu    sync.Mutex
	conns []*scriptConn
	entry uint64
	wg    sync.WaitGroup
}

type receivedSend struct {
	send     *pb.CommandSend
	metadata *pb.MessageMetadata
	// section is the checksummed payload section, as a broker would store it.
	section []byte
	// messages are the messages decoded from the (decompressed) payload.
	messages []BatchMessage
}

type scriptConn struct {
	c   net.Conn
	mu  sync.Mutex
	buf []byte
}

// write sends one frame built by build; it serialises writers on the conn.
func (sc *scriptConn) write(build func([]byte) ([]byte, error)) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var err error
	if sc.buf, err = build(sc.buf[:0]); err != nil {
		return err
	}
	_, err = sc.c.Write(sc.buf)
	return err
}

func (sc *scriptConn) reply(body proto.Message) error {
	return sc.write(func(b []byte) ([]byte, error) { return AppendCommand(b, NewCommand(body)) })
}

func startScriptBroker(t *testing.T) *scriptBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &scriptBroker{
		t: t, ln: ln, codec: mustCodec(t),
		url:      "pulsar://" + ln.Addr().String(),
		connects: make(chan []byte, 4),
		pings:    make(chan []byte, 64),
		sends:    make(chan receivedSend, 64),
		flows:    make(chan *pb.CommandFlow, 16),
		acks:     make(chan *pb.CommandAck, 64),
		entry:    100,
	}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			_ = c.c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *scriptBroker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		sc := &scriptConn{c: c}
		b.mu.Lock()
		b.conns = append(b.conns, sc)
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(sc)
	}
}

// lastConn returns the most recent client connection.
func (b *scriptBroker) lastConn() *scriptConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns[len(b.conns)-1]
}

func (b *scriptBroker) serve(sc *scriptConn) {
	defer b.wg.Done()
	fr := NewFrameReader(sc.c, DefaultMaxFrameSize)
	var cmd pb.BaseCommand
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !closedConn(err) {
				b.t.Errorf("reading from the client: %v", err)
			}
			return
		}
		p, err := DecodeFrame(f, &cmd)
		if err != nil {
			b.t.Errorf("decoding a %d-byte frame from the client: %v", len(f.Command), err)
			return
		}
		if err := b.handle(sc, &cmd, f, p); err != nil {
			// A reply that meets a connection closed by the test's end
			// (the client going away mid-PING) is no failure.
			if !closedConn(err) {
				b.t.Errorf("%s: %v", cmd.GetType(), err)
			}
			return
		}
	}
}

// closedConn reports an error from a connection that was closed, by us or
// by the client.
func closedConn(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

func (b *scriptBroker) handle(sc *scriptConn, cmd *pb.BaseCommand, f Frame, p Payload) error {
	switch cmd.GetType() {
	case pb.BaseCommand_CONNECT:
		b.connects <- rawFrame(f)
		return sc.reply(&pb.CommandConnected{
			ServerVersion:   proto.String("tern-codec-test"),
			ProtocolVersion: proto.Int32(min(20, cmd.GetConnect().GetProtocolVersion())),
			MaxMessageSize:  proto.Int32(DefaultMaxMessageSize),
		})
	case pb.BaseCommand_PING:
		select {
		case b.pings <- rawFrame(f):
		default:
		}
		return sc.reply(&pb.CommandPong{})
	case pb.BaseCommand_PONG:
		return nil
	case pb.BaseCommand_PARTITIONED_METADATA:
		return sc.reply(&pb.CommandPartitionedTopicMetadataResponse{
			RequestId:  proto.Uint64(cmd.GetPartitionMetadata().GetRequestId()),
			Partitions: proto.Uint32(0),
			Response:   pb.CommandPartitionedTopicMetadataResponse_Success.Enum(),
		})
	case pb.BaseCommand_LOOKUP:
		return sc.reply(&pb.CommandLookupTopicResponse{
			RequestId:        proto.Uint64(cmd.GetLookupTopic().GetRequestId()),
			Response:         pb.CommandLookupTopicResponse_Connect.Enum(),
			BrokerServiceUrl: proto.String(b.url),
			Authoritative:    proto.Bool(true),
		})
	case pb.BaseCommand_PRODUCER:
		return sc.reply(&pb.CommandProducerSuccess{
			RequestId:      proto.Uint64(cmd.GetProducer().GetRequestId()),
			ProducerName:   proto.String("codec-test-0"),
			LastSequenceId: proto.Int64(-1),
		})
	case pb.BaseCommand_SEND:
		rs, err := b.decodeSend(cmd, p)
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.entry++
		entry := b.entry
		b.mu.Unlock()
		b.sends <- rs
		return sc.reply(&pb.CommandSendReceipt{
			ProducerId: proto.Uint64(rs.send.GetProducerId()),
			SequenceId: proto.Uint64(rs.send.GetSequenceId()),
			MessageId:  &pb.MessageIdData{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(entry)},
		})
	case pb.BaseCommand_SUBSCRIBE:
		return sc.reply(&pb.CommandSuccess{RequestId: proto.Uint64(cmd.GetSubscribe().GetRequestId())})
	case pb.BaseCommand_FLOW:
		b.flows <- proto.Clone(cmd.GetFlow()).(*pb.CommandFlow)
		return nil
	case pb.BaseCommand_ACK:
		b.acks <- proto.Clone(cmd.GetAck()).(*pb.CommandAck)
		return nil
	case pb.BaseCommand_CLOSE_PRODUCER:
		return sc.reply(&pb.CommandSuccess{RequestId: proto.Uint64(cmd.GetCloseProducer().GetRequestId())})
	case pb.BaseCommand_CLOSE_CONSUMER:
		return sc.reply(&pb.CommandSuccess{RequestId: proto.Uint64(cmd.GetCloseConsumer().GetRequestId())})
	}
	return fmt.Errorf("the script has no answer for %v", cmd)
}

// rawFrame restores the wire bytes of a frame without payload.
func rawFrame(f Frame) []byte {
	raw := append(u32(uint32(4+len(f.Command))), u32(uint32(len(f.Command)))...)
	return append(raw, f.Command...)
}

func (b *scriptBroker) decodeSend(cmd *pb.BaseCommand, p Payload) (receivedSend, error) {
	rs := receivedSend{send: proto.Clone(cmd.GetSend()).(*pb.CommandSend), metadata: &pb.MessageMetadata{}}
	rs.section = bytes.Clone(p.Checksummed)
	if err := p.DecodeMetadata(rs.metadata); err != nil {
		return rs, err
	}
	plain, err := b.codec.DecompressPayload(nil, rs.metadata, p.Data)
	if err != nil {
		return rs, err
	}
	if !IsBatch(rs.metadata) {
		rs.messages = []BatchMessage{{Payload: bytes.Clone(plain)}}
		return rs, nil
	}
	msgs, err := ParseBatch(bytes.Clone(plain), int(rs.metadata.GetNumMessagesInBatch()))
	rs.messages = msgs
	return rs, err
}

func newTestClient(t *testing.T, url string, keepAlive time.Duration) pulsar.Client {
	t.Helper()
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               url,
		ConnectionTimeout: 5 * time.Second,
		OperationTimeout:  10 * time.Second,
		KeepAliveInterval: keepAlive,
		Logger:            plog.DefaultNopLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
	}
	panic("unreachable")
}

// TestClientConnectBytes accepts a real client connection and compares its
// CONNECT and PING frames with the hand-computed golden frames.
func TestClientConnectBytes(t *testing.T) {
	b := startScriptBroker(t)
	client := newTestClient(t, b.url, 100*time.Millisecond)
	// Listing partitions is the cheapest operation that opens a connection.
	if _, err := client.TopicPartitions("persistent://public/default/codec-connect"); err != nil {
		t.Fatal(err)
	}
	got := recv(t, b.connects, "CONNECT")
	// The client reports its module version from the binary's build
	// information, which a test binary lacks; then it says "version-unknown".
	version := "Pulsar-Go-v0.19.0"
	if bytes.Contains(got, []byte("Pulsar-Go-version-unknown")) {
		version = "Pulsar-Go-version-unknown"
	}
	want := connectFrameFor(version)
	if !bytes.Equal(got, want) {
		t.Fatalf("client CONNECT\n got % x\nwant % x", got, want)
	}
	var cmd pb.BaseCommand
	if err := DecodeCommand(got[8:], &cmd); err != nil {
		t.Fatal(err)
	}
	// Re-encoding what we decoded gives the client's bytes back.
	again, err := AppendCommand(nil, &cmd)
	if err != nil || !bytes.Equal(again, got) {
		t.Fatalf("re-encoded CONNECT differs: %v\n% x", err, again)
	}
	// With a short keep-alive interval the client pings soon; our PONGs
	// keep it connected, so it pings again.
	for range 2 {
		if ping := recv(t, b.pings, "PING"); !bytes.Equal(ping, unhex(t, goldenPing)) {
			t.Fatalf("client PING\n got % x\nwant %s", ping, goldenPing)
		}
	}
}

// TestClientProduce has the real client produce batched and unbatched
// messages under every codec it offers and decodes them with this package.
func TestClientProduce(t *testing.T) {
	b := startScriptBroker(t)
	client := newTestClient(t, b.url, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	codecs := map[pulsar.CompressionType]pb.CompressionType{
		pulsar.NoCompression: pb.CompressionType_NONE, pulsar.LZ4: pb.CompressionType_LZ4,
		pulsar.ZLib: pb.CompressionType_ZLIB, pulsar.ZSTD: pb.CompressionType_ZSTD,
	}
	for clientCT, ct := range codecs {
		for _, batched := range []bool{true, false} {
			name := fmt.Sprintf("%s/batched=%v", ct, batched)
			topic := "persistent://public/default/codec-produce-" + strings.ToLower(ct.String())
			producer, err := client.CreateProducer(pulsar.ProducerOptions{
				Topic:                   topic,
				CompressionType:         clientCT,
				DisableBatching:         !batched,
				BatchingMaxMessages:     5,
				BatchingMaxPublishDelay: time.Hour,
			})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			n := 5
			if !batched {
				n = 1
			}
			payload := func(i int) []byte {
				return bytes.Repeat([]byte(fmt.Sprintf("%s message %d; ", ct, i)), 200)
			}
			var wg sync.WaitGroup
			ids := make([]pulsar.MessageID, n)
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				producer.SendAsync(ctx, &pulsar.ProducerMessage{
					Payload:    payload(i),
					Key:        fmt.Sprintf("key-%d", i),
					Properties: map[string]string{"i": fmt.Sprint(i)},
				}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					ids[i], errs[i] = id, err
					wg.Done()
				})
			}
			if err := producer.FlushWithCtx(ctx); err != nil {
				t.Fatalf("%s: flush: %v", name, err)
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("%s: message %d: %v", name, i, err)
				}
			}
			rs := recv(t, b.sends, "SEND")
			if got := rs.metadata.GetCompression(); got != ct {
				t.Fatalf("%s: metadata says %s", name, got)
			}
			if len(rs.messages) != n || rs.send.GetNumMessages() != int32(n) {
				t.Fatalf("%s: %d messages decoded, SEND says %d", name, len(rs.messages), rs.send.GetNumMessages())
			}
			for i, m := range rs.messages {
				if !bytes.Equal(m.Payload, payload(i)) {
					t.Fatalf("%s: message %d payload differs", name, i)
				}
				key, props := rs.metadata.GetPartitionKey(), rs.metadata.GetProperties()
				if m.Metadata != nil {
					key, props = m.Metadata.GetPartitionKey(), m.Metadata.GetProperties()
				}
				if key != fmt.Sprintf("key-%d", i) || len(props) != 1 || props[0].GetValue() != fmt.Sprint(i) {
					t.Fatalf("%s: message %d key %q properties %v", name, i, key, props)
				}
			}
			// The receipt's id reached the client.
			if ids[0].LedgerID() != 1 || ids[0].EntryID() <= 100 {
				t.Fatalf("%s: client got id %v", name, ids[0])
			}
			producer.Close()
			t.Logf("%s: %d messages, %d payload bytes on the wire, batch container %v",
				name, n, len(rs.section), IsBatch(rs.metadata))
		}
	}
}

// TestClientConsume has the real client consume MESSAGE frames built by
// this package: unbatched, batched and compressed with broker entry
// metadata, built in place with Start/Finish, and a SEND payload the client
// produced, passed back unchanged.
func TestClientConsume(t *testing.T) {
	b := startScriptBroker(t)
	client := newTestClient(t, b.url, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "persistent://public/default/codec-consume"

	// First let the client produce a ZLIB batch of 3, to be sent back as is.
	producer, err := client.CreateProducer(pulsar.ProducerOptions{
		Topic: topic, CompressionType: pulsar.ZLib, BatchingMaxMessages: 3, BatchingMaxPublishDelay: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		producer.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("echo %d", i)), Key: "echo"},
			func(pulsar.MessageID, *pulsar.ProducerMessage, error) {})
	}
	if err := producer.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	echo := recv(t, b.sends, "SEND")
	producer.Close()

	consumer, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sub", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	flow := recv(t, b.flows, "FLOW")
	if flow.GetMessagePermits() == 0 {
		t.Fatalf("FLOW with no permits: %v", flow)
	}
	sc := b.lastConn()
	cid := flow.GetConsumerId()
	msgCmd := func(entry uint64) *pb.BaseCommand {
		return NewCommand(&pb.CommandMessage{
			ConsumerId: proto.Uint64(cid),
			MessageId:  &pb.MessageIdData{LedgerId: proto.Uint64(3), EntryId: proto.Uint64(entry)},
		})
	}
	publish := uint64(time.Now().UnixMilli())

	// Entry 10: one message, not a batch.
	single := testMetadata(0)
	single.PublishTime = proto.Uint64(publish)
	if err := sc.write(func(dst []byte) ([]byte, error) {
		return AppendPayloadCommand(dst, msgCmd(10), nil, single, []byte("single"))
	}); err != nil {
		t.Fatal(err)
	}

	// Entry 11: ZSTD batch of 3 with broker entry metadata.
	batch, items := buildBatch(t, 3, 40)
	bmd := testMetadata(1)
	bmd.PublishTime = proto.Uint64(publish)
	bmd.NumMessagesInBatch = proto.Int32(3)
	bmd.Compression = pb.CompressionType_ZSTD.Enum()
	bmd.UncompressedSize = proto.Uint32(uint32(len(batch)))
	compressed, err := b.codec.Compress(nil, pb.CompressionType_ZSTD, batch)
	if err != nil {
		t.Fatal(err)
	}
	brokerTime := publish + 5
	if err := sc.write(func(dst []byte) ([]byte, error) {
		return AppendPayloadCommand(dst, msgCmd(11), NewBrokerEntryMetadata(brokerTime, 102), bmd, compressed)
	}); err != nil {
		t.Fatal(err)
	}

	// Entry 12: LZ4 batch of 2 compressed straight into the frame.
	batch2, items2 := buildBatch(t, 2, 1000)
	lmd := testMetadata(2)
	lmd.PublishTime = proto.Uint64(publish)
	lmd.NumMessagesInBatch = proto.Int32(2)
	lmd.Compression = pb.CompressionType_LZ4.Enum()
	lmd.UncompressedSize = proto.Uint32(uint32(len(batch2)))
	if err := sc.write(func(dst []byte) ([]byte, error) {
		dst, mark, err := StartPayloadCommand(dst, msgCmd(12), nil, lmd)
		if err != nil {
			return dst, err
		}
		if dst, err = b.codec.Compress(dst, pb.CompressionType_LZ4, batch2); err != nil {
			return dst, err
		}
		return FinishPayloadCommand(dst, mark)
	}); err != nil {
		t.Fatal(err)
	}

	// Entry 13: the client's own SEND section, unchanged.
	if err := sc.write(func(dst []byte) ([]byte, error) {
		return AppendChecksummedPayloadCommand(dst, msgCmd(13), NewBrokerEntryMetadata(brokerTime, 7), echo.section)
	}); err != nil {
		t.Fatal(err)
	}

	type want struct {
		entry   int64
		batch   int32
		payload []byte
		key     string
		index   int64 // -1: no broker entry metadata
	}
	var wants []want
	// The Go client numbers a lone message as index 0 of a batch of one.
	wants = append(wants, want{10, 0, []byte("single"), "key-1", -1})
	for i, it := range items {
		wants = append(wants, want{11, int32(i), it.Payload, it.Metadata.GetPartitionKey(), int64(100 + i)})
	}
	for i, it := range items2 {
		wants = append(wants, want{12, int32(i), it.Payload, it.Metadata.GetPartitionKey(), -1})
	}
	for i := range 3 {
		wants = append(wants, want{13, int32(i), []byte(fmt.Sprintf("echo %d", i)), "echo", int64(5 + i)})
	}
	for _, w := range wants {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		msg, err := consumer.Receive(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("waiting for entry %d/%d: %v", w.entry, w.batch, err)
		}
		id := msg.ID()
		if id.LedgerID() != 3 || id.EntryID() != w.entry || id.BatchIdx() != w.batch {
			t.Fatalf("got id %v, want 3:%d:%d", id, w.entry, w.batch)
		}
		if !bytes.Equal(msg.Payload(), w.payload) || msg.Key() != w.key {
			t.Fatalf("entry %d/%d: payload %q key %q", w.entry, w.batch, msg.Payload(), msg.Key())
		}
		if w.index >= 0 {
			if msg.Index() == nil || int64(*msg.Index()) != w.index || msg.BrokerPublishTime() == nil ||
				msg.BrokerPublishTime().UnixMilli() != int64(brokerTime) {
				t.Fatalf("entry %d/%d: index %v broker time %v", w.entry, w.batch, msg.Index(), msg.BrokerPublishTime())
			}
		} else if msg.Index() != nil {
			t.Fatalf("entry %d/%d: index %d without broker entry metadata", w.entry, w.batch, *msg.Index())
		}
		if err := consumer.Ack(msg); err != nil {
			t.Fatal(err)
		}
	}

	// The client's acks come back through the codec too.
	acked := map[uint64]bool{}
	deadline := time.After(10 * time.Second)
	for len(acked) < 4 {
		select {
		case a := <-b.acks:
			for _, id := range a.GetMessageId() {
				acked[id.GetEntryId()] = true
			}
		case <-deadline:
			t.Fatalf("acked entries %v, want 10-13", acked)
		}
	}
	for e := uint64(10); e <= 13; e++ {
		if !acked[e] {
			t.Fatalf("entry %d not acked: %v", e, acked)
		}
	}
}
