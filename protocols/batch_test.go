package protocols

import (
	"bytes"
	"strings"
	"testing"
)

func TestBatchCodecsRoundTrip(t *testing.T) {
	msgs := []Message{
		{Timestamp: 1000, Key: []byte("key-1"), Value: []byte(strings.Repeat("hello ", 100)), Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}}},
		{Timestamp: 999, Key: nil, Value: []byte{}},
		{Timestamp: 1005, Key: []byte{}, Value: nil},
	}
	var c Compressor
	d := &Decompressor{}
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			b, err := AppendBatch(nil, BatchSpec{Codec: codec, ProducerID: 5, ProducerEpoch: 1, BaseSequence: 10}, msgs, &c)
			if err != nil {
				t.Fatal(err)
			}
			h, err := ValidateBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Codec() != codec || h.NumRecords != 3 || h.LastSequence() != 12 || h.MaxTimestamp != 1005 || h.BaseTimestamp != 1000 {
				t.Fatalf("header %+v", h)
			}
			SetBatchBaseOffset(b, 100)
			SetBatchLeaderEpoch(b, 7)
			h, err = ValidateBatch(b) // rewriting base offset and epoch keeps the CRC valid
			if err != nil || h.BaseOffset != 100 || h.LeaderEpoch != 7 {
				t.Fatalf("after rewrite: %+v %v", h, err)
			}
			got, err := Records(b, h, d)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range got {
				w := msgs[i]
				if m.Offset != 100+int64(i) || m.Timestamp != w.Timestamp || !bytes.Equal(m.Key, w.Key) ||
					(m.Key == nil) != (w.Key == nil) || !bytes.Equal(m.Value, w.Value) || (m.Value == nil) != (w.Value == nil) ||
					len(m.Headers) != len(w.Headers) {
					t.Fatalf("message %d: got %+v want %+v", i, m, w)
				}
			}
		})
	}
}

func TestValidateBatchRejects(t *testing.T) {
	good, _ := AppendBatch(nil, BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []Message{{Value: []byte("x")}, {Value: []byte("y")}}, nil)
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	cases := map[string][]byte{
		"short":         good[:40],
		"length":        mutate(func(b []byte) { b[11]++ }),
		"magic":         mutate(func(b []byte) { b[16] = 1 }),
		"crc":           mutate(func(b []byte) { b[17] ^= 0xff }),
		"payload bit":   mutate(func(b []byte) { b[len(b)-1] ^= 1 }),
		"trailing data": append(bytes.Clone(good), 0),
	}
	for name, b := range cases {
		if _, err := ValidateBatch(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDecompressBomb(t *testing.T) {
	big := bytes.Repeat([]byte{0}, 8<<20)
	var c Compressor
	for _, codec := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		z, err := c.Compress(codec, big)
		if err != nil {
			t.Fatal(err)
		}
		d := &Decompressor{Max: 1 << 20}
		if _, err := d.Decompress(codec, z); err == nil {
			t.Errorf("%s: 8 MiB inflated under a 1 MiB limit", codec)
		}
		d.Max = 16 << 20
		if out, err := d.Decompress(codec, z); err != nil || len(out) != len(big) {
			t.Errorf("%s: %d bytes, %v", codec, len(out), err)
		}
	}
}

func FuzzRecords(f *testing.F) {
	var c Compressor
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		b, _ := AppendBatch(nil, BatchSpec{Codec: codec}, []Message{{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{Key: "h"}}}}, &c)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseBatchHeader(b)
		if err != nil {
			return
		}
		// Decoding must never panic, even without the CRC check.
		_, _ = Records(b, h, &Decompressor{Max: 1 << 20})
	})
}

func TestTopicNames(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"orders", "persistent://public/default/orders", true},
		{"t1/ns1/x", "persistent://t1/ns1/x", true},
		{"persistent://a/b/c-partition-3", "persistent://a/b/c-partition-3", true},
		{"non-persistent://a/b/c", "", false},
		{"a/b", "", false},
		{"a//c", "", false},
		{"bad name", "", false},
		{"persistent://a/b", "", false},
		{strings.Repeat("x", 250), "", false},
	}
	for _, c := range cases {
		got, err := ParseTopicName(c.in, "public/default")
		if (err == nil) != c.ok || (c.ok && got.String() != c.want) {
			t.Errorf("ParseTopicName(%q) = %v, %v; want %q ok=%v", c.in, got, err, c.want, c.ok)
		}
		if b := got.Append([]byte("x")); string(b) != "x"+got.String() {
			t.Errorf("%v: Append gave %q", got, b)
		}
	}
	p, _ := ParseTopicName("a/b/c-partition-12", "")
	base, i := p.PartitionIndex()
	if i != 12 || base.Local != "c" || base.Partition(12) != p {
		t.Fatalf("partition index: %v %d", base, i)
	}
	for _, s := range []string{"c-partition-", "c-partition-x", "c-partition-01", "-partition-1"} {
		n, _ := ParseTopicName(s, "a/b")
		if _, i := n.PartitionIndex(); i != -1 {
			t.Errorf("%q parsed as partition %d", s, i)
		}
	}
}
