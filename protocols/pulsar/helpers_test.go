package pulsar

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// fill sets every field of m to a value derived from seed and the field
// number, recursing into message fields down to depth levels. Repeated
// fields get two elements. Enums take their last declared value so that the
// value differs from the default.
func fill(m protoreflect.Message, seed, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.Kind() == protoreflect.MessageKind && depth == 0 {
			if fd.Cardinality() == protoreflect.Required {
				fill(m.Mutable(fd).Message(), seed, 0)
			}
			continue
		}
		n := seed*100 + int(fd.Number())
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := range 2 {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(e.Message(), n+j, depth-1)
					l.Append(e)
				} else {
					l.Append(scalar(fd, n+j))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(fd).Message(), n, depth-1)
		default:
			m.Set(fd, scalar(fd, n))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor, n int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(n%2 == 0)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(-n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(-n) << 33)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n) << 40)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) / 4)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) / 4)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", fd.Name(), n))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fmt.Sprintf("\x00\xff%s-%d", fd.Name(), n)))
	}
	panic("unhandled kind " + fd.Kind().String())
}

// allCommandBodies returns one filled body for every command BaseCommand
// can hold, in field order.
func allCommandBodies() []proto.Message {
	var out []proto.Message
	fields := (&pb.BaseCommand{}).ProtoReflect().Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.Kind() != protoreflect.MessageKind {
			continue
		}
		m := (&pb.BaseCommand{}).ProtoReflect().NewField(fd).Message()
		fill(m, int(fd.Number()), 3)
		out = append(out, m.Interface())
	}
	return out
}

func testMetadata(seq uint64) *pb.MessageMetadata {
	return &pb.MessageMetadata{
		ProducerName: proto.String("producer-a"),
		SequenceId:   proto.Uint64(seq),
		PublishTime:  proto.Uint64(1_700_000_000_000 + seq),
		Properties:   []*pb.KeyValue{{Key: proto.String("k"), Value: proto.String("v")}},
		PartitionKey: proto.String("key-1"),
	}
}

func sendCommand(producerID, seq uint64, n int32) *pb.BaseCommand {
	return NewCommand(&pb.CommandSend{
		ProducerId:  proto.Uint64(producerID),
		SequenceId:  proto.Uint64(seq),
		NumMessages: proto.Int32(n),
	})
}

func messageCommand(consumerID, ledger, entry uint64) *pb.BaseCommand {
	return NewCommand(&pb.CommandMessage{
		ConsumerId: proto.Uint64(consumerID),
		MessageId:  &pb.MessageIdData{LedgerId: proto.Uint64(ledger), EntryId: proto.Uint64(entry)},
	})
}

func mustCodec(t testing.TB) *Codec {
	t.Helper()
	c, err := NewCodec(DefaultCodecConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// buildBatch returns a batch payload of n messages with distinct metadata
// and payloads of size bytes each.
func buildBatch(t testing.TB, n, size int) ([]byte, []BatchMessage) {
	t.Helper()
	var data []byte
	var want []BatchMessage
	for i := range n {
		md := pb.SingleMessageMetadata_builder{
			PartitionKey: proto.String(fmt.Sprintf("key-%d", i)),
			SequenceId:   proto.Uint64(uint64(i)),
			EventTime:    proto.Uint64(uint64(1000 + i)),
			Properties:   []*pb.KeyValue{{Key: proto.String("i"), Value: proto.String(fmt.Sprint(i))}},
		}.Build()
		payload := make([]byte, size)
		for j := range payload {
			payload[j] = byte('a' + (i+j/7)%26)
		}
		var err error
		data, err = AppendBatchMessage(data, md, payload)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, BatchMessage{Metadata: md, Payload: payload})
	}
	return data, want
}
