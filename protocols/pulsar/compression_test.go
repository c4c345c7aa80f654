package pulsar

import (
	"bytes"
	stdzlib "compress/zlib"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	gsnappy "github.com/golang/snappy"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

var allCodecs = []pb.CompressionType{pb.CompressionType_NONE, pb.CompressionType_LZ4,
	pb.CompressionType_ZLIB, pb.CompressionType_ZSTD, pb.CompressionType_SNAPPY}

func sampleInputs() map[string][]byte {
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(rnd.Uint32())
	}
	text := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog; ", 24000)) // ~1 MiB
	return map[string][]byte{
		"empty":  {},
		"one":    {42},
		"random": random,
		"text":   text,
		"zeros":  make([]byte, 300<<10),
	}
}

func TestCompressionRoundTrip(t *testing.T) {
	c := mustCodec(t)
	for name, in := range sampleInputs() {
		for _, ct := range allCodecs {
			prefix := []byte("prefix")
			enc, err := c.Compress(bytes.Clone(prefix), ct, in)
			if err != nil {
				t.Fatalf("%s/%s: compress: %v", name, ct, err)
			}
			if !bytes.HasPrefix(enc, prefix) {
				t.Fatalf("%s/%s: Compress did not append", name, ct)
			}
			dec, err := c.Decompress(bytes.Clone(prefix), ct, enc[len(prefix):], len(in))
			if err != nil {
				t.Fatalf("%s/%s: decompress: %v", name, ct, err)
			}
			if !bytes.Equal(dec[len(prefix):], in) || !bytes.HasPrefix(dec, prefix) {
				t.Fatalf("%s/%s: round trip changed the data", name, ct)
			}
			if len(in) > 1000 && name != "random" && ct != pb.CompressionType_NONE && len(enc)-len(prefix) > len(in)/2 {
				t.Fatalf("%s/%s: %d bytes compressed only to %d", name, ct, len(in), len(enc)-len(prefix))
			}
		}
	}
}

// TestZlibInterop checks our ZLIB against the standard library's, an
// independent implementation of the same format, in both directions.
func TestZlibInterop(t *testing.T) {
	c := mustCodec(t)
	in := sampleInputs()["text"]
	ours, err := c.Compress(nil, pb.CompressionType_ZLIB, in)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := stdzlib.NewReader(bytes.NewReader(ours))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, in) {
		t.Fatalf("compress/zlib cannot read ours: %v", err)
	}
	var theirs bytes.Buffer
	zw := stdzlib.NewWriter(&theirs)
	_, _ = zw.Write(in)
	_ = zw.Close()
	got, err = c.Decompress(nil, pb.CompressionType_ZLIB, theirs.Bytes(), len(in))
	if err != nil || !bytes.Equal(got, in) {
		t.Fatalf("we cannot read compress/zlib: %v", err)
	}
}

// TestSnappyInterop checks our SNAPPY against golang/snappy, the reference
// Go port of the raw block format.
func TestSnappyInterop(t *testing.T) {
	c := mustCodec(t)
	in := sampleInputs()["text"]
	ours, err := c.Compress(nil, pb.CompressionType_SNAPPY, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gsnappy.Decode(nil, ours)
	if err != nil || !bytes.Equal(got, in) {
		t.Fatalf("golang/snappy cannot read ours: %v", err)
	}
	got, err = c.Decompress(nil, pb.CompressionType_SNAPPY, gsnappy.Encode(nil, in), len(in))
	if err != nil || !bytes.Equal(got, in) {
		t.Fatalf("we cannot read golang/snappy: %v", err)
	}
}

func TestDecompressSizeChecks(t *testing.T) {
	c := mustCodec(t)
	in := sampleInputs()["text"][:10000]
	for _, ct := range allCodecs {
		enc, err := c.Compress(nil, ct, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{len(in) - 1, len(in) + 1, 0} {
			out, err := c.Decompress([]byte("x"), ct, enc, size)
			if !errors.Is(err, ErrCompression) || errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s: announced %d of %d bytes: err = %v", ct, size, len(in), err)
			}
			if string(out) != "x" {
				t.Fatalf("%s: failed Decompress changed dst", ct)
			}
		}
		for _, size := range []int{-1, DefaultCodecConfig().MaxUncompressedSize + 1, math.MaxInt} {
			if _, err := c.Decompress(nil, ct, enc, size); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s: announced %d bytes: err = %v", ct, size, err)
			}
		}
	}
	_, err := c.Decompress(nil, pb.CompressionType(9), []byte{1}, 1)
	if !errors.Is(err, ErrCompression) {
		t.Fatalf("unknown codec: %v", err)
	}
	if _, err := c.Compress(nil, pb.CompressionType(9), []byte{1}); !errors.Is(err, ErrEncode) {
		t.Fatalf("unknown codec: %v", err)
	}
}

func TestDecompressCorrupt(t *testing.T) {
	c := mustCodec(t)
	in := sampleInputs()["text"][:50000]
	for _, ct := range allCodecs[1:] {
		enc, _ := c.Compress(nil, ct, in)
		for _, bad := range [][]byte{nil, enc[:len(enc)/2], enc[:len(enc)-1], append(bytes.Clone(enc), 0, 0, 0, 0)} {
			if _, err := c.Decompress(nil, ct, bad, len(in)); !errors.Is(err, ErrCompression) {
				t.Fatalf("%s: %d corrupt bytes accepted: %v", ct, len(bad), err)
			}
		}
	}
}

// TestDecompressionBomb feeds each codec a small payload that inflates to
// 32 MiB while announcing 1 KiB, and checks that it fails without
// allocating anything near the inflated size.
func TestDecompressionBomb(t *testing.T) {
	c := mustCodec(t)
	zeros := make([]byte, 32<<20)
	bombs := map[pb.CompressionType][]byte{}
	for _, ct := range allCodecs[1:] {
		b, err := c.Compress(nil, ct, zeros)
		if err != nil {
			t.Fatal(err)
		}
		bombs[ct] = b
	}
	zeros = nil
	runtime.GC()
	for ct, bomb := range bombs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := c.Decompress(nil, ct, bomb, 1<<10)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCompression) {
			t.Fatalf("%s: bomb of %d bytes: err = %v", ct, len(bomb), err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
			t.Fatalf("%s: bomb made the codec allocate %d bytes", ct, grew)
		}
		t.Logf("%s: %d-byte bomb rejected: %v", ct, len(bomb), err)
	}
}

func TestCodecConfigValidate(t *testing.T) {
	if err := DefaultCodecConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	err := CodecConfig{MaxFrameSize: 1, MaxUncompressedSize: 0, ZstdLevel: 0, ZlibLevel: 11}.Validate()
	for _, field := range []string{"MaxFrameSize", "MaxUncompressedSize", "ZstdLevel", "ZlibLevel"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Fatalf("Validate does not name %s: %v", field, err)
		}
	}
	if _, err := NewCodec(CodecConfig{}); err == nil {
		t.Fatal("NewCodec accepted a zero config")
	}
}

// TestCodecConcurrent hammers one Codec from several goroutines; run with
// -race it checks that the pools are used safely.
func TestCodecConcurrent(t *testing.T) {
	c := mustCodec(t)
	in := sampleInputs()["text"][:100000]
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var enc, dec []byte
			for i := range 20 {
				ct := allCodecs[(g+i)%len(allCodecs)]
				var err error
				if enc, err = c.Compress(enc[:0], ct, in[i:]); err != nil {
					errs <- err
					return
				}
				if dec, err = c.Decompress(dec[:0], ct, enc, len(in)-i); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(dec, in[i:]) {
					errs <- errors.New(ct.String() + ": round trip changed the data")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
