package kafka

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetch response's batches sent from their read buffers (sentBatch) are
// written to the connection from there, not copied into the encoded
// response: the response is encoded with a marker in place of each, and
// the encoding is cut at the markers, the batches going out between the
// pieces. A consumer reading a backlog gets a megabyte or more a fetch,
// which would otherwise be copied once more on the fetch's critical path.

// batchMarker stands in for a sent batch while the response is encoded:
// random, so no other field of a response holds it.
var batchMarker = func() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}()

// encodeSpliced appends fr, encoded at its version, to buf (which holds the
// frame's length and the response header) with each sent batch's bytes
// left out, and returns the pieces to write, in order: pieces of buf, and
// the batches themselves. The frame's length in buf's first four bytes
// counts the batches. ok is false, with buf unchanged, if a marker could
// not be told apart; the caller then encodes fr whole.
func encodeSpliced(buf []byte, fr *kmsg.FetchResponse, sent []sentBatch) (pieces [][]byte, out []byte, ok bool) {
	batches := make([][]byte, len(sent))
	for i, s := range sent {
		batches[i] = s.p.RecordBatches
		s.p.RecordBatches = batchMarker
	}
	defer func() {
		for i, s := range sent {
			s.p.RecordBatches = batches[i]
		}
	}()
	start := len(buf)
	enc := fr.AppendTo(buf)
	// The length before a batch: compact (uvarint of length+1) in
	// flexible versions, else an int32.
	length := func(n int) []byte {
		if fr.IsFlexible() {
			return binary.AppendUvarint(nil, uint64(n)+1)
		}
		return binary.BigEndian.AppendUint32(nil, uint32(n))
	}
	mark := append(length(len(batchMarker)), batchMarker...)
	if bytes.Count(enc[start:], batchMarker) != len(sent) || bytes.Count(enc[start:], mark) != len(sent) {
		return nil, buf, false
	}
	total := 0
	rest := enc
	for _, b := range batches {
		i := bytes.Index(rest, mark)
		n := length(len(b))
		pieces = append(pieces, rest[:i], n, b)
		total += i + len(n) + len(b)
		rest = rest[i+len(mark):]
	}
	pieces = append(pieces, rest)
	total += len(rest)
	binary.BigEndian.PutUint32(enc, uint32(total-4))
	return pieces, enc, true
}
