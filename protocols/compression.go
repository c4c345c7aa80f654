package protocols

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a RecordBatch compression codec (attribute bits 0-2).
type Codec int8

// The codecs a RecordBatch may carry.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// DefaultMaxDecompressed bounds what one batch may inflate to, so a small
// malicious batch cannot exhaust memory.
const DefaultMaxDecompressed = 64 << 20

// Decompressor inflates batch records. It keeps its buffer between calls; it
// is not safe for concurrent use (keep one per connection or take one from a
// pool).
type Decompressor struct {
	// Max bounds the inflated size; 0 means DefaultMaxDecompressed.
	Max int
	buf []byte
	lz  *lz4.Reader
	gz  *gzip.Reader
}

var zstdDec = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		panic(err) // only fails on invalid options
	}
	return d
})

func (d *Decompressor) limit() int {
	if d.Max > 0 {
		return d.Max
	}
	return DefaultMaxDecompressed
}

// Decompress inflates src compressed with c. The result aliases d's buffer.
func (d *Decompressor) Decompress(c Codec, src []byte) ([]byte, error) {
	max := d.limit()
	var err error
	switch c {
	case CodecNone:
		return src, nil
	case CodecGzip:
		if d.gz == nil {
			d.gz, err = gzip.NewReader(bytes.NewReader(src))
		} else {
			err = d.gz.Reset(bytes.NewReader(src))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCorruptBatch, err)
		}
		return d.readAll(d.gz, max, "gzip")
	case CodecSnappy:
		n, lerr := snappyLen(src)
		if lerr == nil && n > max {
			return nil, fmt.Errorf("%w: snappy data inflates to %d bytes, over the %d limit", ErrCorruptBatch, n, max)
		}
		out, err := xerial.Decode(src)
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
		}
		if len(out) > max {
			return nil, fmt.Errorf("%w: snappy data inflates past the %d limit", ErrCorruptBatch, max)
		}
		return out, nil
	case CodecLZ4:
		if d.lz == nil {
			d.lz = lz4.NewReader(bytes.NewReader(src))
		} else {
			d.lz.Reset(bytes.NewReader(src))
		}
		return d.readAll(d.lz, max, "lz4")
	case CodecZstd:
		out, err := zstdDec().DecodeAll(src, d.buf[:0])
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptBatch, err)
		}
		if len(out) > max {
			return nil, fmt.Errorf("%w: zstd data inflates past the %d limit", ErrCorruptBatch, max)
		}
		d.buf = out
		return out, nil
	}
	return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCodec, c)
}

// snappyLen is the inflated length of a raw snappy block; xerial-framed data
// is bounded chunk by chunk by xerial.Decode and checked after.
func snappyLen(src []byte) (int, error) {
	if len(src) >= 8 && bytes.HasPrefix(src, []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}) {
		return 0, fmt.Errorf("framed")
	}
	return s2.DecodedLen(src)
}

func (d *Decompressor) readAll(r io.Reader, max int, name string) ([]byte, error) {
	buf := d.buf[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) > max {
				return nil, fmt.Errorf("%w: %s data inflates past the %d limit", ErrCorruptBatch, name, max)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorruptBatch, name, err)
		}
	}
	if len(buf) > max {
		return nil, fmt.Errorf("%w: %s data inflates past the %d limit", ErrCorruptBatch, name, max)
	}
	d.buf = buf
	return buf, nil
}

// Compressor deflates batch records; not safe for concurrent use.
type Compressor struct {
	buf bytes.Buffer
	gz  *gzip.Writer
	lz  *lz4.Writer
}

var zstdEnc = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err) // only fails on invalid options
	}
	return e
})

// Compress deflates src with c into a new slice.
func (c *Compressor) Compress(codec Codec, src []byte) ([]byte, error) {
	c.buf.Reset()
	switch codec {
	case CodecNone:
		return src, nil
	case CodecGzip:
		if c.gz == nil {
			c.gz = gzip.NewWriter(&c.buf)
		} else {
			c.gz.Reset(&c.buf)
		}
		if _, err := c.gz.Write(src); err != nil {
			return nil, err
		}
		if err := c.gz.Close(); err != nil {
			return nil, err
		}
	case CodecSnappy:
		return s2.EncodeSnappy(nil, src), nil
	case CodecLZ4:
		if c.lz == nil {
			c.lz = lz4.NewWriter(&c.buf)
		} else {
			c.lz.Reset(&c.buf)
		}
		if _, err := c.lz.Write(src); err != nil {
			return nil, err
		}
		if err := c.lz.Close(); err != nil {
			return nil, err
		}
	case CodecZstd:
		return zstdEnc().EncodeAll(src, nil), nil
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCodec, codec)
	}
	return bytes.Clone(c.buf.Bytes()), nil
}
