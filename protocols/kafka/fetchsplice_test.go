package kafka

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSplicedFetchIsTheEncoding: a fetch response written as pieces, the
// sent batches between them, is byte for byte the response encoded whole,
// at versions with int32 and with compact lengths, with batches of sizes
// whose compact lengths take one, two and three bytes, beside a partition
// whose batches were copied and one with none. The partitions keep their
// batches after.
func TestSplicedFetchIsTheEncoding(t *testing.T) {
	fill := func(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }
	for _, v := range []int16{4, 11, 12, 16} {
		for _, sizes := range [][2]int{{10, 100}, {200, 70000}, {1 << 20, 3}} {
			t.Run(fmt.Sprintf("v%d/%d-%d", v, sizes[0], sizes[1]), func(t *testing.T) {
				fr := kmsg.NewPtrFetchResponse()
				fr.SetVersion(v)
				for ti := range 2 {
					rt := kmsg.NewFetchResponseTopic()
					rt.Topic = fmt.Sprintf("topic-%d", ti)
					for pi := range 3 {
						p := kmsg.NewFetchResponseTopicPartition()
						p.Partition = int32(pi)
						p.HighWatermark = int64(1000 * (pi + 1))
						switch pi {
						case 0:
							p.RecordBatches = fill(sizes[ti], byte('a'+ti))
						case 1:
							p.RecordBatches = fill(33, 'c') // copied, not sent
						}
						rt.Partitions = append(rt.Partitions, p)
					}
					fr.Topics = append(fr.Topics, rt)
				}
				head := []byte{0, 0, 0, 0, 0, 0, 0, 7}
				whole := fr.AppendTo(bytes.Clone(head))
				binary.BigEndian.PutUint32(whole, uint32(len(whole)-4))

				sent := []sentBatch{{p: &fr.Topics[0].Partitions[0]}, {p: &fr.Topics[1].Partitions[0]}}
				pieces, _, ok := encodeSpliced(bytes.Clone(head), fr, sent)
				if !ok {
					t.Fatal("not spliced")
				}
				if got := bytes.Join(pieces, nil); !bytes.Equal(got, whole) {
					t.Fatalf("spliced %d bytes differ from the %d-byte encoding", len(got), len(whole))
				}
				if &pieces[2][0] != &fr.Topics[0].Partitions[0].RecordBatches[0] {
					t.Error("the first sent batch was copied, not written from its buffer")
				}
				if len(fr.Topics[1].Partitions[0].RecordBatches) != sizes[1] {
					t.Error("a sent partition lost its batch")
				}

				// The second topic's batches sent as three parts, from
				// three places: the same bytes, each part its own piece.
				b := fr.Topics[1].Partitions[0].RecordBatches
				cut := [][]byte{bytes.Clone(b[:len(b)/3]), bytes.Clone(b[len(b)/3 : len(b)/2]), bytes.Clone(b[len(b)/2:])}
				fr.Topics[1].Partitions[0].RecordBatches = nil
				sent[1].parts = cut
				pieces, _, ok = encodeSpliced(bytes.Clone(head), fr, sent)
				if !ok {
					t.Fatal("parts not spliced")
				}
				if got := bytes.Join(pieces, nil); !bytes.Equal(got, whole) {
					t.Fatalf("spliced parts: %d bytes differ from the %d-byte encoding", len(got), len(whole))
				}
				for i, part := range cut {
					if len(part) > 0 && !slices.ContainsFunc(pieces, func(p []byte) bool { return len(p) > 0 && &p[0] == &part[0] }) {
						t.Errorf("part %d was copied, not written from its buffer", i)
					}
				}
				if fr.Topics[1].Partitions[0].RecordBatches != nil {
					t.Error("a partition sent in parts holds batches after the encoding")
				}
			})
		}
	}
}

// TestSplicedFetchFallsBack: a response in which a marker cannot be told
// apart (here, a topic named with it) is left to be encoded whole.
func TestSplicedFetchFallsBack(t *testing.T) {
	fr := kmsg.NewPtrFetchResponse()
	fr.SetVersion(12)
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = string(batchMarker)
	p := kmsg.NewFetchResponseTopicPartition()
	p.RecordBatches = []byte("batch")
	rt.Partitions = append(rt.Partitions, p)
	fr.Topics = append(fr.Topics, rt)
	head := []byte{0, 0, 0, 0, 0, 0, 0, 7}
	if _, buf, ok := encodeSpliced(head, fr, []sentBatch{{p: &fr.Topics[0].Partitions[0]}}); ok || len(buf) != len(head) {
		t.Fatalf("spliced (%v) a response whose topic name holds the marker; buf %d bytes", ok, len(buf))
	}
	if string(fr.Topics[0].Partitions[0].RecordBatches) != "batch" {
		t.Fatal("the batch was not put back")
	}
	// Batches sent in parts are joined, for the whole encoding.
	fr.Topics[0].Partitions[0].RecordBatches = nil
	parts := [][]byte{[]byte("bat"), []byte("ch")}
	if _, _, ok := encodeSpliced(head, fr, []sentBatch{{p: &fr.Topics[0].Partitions[0], parts: parts}}); ok {
		t.Fatal("spliced a response whose topic name holds the marker")
	}
	if string(fr.Topics[0].Partitions[0].RecordBatches) != "batch" {
		t.Fatalf("batches sent in parts read %q after the fallback, want them joined", fr.Topics[0].Partitions[0].RecordBatches)
	}
}
