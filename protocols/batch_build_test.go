package protocols

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// referenceBatch encodes a batch the plain way, through kmsg.RecordBatch,
// to pin AppendBatch's output byte for byte.
func referenceBatch(spec BatchSpec, msgs []Message, c *Compressor) []byte {
	base := msgs[0].Timestamp
	maxTs := base
	var records []byte
	for i, m := range msgs {
		maxTs = max(maxTs, m.Timestamp)
		rec := kmsg.Record{TimestampDelta64: m.Timestamp - base, OffsetDelta: int32(i), Key: m.Key, Value: m.Value}
		for _, h := range m.Headers {
			rec.Headers = append(rec.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		// kmsg's own encoding gives the length: the body encoded behind a
		// zero length (one byte).
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		records = rec.AppendTo(records)
	}
	attrs := int16(spec.Codec) & AttrCodecMask
	if spec.Codec != CodecNone {
		records, _ = c.Compress(spec.Codec, records)
	}
	if spec.Transactional {
		attrs |= AttrTransactional
	}
	rb := kmsg.RecordBatch{
		Length: int32(BatchHeaderSize - 12 + len(records)), PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(len(msgs) - 1), FirstTimestamp: base, MaxTimestamp: maxTs,
		ProducerID: spec.ProducerID, ProducerEpoch: spec.ProducerEpoch, FirstSequence: spec.BaseSequence,
		NumRecords: int32(len(msgs)), Records: records,
	}
	out := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[batchCRCAt:], crc32.Checksum(out[batchAttributesAt:], castagnoli))
	return out
}

func TestAppendBatchMatchesReference(t *testing.T) {
	var msgs []Message
	for i := 0; i < 300; i++ {
		m := Message{Timestamp: 1_700_000_000_000 + int64(i%7)*1000 - 3000, Value: bytes.Repeat([]byte{byte(i)}, i*3)}
		if i%3 == 0 {
			m.Key = []byte(fmt.Sprint("key", i))
		}
		if i%5 == 0 {
			m.Value = nil
		}
		if i%4 == 0 {
			m.Headers = []Header{{Key: "h", Value: []byte("v")}, {Key: "empty", Value: nil}}
		}
		msgs = append(msgs, m)
	}
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		for _, n := range []int{1, 2, 300} {
			for _, spec := range []BatchSpec{
				{Codec: codec, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
				{Codec: codec, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 1 << 30, Transactional: true},
			} {
				c := &Compressor{}
				want := referenceBatch(spec, msgs[:n], c)
				prefix := []byte("prefix")
				got, err := AppendBatch(append([]byte(nil), prefix...), spec, msgs[:n], c)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(got, prefix) {
					t.Fatal("AppendBatch changed what dst held")
				}
				// Compressors are deterministic for one input, so the bytes
				// must agree exactly.
				if !bytes.Equal(got[len(prefix):], want) {
					t.Fatalf("%v, %d messages, %+v: AppendBatch differs from the reference encoding", codec, n, spec)
				}
				h, err := ValidateBatch(got[len(prefix):])
				if err != nil || h.NumRecords != int32(n) {
					t.Fatalf("%v: %v %+v", codec, err, h)
				}
			}
		}
	}
}

// BenchmarkAppendBatch builds the batch a Pulsar SEND of 128 x 1 KiB
// messages becomes, with and without a property on each message: the
// broker's per-message cost of turning Pulsar batches into stored ones.
// MB/s counts value bytes.
func BenchmarkAppendBatch(b *testing.B) {
	for _, props := range []int{0, 2} {
		b.Run(fmt.Sprintf("props=%d", props), func(b *testing.B) {
			msgs := make([]Message, 128)
			value := bytes.Repeat([]byte{7}, 1024)
			for i := range msgs {
				msgs[i] = Message{Timestamp: 1_700_000_000_000 + int64(i), Value: value}
				for j := range props {
					msgs[i].Headers = append(msgs[i].Headers, Header{Key: fmt.Sprint("k", j), Value: []byte("value")})
				}
			}
			spec := BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
			var c Compressor
			var dst []byte
			b.SetBytes(int64(len(msgs) * len(value)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				dst, err = AppendBatch(dst[:0], spec, msgs, &c)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
