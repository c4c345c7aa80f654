package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestFrame encodes req as a frame body (no size prefix), as clients do.
func requestFrame(req kmsg.Request, clientID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func testBatch(t testing.TB, codec protocols.Codec, n int) []byte {
	msgs := make([]protocols.Message, n)
	for i := range msgs {
		msgs[i] = protocols.Message{Timestamp: int64(i), Key: []byte{byte(i)}, Value: []byte("value"), Headers: []protocols.Header{{Key: "h", Value: []byte{1}}}}
	}
	b, err := protocols.AppendBatch(nil, protocols.BatchSpec{Codec: codec, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, &protocols.Compressor{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seedRequests(t testing.TB) [][]byte {
	var out [][]byte
	add := func(req kmsg.Request, versions ...int16) {
		for _, v := range versions {
			req.SetVersion(v)
			out = append(out, requestFrame(req, "fuzz"))
		}
	}
	add(kmsg.NewPtrApiVersionsRequest(), 0, 3, 9)
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	add(md, 0, 4, 9, 12)
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks = -1
	pr.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: testBatch(t, protocols.CodecNone, 2)}}}}
	add(pr, 3, 7, 9, 11)
	fr := kmsg.NewPtrFetchRequest()
	fr.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{FetchOffset: 1, PartitionMaxBytes: 100}}}}
	add(fr, 4, 11, 12)
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType = "g", "consumer"
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	add(jg, 0, 5, 7)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = "g"
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 5}}}}
	add(oc, 2, 8)
	add(kmsg.NewPtrCreateTopicsRequest(), 0, 5)
	return out
}

// FuzzDecodeRequest: no frame makes request decoding panic; frames that
// decode re-encode at the same version.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedRequests(f) {
		f.Add(s)
		f.Add(s[:len(s)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0xff})
	f.Add([]byte{0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, fallback, err := decodeRequest(frame)
		if err != nil || fallback != nil {
			return
		}
		if req.Key() != h.key || req.GetVersion() != h.version {
			t.Fatalf("decoded %d v%d from a %d v%d header", req.Key(), req.GetVersion(), h.key, h.version)
		}
		_ = req.AppendTo(nil)
	})
}

// FuzzValidateBatch: no produced batch makes validation panic, and a batch
// it accepts decodes record by record.
func FuzzValidateBatch(f *testing.F) {
	for _, c := range []protocols.Codec{protocols.CodecNone, protocols.CodecGzip, protocols.CodecSnappy, protocols.CodecLZ4, protocols.CodecZstd} {
		f.Add(testBatch(f, c, 3))
	}
	b := testBatch(f, protocols.CodecNone, 1)
	f.Add(b[:len(b)-1])
	f.Add(make([]byte, protocols.BatchHeaderSize))
	f.Fuzz(func(t *testing.T, batch []byte) {
		c := &conn{}
		h, err := c.validateBatch(batch, 7)
		if err != nil {
			return
		}
		msgs, err := protocols.Records(batch, h, &protocols.Decompressor{})
		if err != nil {
			t.Fatalf("validated batch does not decode: %v", err)
		}
		if len(msgs) != int(h.NumRecords) {
			t.Fatalf("%d records decoded, header says %d", len(msgs), h.NumRecords)
		}
	})
}
