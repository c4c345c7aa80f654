package pulsar_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/internal/testcluster"
	tp "github.com/ternmq/tern/protocols/pulsar"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// FuzzServerCommands runs arbitrary command sequences against a real node
// over a real socket, after a proper CONNECT. A script is a sequence of
// items
//
//	[u8 flags][u16 command length][command][u16 payload length][payload]
//
// each sent as one frame; a SEND whose flags have bit 0 set gets the payload
// wrapped in a correctly checksummed payload section, so the fuzzer reaches
// the SEND handler and not only the checksum check. The script ends with a
// PING and the client then closes its sending side, so a frame cut short
// ends the stream; the broker must answer the PING (PONG) or close the
// connection, and a new connection must still be served afterwards: no
// input may crash the node or wedge it.
func FuzzServerCommands(f *testing.F) {
	for _, s := range seedScripts(f) {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 3, 8, 2, 0, 0, 0})
	c := testcluster.Start(f)
	addr := c.Node(0).PulsarAddr()
	f.Fuzz(func(t *testing.T, script []byte) {
		conn := dial(t, addr)
		defer conn.Close()
		frames := framesOf(script)
		frames = append(frames, frame(t, &pb.CommandPing{}, nil, false))
		for _, fr := range frames {
			if _, err := conn.Write(fr); err != nil {
				break // the broker closed the connection: allowed
			}
		}
		_ = conn.(*net.TCPConn).CloseWrite()
		awaitPongOrClose(t, conn)
		// The node still serves a fresh connection.
		probe := dial(t, addr)
		defer probe.Close()
		if _, err := probe.Write(frame(t, &pb.CommandPing{}, nil, false)); err != nil {
			t.Fatal(err)
		}
		if !awaitPongOrClose(t, probe) {
			t.Fatal("the node stopped answering PING on a new connection")
		}
	})
}

func dial(t testing.TB, addr string) net.Conn {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(frame(t, &pb.CommandConnect{ClientVersion: proto.String("fuzz"), ProtocolVersion: proto.Int32(20)}, nil, false)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// awaitPongOrClose reads until a PONG (true) or the end of the connection
// (false); it fails the test if neither comes within 10 seconds.
func awaitPongOrClose(t testing.TB, conn net.Conn) bool {
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	fr := tp.NewFrameReader(conn, 64<<20)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the broker neither answered PING nor closed the connection")
			}
			return false
		}
		var cmd pb.BaseCommand
		if err := proto.Unmarshal(f.Command, &cmd); err == nil && cmd.GetType() == pb.BaseCommand_PONG {
			return true
		}
	}
}

// frame encodes one frame; SENDs carry a payload section made of payload
// (checksummed correctly when valid is set).
func frame(t testing.TB, body proto.Message, payload []byte, valid bool) []byte {
	cmd, err := proto.Marshal(tp.NewCommand(body))
	if err != nil {
		t.Fatal(err)
	}
	return rawFrame(cmd, payload, valid)
}

func rawFrame(cmd, payload []byte, section bool) []byte {
	var sec []byte
	if section {
		sec = []byte{0x0e, 0x01, 0, 0, 0, 0}
		sec = append(sec, payload...)
		binary.BigEndian.PutUint32(sec[2:], crc32.Checksum(sec[6:], crc32.MakeTable(crc32.Castagnoli)))
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(cmd)+len(sec)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(cmd)))
	return append(append(b, cmd...), sec...)
}

// framesOf decodes a script into frames; a malformed tail is sent as is.
func framesOf(script []byte) [][]byte {
	var out [][]byte
	for len(script) > 0 {
		if len(script) < 3 {
			out = append(out, script)
			break
		}
		flags := script[0]
		n := int(binary.BigEndian.Uint16(script[1:]))
		script = script[3:]
		if n > len(script) {
			out = append(out, script)
			break
		}
		cmd := script[:n]
		script = script[n:]
		var payload []byte
		if len(script) >= 2 {
			m := int(binary.BigEndian.Uint16(script))
			if m <= len(script)-2 {
				payload = script[2 : 2+m]
				script = script[2+m:]
			}
		}
		var bc pb.BaseCommand
		isSend := proto.Unmarshal(cmd, &bc) == nil && bc.GetType() == pb.BaseCommand_SEND
		out = append(out, rawFrame(cmd, payload, isSend && flags&1 != 0))
	}
	return out
}

// item encodes one script item.
func item(t testing.TB, flags byte, body proto.Message, payload []byte) []byte {
	cmd, err := proto.Marshal(tp.NewCommand(body))
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{flags}
	b = binary.BigEndian.AppendUint16(b, uint16(len(cmd)))
	b = append(b, cmd...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(payload)))
	return append(b, payload...)
}

// metadataAndPayload is [u32 size][MessageMetadata][data].
func metadataAndPayload(t testing.TB, md *pb.MessageMetadata, data []byte) []byte {
	b, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	return append(append(out, b...), data...)
}

func seedScripts(t testing.TB) [][]byte {
	topic := "persistent://public/default/fuzz-seed"
	u64, s := proto.Uint64, proto.String
	md := &pb.MessageMetadata{ProducerName: s("p"), SequenceId: u64(0), PublishTime: u64(1), PartitionKey: s("k")}
	batch := &pb.MessageMetadata{ProducerName: s("p"), SequenceId: u64(1), PublishTime: u64(1), NumMessagesInBatch: proto.Int32(2)}
	single, _ := tp.AppendBatchMessage(nil, pb.SingleMessageMetadata_builder{PartitionKey: s("a")}.Build(), []byte("one"))
	single, _ = tp.AppendBatchMessage(single, pb.SingleMessageMetadata_builder{OrderingKey: []byte("o")}.Build(), []byte("two"))
	id := &pb.MessageIdData{LedgerId: u64(1), EntryId: u64(0)}
	join := func(items ...[]byte) []byte {
		var b []byte
		for _, it := range items {
			b = append(b, it...)
		}
		return b
	}
	produce := join(
		item(t, 0, &pb.CommandPartitionedTopicMetadata{Topic: s(topic), RequestId: u64(1)}, nil),
		item(t, 0, &pb.CommandLookupTopic{Topic: s(topic), RequestId: u64(2)}, nil),
		item(t, 0, &pb.CommandProducer{Topic: s(topic), ProducerId: u64(1), RequestId: u64(3)}, nil),
		item(t, 1, &pb.CommandSend{ProducerId: u64(1), SequenceId: u64(0)}, metadataAndPayload(t, md, []byte("hello"))),
		item(t, 1, &pb.CommandSend{ProducerId: u64(1), SequenceId: u64(1), NumMessages: proto.Int32(2)}, metadataAndPayload(t, batch, single)),
		item(t, 0, &pb.CommandCloseProducer{ProducerId: u64(1), RequestId: u64(4)}, nil),
	)
	consume := join(
		item(t, 0, &pb.CommandSubscribe{Topic: s(topic), Subscription: s("sub"), SubType: pb.CommandSubscribe_Shared.Enum(),
			ConsumerId: u64(1), RequestId: u64(5), InitialPosition: pb.CommandSubscribe_Earliest.Enum()}, nil),
		item(t, 0, &pb.CommandFlow{ConsumerId: u64(1), MessagePermits: proto.Uint32(100)}, nil),
		item(t, 0, &pb.CommandAck{ConsumerId: u64(1), AckType: pb.CommandAck_Individual.Enum(), MessageId: []*pb.MessageIdData{id}}, nil),
		item(t, 0, &pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: u64(1), MessageIds: []*pb.MessageIdData{id}}, nil),
		item(t, 0, &pb.CommandGetLastMessageId{ConsumerId: u64(1), RequestId: u64(6)}, nil),
		item(t, 0, &pb.CommandSeek{ConsumerId: u64(1), RequestId: u64(7), MessageId: id}, nil),
		item(t, 0, &pb.CommandUnsubscribe{ConsumerId: u64(1), RequestId: u64(8)}, nil),
	)
	reader := join(
		item(t, 0, &pb.CommandSubscribe{Topic: s(topic), Subscription: s("reader-x"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
			ConsumerId: u64(2), RequestId: u64(9), Durable: proto.Bool(false), StartMessageId: id}, nil),
		item(t, 0, &pb.CommandFlow{ConsumerId: u64(2), MessagePermits: proto.Uint32(10)}, nil),
		item(t, 0, &pb.CommandAck{ConsumerId: u64(2), AckType: pb.CommandAck_Cumulative.Enum(), MessageId: []*pb.MessageIdData{id}, RequestId: u64(10)}, nil),
		item(t, 0, &pb.CommandSeek{ConsumerId: u64(2), RequestId: u64(11), MessagePublishTime: u64(0)}, nil),
		item(t, 0, &pb.CommandCloseConsumer{ConsumerId: u64(2), RequestId: u64(12)}, nil),
	)
	keyShared := join(
		item(t, 0, &pb.CommandSubscribe{Topic: s(topic), Subscription: s("ks"), SubType: pb.CommandSubscribe_Key_Shared.Enum(),
			ConsumerId: u64(3), RequestId: u64(13), KeySharedMeta: &pb.KeySharedMeta{KeySharedMode: pb.KeySharedMode_STICKY.Enum(),
				HashRanges: []*pb.IntRange{{Start: proto.Int32(0), End: proto.Int32(100)}}}}, nil),
		item(t, 0, &pb.CommandFlow{ConsumerId: u64(3), MessagePermits: proto.Uint32(5)}, nil),
	)
	meta := join(
		item(t, 0, &pb.CommandGetTopicsOfNamespace{RequestId: u64(14), Namespace: s("public/default")}, nil),
		item(t, 0, &pb.CommandGetSchema{RequestId: u64(15), Topic: s(topic)}, nil),
		item(t, 0, &pb.CommandGetOrCreateSchema{RequestId: u64(16), Topic: s(topic), Schema: &pb.Schema{Name: s("x"),
			Type: pb.Schema_Avro.Enum(), SchemaData: []byte(`{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`)}}, nil),
		item(t, 0, &pb.CommandNewTxn{RequestId: u64(17)}, nil),
	)
	return [][]byte{produce, consume, reader, keyShared, meta, join(produce, consume, reader, meta)}
}
