package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// errProtocol marks a client's protocol violation: the connection closes.
var errProtocol = errors.New("kafka: protocol violation")

// api is one served API key: its version range and handler. Each
// NN_name.go file registers its key in init.
type api struct {
	min, max int16
	handle   func(c *conn, req kmsg.Request, r *reply) error
}

var apis = map[int16]api{}

func register(key kmsg.Key, min, max int16, h func(c *conn, req kmsg.Request, r *reply) error) {
	apis[key.Int16()] = api{min: min, max: max, handle: h}
}

// header is a request header (v1 or v2; v0 has no client id and is not
// sent by any client that speaks RecordBatch v2).
type header struct {
	key      int16
	version  int16
	corr     int32
	clientID string
}

// parseHeader splits a frame into its header and body. The client id is a
// non-compact nullable string even in flexible (v2) headers; the tags that
// follow it in v2 are skipped by the caller, which knows the version.
func parseHeader(b []byte) (header, []byte, error) {
	var h header
	if len(b) < 10 {
		return h, nil, fmt.Errorf("%w: %d-byte request header; at least 10 bytes are needed", errProtocol, len(b))
	}
	h.key = int16(binary.BigEndian.Uint16(b))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	h.corr = int32(binary.BigEndian.Uint32(b[4:]))
	l := int(int16(binary.BigEndian.Uint16(b[8:])))
	b = b[10:]
	if l > 0 {
		if l > len(b) {
			return h, nil, fmt.Errorf("%w: client id of %d bytes in a frame with %d left", errProtocol, l, len(b))
		}
		h.clientID = string(b[:l])
		b = b[l:]
	} else if l < -1 {
		return h, nil, fmt.Errorf("%w: client id length %d", errProtocol, l)
	}
	return h, b, nil
}

// tagReader implements kmsg.TagReader over a byte slice.
type tagReader struct {
	b   []byte
	bad bool
}

func (r *tagReader) Uvarint() uint32 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > 1<<31 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return uint32(v)
}

func (r *tagReader) Span(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.bad = true
		r.b = nil
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *tagReader) Ok() bool { return !r.bad }

// skipHeaderTags skips the tagged fields of a v2 request header.
func skipHeaderTags(b []byte) ([]byte, error) {
	r := tagReader{b: b}
	kmsg.SkipTags(&r)
	if r.bad {
		return nil, fmt.Errorf("%w: malformed tagged fields in the request header", errProtocol)
	}
	return r.b, nil
}
