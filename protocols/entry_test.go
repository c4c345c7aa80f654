package protocols

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// TestEnvelopeGolden pins the envelope byte layout: changing it is a storage
// format change.
func TestEnvelopeGolden(t *testing.T) {
	env := Envelope{
		AppendTime:    0x0102,
		OriginRegion:  "us",
		OriginOffset:  7,
		Visited:       []string{"eu"},
		ProducerName:  "p",
		SequenceFirst: 1,
		SequenceLast:  2,
		SchemaVersion: []byte{9},
		Txn:           true,
		TxnHigh:       3,
		TxnLow:        4,
		Attrs:         []Attr{{Key: "d", Value: []byte{5}}},
	}
	got, err := AppendEntry(nil, &env, []byte{0xaa})
	if err != nil {
		t.Fatal(err)
	}
	want := "01" + "1f" + "0049" + "0000000000000102" + // version, flags, length 73, append time
		"02" + "7573" + "0000000000000007" + "01" + "02" + "6575" + // origin us@7, visited [eu]
		"0001" + "70" + "0000000000000001" + "0000000000000002" + // producer p, seq 1..2
		"0001" + "09" + // schema version
		"0000000000000003" + "0000000000000004" + // txn
		"01" + "01" + "64" + "00000001" + "05" + // attrs d=05
		"aa" // the batch
	if h := hex.EncodeToString(got); h != want {
		t.Fatalf("envelope\n got %s\nwant %s", h, want)
	}
	var back Envelope
	if err := decodeEnvelope(got[:len(got)-1], &back); err != nil {
		t.Fatal(err)
	}
	if back.OriginRegion != "us" || back.Visited[0] != "eu" || back.ProducerName != "p" || back.SequenceLast != 2 ||
		!back.Txn || back.TxnLow != 4 || !bytes.Equal(back.SchemaVersion, []byte{9}) {
		t.Fatalf("round trip: %+v", back)
	}
	if v, ok := back.Attr("d"); !ok || v[0] != 5 {
		t.Fatalf("attr d: %v %v", v, ok)
	}
	// The minimal envelope: 12 bytes.
	min, _ := AppendEntry(nil, &Envelope{}, nil)
	if hex.EncodeToString(min) != "0100000c0000000000000000" {
		t.Fatalf("empty envelope %x", min)
	}
}

func TestEntryRoundTripAndStamp(t *testing.T) {
	batch, err := AppendBatch(nil, BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]Message{{Timestamp: 10, Key: []byte("k"), Value: []byte("v")}, {Timestamp: 12, Value: nil}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := AppendEntry(nil, &Envelope{ProducerName: "prod"}, batch)
	if err != nil {
		t.Fatal(err)
	}
	if err := StampEntry(e, 42, 777); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.BaseOffset != 42 || got.Envelope.AppendTime != 777 || got.Envelope.ProducerName != "prod" {
		t.Fatalf("decoded %+v", got)
	}
	msgs, err := Records(got.Batch, got.Header, &Decompressor{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Offset != 42 || msgs[1].Offset != 43 || string(msgs[0].Key) != "k" ||
		msgs[1].Value != nil || msgs[1].Timestamp != 12 || msgs[1].Key != nil {
		t.Fatalf("records %+v", msgs)
	}
	// A flipped bit in the CRC-covered part is caught.
	bad := bytes.Clone(e)
	bad[len(bad)-1] ^= 1
	if _, err := DecodeEntry(bad); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("corrupt batch: %v", err)
	}
	// DecodeStoredEntry leaves the CRC to the store, which checked the
	// bytes as it read them: it decodes the flipped entry, and the sound
	// one as DecodeEntry does.
	if st, err := DecodeStoredEntry(e); err != nil || st.Header != got.Header || st.Envelope.ProducerName != "prod" {
		t.Fatalf("stored entry: %+v %v", st, err)
	}
	if _, err := DecodeStoredEntry(bad); err != nil {
		t.Fatalf("stored entry with a flipped bit: %v", err)
	}
	// Every truncation fails cleanly.
	for i := 0; i < len(e); i++ {
		if _, err := DecodeEntry(e[:i]); err == nil {
			t.Fatalf("entry truncated to %d bytes decoded", i)
		}
		if _, err := DecodeStoredEntry(e[:i]); err == nil {
			t.Fatalf("stored entry truncated to %d bytes decoded", i)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	batch, _ := AppendBatch(nil, BatchSpec{ProducerID: 1, BaseSequence: 0},
		[]Message{{Value: []byte("a"), Headers: []Header{{Key: "h", Value: []byte("1")}}}}, nil)
	full, _ := AppendEntry(nil, &Envelope{OriginRegion: "us", Visited: []string{"a", "b"}, ProducerName: "p",
		Attrs: []Attr{{Key: "k", Value: []byte("v")}}}, batch)
	f.Add(full)
	plain, _ := AppendEntry(nil, &Envelope{}, batch)
	f.Add(plain)
	f.Add([]byte{1, 0, 0, 12})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, stErr := DecodeStoredEntry(b)
		e, err := DecodeEntry(b)
		if stErr != nil && err == nil {
			t.Fatalf("DecodeStoredEntry refused what DecodeEntry took: %v", stErr)
		}
		if err != nil {
			if stErr == nil && (!errors.Is(err, ErrCorruptBatch) || !strings.Contains(err.Error(), "CRC-32C")) {
				t.Fatalf("DecodeStoredEntry took what DecodeEntry refused for more than a CRC: %v", err)
			}
			return
		}
		if st.Header != e.Header || st.Envelope.ProducerName != e.Envelope.ProducerName || !bytes.Equal(st.Batch, e.Batch) {
			t.Fatal("DecodeStoredEntry and DecodeEntry disagree")
		}
		// Whatever decodes must re-encode to an entry that decodes alike.
		again, err := AppendEntry(nil, &e.Envelope, e.Batch)
		if err != nil {
			return
		}
		e2, err := DecodeEntry(again)
		if err != nil || e2.Header != e.Header || e2.Envelope.ProducerName != e.Envelope.ProducerName {
			t.Fatalf("re-encoded entry differs: %v", err)
		}
		_, _ = Records(e.Batch, e.Header, &Decompressor{Max: 1 << 20})
	})
}

// BenchmarkDecodeEntry decodes an entry of 128 x 1 KiB messages and its
// records, as dispatch does before delivering them: "checked" with
// DecodeEntry, "stored" with DecodeStoredEntry, which leaves the CRC to the
// store's read. MB/s counts value bytes.
func BenchmarkDecodeEntry(b *testing.B) {
	msgs := make([]Message, 128)
	value := bytes.Repeat([]byte{7}, 1024)
	for i := range msgs {
		msgs[i] = Message{Timestamp: 1_700_000_000_000 + int64(i), Value: value}
	}
	batch, err := AppendBatch(nil, BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	if err != nil {
		b.Fatal(err)
	}
	entry, err := AppendEntry(nil, &Envelope{ProducerName: "bench"}, batch)
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name   string
		decode func([]byte) (Entry, error)
	}{{"checked", DecodeEntry}, {"stored", DecodeStoredEntry}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(msgs) * len(value)))
			b.ReportAllocs()
			for b.Loop() {
				e, err := v.decode(entry)
				if err != nil {
					b.Fatal(err)
				}
				got, err := Records(e.Batch, e.Header, nil)
				if err != nil || len(got) != len(msgs) {
					b.Fatal(len(got), err)
				}
			}
		})
	}
}
