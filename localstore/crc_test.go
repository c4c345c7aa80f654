package localstore

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/ternmq/tern/protocols"
)

func TestCRC32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<16)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for _, n := range []int{0, 1, 2, 3, 7, 8, 63, 64, 1000, 4096, 8191, 8192, 40000, len(buf)} {
		for _, split := range []int{0, 1, n / 3, n / 2, n} {
			if split > n {
				continue
			}
			a, b := buf[:split], buf[split:n]
			want := crc32.Checksum(buf[:n], castagnoli)
			got := crc32Combine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(len(b)))
			if got != want {
				t.Errorf("%d bytes split at %d: combined %08x, want %08x", n, split, got, want)
			}
		}
	}
}

// TestXPow8nLarge holds shifts past 2^28 bytes (2^31 bits) to what
// shifting twice by half gives: a table that wrapped at 32 entries, as
// zlib's does, fails it, since modulo Castagnoli's polynomial x^(2^32)
// is x^2.
func TestXPow8nLarge(t *testing.T) {
	for _, n := range []int64{1 << 27, 1 << 28, 1 << 29, 1 << 30, 1 << 31, 3 << 30, 1<<32 - 2} {
		half := xPow8n(n / 2)
		if got, want := xPow8n(n), multModP(half, half); got != want {
			t.Errorf("x^(8*%d) = %08x, x^(8*%d) squared = %08x", n, got, n/2, want)
		}
	}
	if xPow2k[31] != xPow2k[0] {
		t.Errorf("x^(2^31) = %08x, expected x (%08x): the test above relies on it", xPow2k[31], xPow2k[0])
	}
}

// TestRecordSum checks the derived CRC of entries of many sizes, split
// into head and body in the ways writeSegment splits them, against a
// pass over the bytes.
func TestRecordSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, vlen := range []int{1, 100, 8 << 10, 9000, 100 << 10, 1 << 20} {
		msgs := make([]protocols.Message, 3)
		for i := range msgs {
			msgs[i].Value = make([]byte, vlen)
			for j := range msgs[i].Value {
				msgs[i].Value[j] = byte(rng.Uint32())
			}
			msgs[i].Timestamp = int64(1700000000000 + i)
		}
		batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{}, msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		env, err := protocols.AppendEnvelope(nil, &protocols.Envelope{ProducerName: "p", SequenceLast: 2})
		if err != nil {
			t.Fatal(err)
		}
		entry := append(append([]byte{}, env...), batch...)
		if err := protocols.StampEntry(entry, 12345, 1700000000999); err != nil {
			t.Fatal(err)
		}
		want := crc32.Checksum(entry, castagnoli)
		split := len(env) + protocols.BatchHeaderSize
		if got := recordSum(entry[:split], entry[split:], len(env)); got != want {
			t.Errorf("values of %d bytes, split after the batch header: %08x, want %08x", vlen, got, want)
		}
		if got := recordSum(entry, nil, len(env)); got != want {
			t.Errorf("values of %d bytes, whole: %08x, want %08x", vlen, got, want)
		}
	}
}

func BenchmarkRecordSum(b *testing.B) {
	for _, size := range []int{1 << 10, 8 << 10, 64 << 10, 1 << 20} {
		msgs := []protocols.Message{{Value: make([]byte, size)}}
		batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{}, msgs, nil)
		if err != nil {
			b.Fatal(err)
		}
		head, body := batch[:protocols.BatchHeaderSize], batch[protocols.BatchHeaderSize:]
		b.Run(fmt.Sprintf("%dKiB/pass", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, body)
			}
		})
		b.Run(fmt.Sprintf("%dKiB/derived", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			sum, from := protocols.BatchCRC(batch)
			for b.Loop() {
				crc32Combine(crc32.Checksum(head[:from], castagnoli), sum, int64(len(batch)-from))
			}
		})
	}
}
