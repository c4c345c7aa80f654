package websocket

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ternmq/tern/protocols"
)

// TestEntryScratchReuse: entries built one after another in one scratch
// are byte for byte the entries built each in a fresh one, whatever the
// entry before held (event times, keys, properties, batch sizes).
func TestEntryScratchReuse(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	var shared entryScratch
	var comp protocols.Compressor
	for i := range 40 {
		n := 1 + i%5*3
		ms := make([]message, n)
		seqs := make([]int64, n)
		for k := range ms {
			m := message{payload: bytes.Repeat([]byte{byte('a' + k)}, 10+i*k)}
			if (i+k)%2 == 0 {
				m.eventTime = int64(1_600_000_000_000 + i)
			}
			if (i+k)%3 == 0 {
				m.key = []byte(fmt.Sprint("k", k))
				m.headers = []protocols.Header{{Key: "h", Value: []byte(fmt.Sprint(i))}}
			}
			ms[k], seqs[k] = m, int64(i*100+k)
		}
		got, err := batchEntry("p", ms, seqs, protocols.CodecNone, &comp, &shared, now)
		if err != nil {
			t.Fatal(err)
		}
		want, err := batchEntry("p", ms, seqs, protocols.CodecNone, &comp, &entryScratch{}, now)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Batch, want.Batch) || !reflect.DeepEqual(got.Envelope, want.Envelope) {
			t.Fatalf("entry %d of %d messages differs when built in a used scratch:\n%+v\n%+v", i, n, got.Envelope, want.Envelope)
		}
	}
	for _, m := range shared.msgs[:cap(shared.msgs)] {
		if m.Value != nil || m.Key != nil || m.Headers != nil {
			t.Fatalf("the scratch keeps a message's bytes: %+v", m)
		}
	}
}
