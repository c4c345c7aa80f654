//go:build cgo

package pulsar

import (
	"bytes"
	"testing"

	czstd "github.com/DataDog/zstd"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// TestZstdInterop checks our ZSTD against libzstd, the reference C
// implementation that the Java client uses through zstd-jni, in both
// directions.
func TestZstdInterop(t *testing.T) {
	c := mustCodec(t)
	for name, in := range sampleInputs() {
		ours, err := c.Compress(nil, pb.CompressionType_ZSTD, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := czstd.Decompress(nil, ours)
		if err != nil || !bytes.Equal(got, in) {
			t.Fatalf("%s: libzstd cannot read ours: %v", name, err)
		}
		theirs, err := czstd.CompressLevel(nil, in, 3)
		if err != nil {
			t.Fatal(err)
		}
		got, err = c.Decompress(nil, pb.CompressionType_ZSTD, theirs, len(in))
		if err != nil || !bytes.Equal(got, in) {
			t.Fatalf("%s: we cannot read libzstd: %v", name, err)
		}
	}
}
