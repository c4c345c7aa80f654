package pulsar

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// The four codecs are the ones Pulsar clients use, in the same formats: LZ4
// as a raw block (no frame), ZLIB with its two-byte header and Adler-32
// trailer, ZSTD as a standard frame, SNAPPY as a raw block (not the framed
// stream format). The Go client's libraries are used where it uses them
// (pierrec/lz4, klauspost zstd and snappy); ZLIB uses klauspost's drop-in
// replacement for compress/zlib, which writes the same format faster.
//
// Decompression never trusts the input: the announced uncompressed_size is
// checked against the configured maximum before any buffer is sized, and
// each decoder is held to exactly that many bytes, so a small payload that
// inflates to gigabytes fails after at most uncompressed_size bytes.

// CodecConfig sets the codec's limits and compression levels.
type CodecConfig struct {
	// MaxFrameSize is the largest frame size prefix accepted, in bytes. It
	// should be the max_message_size announced in CONNECTED plus
	// FramePadding. Default DefaultMaxFrameSize (5 MiB + 10 KiB).
	MaxFrameSize int
	// MaxUncompressedSize is the largest payload decompression may produce,
	// in bytes. Default 64 MiB; at most 2 GiB - 1.
	MaxUncompressedSize int
	// ZstdLevel is the zstd compression level, 1 (fastest) to 22. Default 3,
	// zstd's own default.
	ZstdLevel int
	// ZlibLevel is the zlib compression level, 1 (fastest) to 9, or -1 for
	// zlib's default (6). Default -1.
	ZlibLevel int
}

// DefaultCodecConfig returns the defaults, which match a Pulsar client
// that keeps its own defaults.
func DefaultCodecConfig() CodecConfig {
	return CodecConfig{
		MaxFrameSize:        DefaultMaxFrameSize,
		MaxUncompressedSize: 64 << 20,
		ZstdLevel:           3,
		ZlibLevel:           -1,
	}
}

// Validate reports every problem with c at once.
func (c CodecConfig) Validate() error {
	var errs []error
	if c.MaxFrameSize < MinFrameSize || c.MaxFrameSize > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("MaxFrameSize %d: must be between %d and %d bytes",
			c.MaxFrameSize, MinFrameSize, math.MaxInt32))
	}
	if c.MaxUncompressedSize < 1 || c.MaxUncompressedSize > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("MaxUncompressedSize %d: must be between 1 and %d bytes",
			c.MaxUncompressedSize, math.MaxInt32))
	}
	if c.ZstdLevel < 1 || c.ZstdLevel > 22 {
		errs = append(errs, fmt.Errorf("ZstdLevel %d: must be between 1 and 22", c.ZstdLevel))
	}
	if c.ZlibLevel != -1 && (c.ZlibLevel < 1 || c.ZlibLevel > 9) {
		errs = append(errs, fmt.Errorf("ZlibLevel %d: must be between 1 and 9, or -1 for the default", c.ZlibLevel))
	}
	return errors.Join(errs...)
}

// Codec compresses and decompresses payloads. It is safe for concurrent use
// and meant to be shared by all connections: it keeps pools of compressor and
// decompressor state, which is costly to set up.
type Codec struct {
	cfg     CodecConfig
	zstdEnc *zstd.Encoder
	zstdDec *zstd.Decoder

	lz4Compressors sync.Pool // *lz4.Compressor
	zlibWriters    sync.Pool // *zlibWriter
	zlibReaders    sync.Pool // *zlibReader
}

type zlibWriter struct {
	w   *zlib.Writer
	out appendWriter
}

type zlibReader struct {
	src bytes.Reader
	r   io.ReadCloser // also a zlib.Resetter
}

// appendWriter is an io.Writer that appends to a slice.
type appendWriter struct{ b []byte }

// Write appends p; it never fails.
func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// NewCodec returns a Codec configured by cfg. Close releases it.
func NewCodec(cfg CodecConfig) (*Codec, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pulsar: codec config: %w", err)
	}
	c := &Codec{cfg: cfg}
	var err error
	c.zstdEnc, err = zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(cfg.ZstdLevel)),
		// An empty payload still becomes a frame that every decoder accepts.
		zstd.WithZeroFrames(true))
	if err != nil {
		return nil, fmt.Errorf("pulsar: zstd encoder: %w", err)
	}
	c.zstdDec, err = zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(uint64(cfg.MaxUncompressedSize)),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		_ = c.zstdEnc.Close()
		return nil, fmt.Errorf("pulsar: zstd decoder: %w", err)
	}
	c.lz4Compressors.New = func() any { return new(lz4.Compressor) }
	c.zlibWriters.New = func() any {
		zw := &zlibWriter{}
		// The level was validated above, so this cannot fail.
		zw.w, _ = zlib.NewWriterLevel(&zw.out, cfg.ZlibLevel)
		return zw
	}
	return c, nil
}

// Config returns the configuration the codec was built with.
func (c *Codec) Config() CodecConfig { return c.cfg }

// NewFrameReader returns a FrameReader on r limited to the configured
// MaxFrameSize.
func (c *Codec) NewFrameReader(r io.Reader) *FrameReader {
	return NewFrameReader(r, c.cfg.MaxFrameSize)
}

// Close releases the zstd encoder and decoder. The codec must not be used
// afterwards.
func (c *Codec) Close() error {
	c.zstdDec.Close()
	return c.zstdEnc.Close()
}

// Compress appends src compressed with t to dst. The result is what a
// producer puts after the metadata, with uncompressed_size = len(src).
func (c *Codec) Compress(dst []byte, t pb.CompressionType, src []byte) ([]byte, error) {
	switch t {
	case pb.CompressionType_NONE:
		return append(dst, src...), nil
	case pb.CompressionType_LZ4:
		n := len(dst)
		dst = slices.Grow(dst, lz4.CompressBlockBound(len(src)))
		lc := c.lz4Compressors.Get().(*lz4.Compressor)
		m, err := lc.CompressBlock(src, dst[n:n+lz4.CompressBlockBound(len(src))])
		c.lz4Compressors.Put(lc)
		if err != nil || (m == 0 && len(src) > 0) {
			return dst[:n], fmt.Errorf("pulsar: lz4 compression of %d bytes failed: %v", len(src), err)
		}
		if m == 0 {
			// An empty block is a single token byte with no literals.
			return append(dst[:n], 0), nil
		}
		return dst[:n+m], nil
	case pb.CompressionType_ZLIB:
		zw := c.zlibWriters.Get().(*zlibWriter)
		zw.out.b = dst
		zw.w.Reset(&zw.out)
		_, err := zw.w.Write(src)
		if err == nil {
			err = zw.w.Close()
		}
		out := zw.out.b
		zw.out.b = nil
		c.zlibWriters.Put(zw)
		if err != nil {
			return dst, fmt.Errorf("pulsar: zlib compression of %d bytes failed: %w", len(src), err)
		}
		return out, nil
	case pb.CompressionType_ZSTD:
		return c.zstdEnc.EncodeAll(src, dst), nil
	case pb.CompressionType_SNAPPY:
		n := len(dst)
		bound := snappy.MaxEncodedLen(len(src))
		if bound < 0 {
			return dst, fmt.Errorf("pulsar: %d bytes are too many for one snappy block", len(src))
		}
		dst = slices.Grow(dst, bound)
		enc := snappy.Encode(dst[n:n+bound], src)
		return dst[:n+len(enc)], nil
	}
	return dst, fmt.Errorf("%w: compression type %d is unknown", ErrEncode, int32(t))
}

// Decompress appends to dst the payload src decompressed with t, which must
// come to exactly size bytes (the metadata's uncompressed_size). Sizes over
// the configured maximum are refused before anything is allocated, with an
// error matching ErrTooLarge; anything else wrong matches ErrCompression.
func (c *Codec) Decompress(dst []byte, t pb.CompressionType, src []byte, size int) ([]byte, error) {
	if size < 0 || size > c.cfg.MaxUncompressedSize {
		return dst, fmt.Errorf("%w: uncompressed size %d exceeds the %d-byte limit",
			ErrTooLarge, size, c.cfg.MaxUncompressedSize)
	}
	if t == pb.CompressionType_NONE {
		if len(src) != size {
			return dst, fmt.Errorf("%w: uncompressed payload has %d bytes, metadata says %d",
				ErrCompression, len(src), size)
		}
		return append(dst, src...), nil
	}
	n := len(dst)
	dst = slices.Grow(dst, size)
	out := dst[n : n+size : n+size]
	var err error
	switch t {
	case pb.CompressionType_LZ4:
		err = decompressLZ4(out, src)
	case pb.CompressionType_ZLIB:
		err = c.decompressZlib(out, src)
	case pb.CompressionType_ZSTD:
		err = c.decompressZstd(out, src)
	case pb.CompressionType_SNAPPY:
		err = decompressSnappy(out, src)
	default:
		return dst[:n], fmt.Errorf("%w: compression type %d is unknown", ErrCompression, int32(t))
	}
	if err != nil {
		return dst[:n], fmt.Errorf("%w: %s payload of %d bytes announced as %d bytes: %w",
			ErrCompression, t, len(src), size, err)
	}
	return dst[:n+size], nil
}

// DecompressPayload returns the plain payload of a message or batch with
// metadata md: data itself when it is not compressed, otherwise data
// decompressed into scratch (whose capacity is reused).
func (c *Codec) DecompressPayload(scratch []byte, md *pb.MessageMetadata, data []byte) ([]byte, error) {
	if md.GetCompression() == pb.CompressionType_NONE {
		return data, nil
	}
	return c.Decompress(scratch[:0], md.GetCompression(), data, int(md.GetUncompressedSize()))
}

var errSizeMismatch = errors.New("decoded size differs")

func decompressLZ4(out, src []byte) error {
	if len(out) == 0 {
		// pierrec/lz4's assembly decoder dereferences an empty destination
		// instead of reporting that it is too short, so empty output is
		// settled here: the only blocks that decode to nothing are no bytes
		// at all and a lone token announcing no literals.
		if len(src) == 0 || (len(src) == 1 && src[0] == 0) {
			return nil
		}
		return fmt.Errorf("%w: a %d-byte block does not decode to 0 bytes", errSizeMismatch, len(src))
	}
	m, err := lz4.UncompressBlock(src, out)
	if err != nil {
		return err
	}
	if m != len(out) {
		return fmt.Errorf("%w: %d bytes", errSizeMismatch, m)
	}
	return nil
}

func decompressSnappy(out, src []byte) error {
	m, err := snappy.DecodedLen(src)
	if err != nil {
		return err
	}
	if m != len(out) {
		return fmt.Errorf("%w: block header says %d bytes", errSizeMismatch, m)
	}
	got, err := snappy.Decode(out[:0], src)
	if err != nil {
		return err
	}
	if len(got) != len(out) || (len(got) > 0 && &got[0] != &out[0]) {
		return fmt.Errorf("%w: %d bytes", errSizeMismatch, len(got))
	}
	return nil
}

func (c *Codec) decompressZstd(out, src []byte) error {
	got, err := c.zstdDec.DecodeAll(src, out[:0])
	if err != nil {
		return err
	}
	if len(got) != len(out) {
		return fmt.Errorf("%w: %d bytes", errSizeMismatch, len(got))
	}
	return nil
}

func (c *Codec) decompressZlib(out, src []byte) error {
	zr, _ := c.zlibReaders.Get().(*zlibReader)
	if zr == nil {
		zr = &zlibReader{}
	}
	zr.src.Reset(src)
	var err error
	if zr.r == nil {
		zr.r, err = zlib.NewReader(&zr.src)
	} else {
		err = zr.r.(zlib.Resetter).Reset(&zr.src, nil)
	}
	if err == nil {
		err = readExactly(zr.r, out)
	}
	if err == nil && zr.src.Len() > 0 {
		err = fmt.Errorf("%d bytes follow the end of the zlib stream", zr.src.Len())
	}
	zr.src.Reset(nil)
	if zr.r != nil {
		c.zlibReaders.Put(zr)
	}
	return err
}

// readExactly fills out from r and then requires r to end, which for zlib
// also verifies the Adler-32 trailer.
func readExactly(r io.Reader, out []byte) error {
	if _, err := io.ReadFull(r, out); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return fmt.Errorf("%w: stream ends early", errSizeMismatch)
		}
		return err
	}
	var one [1]byte
	for range 4 {
		m, err := r.Read(one[:])
		if m > 0 {
			return fmt.Errorf("%w: stream goes on past %d bytes", errSizeMismatch, len(out))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: stream neither ends nor goes on", errSizeMismatch)
}
