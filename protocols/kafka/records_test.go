package kafka

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/ternmq/tern/protocols"
)

// record encodes one v2 record body (attributes onwards) with its length.
func record(delta int64, key, value []byte, hkey string) []byte {
	var b []byte
	b = append(b, 0)                  // attributes
	b = binary.AppendVarint(b, 0)     // timestamp delta
	b = binary.AppendVarint(b, delta) // offset delta
	b = binary.AppendVarint(b, int64(len(key)))
	b = append(b, key...)
	b = binary.AppendVarint(b, int64(len(value)))
	b = append(b, value...)
	b = binary.AppendVarint(b, 1) // one header
	b = binary.AppendVarint(b, int64(len(hkey)))
	b = append(b, hkey...)
	b = binary.AppendVarint(b, -1) // null header value
	return append(binary.AppendVarint(nil, int64(len(b))), b...)
}

// TestWalkRecordsNamesTheBadField: each way a record can be malformed is
// refused with an error that names the record and the field.
func TestWalkRecordsNamesTheBadField(t *testing.T) {
	good := append(record(0, []byte("k"), []byte("v"), "h"), record(1, nil, []byte("v"), "h")...)
	if err := walkRecords(good, 2); err != nil {
		t.Fatalf("good records refused: %v", err)
	}
	// The second record, with its value length set past its end.
	bad := record(1, nil, []byte("v"), "h")
	badValue := append(record(0, []byte("k"), []byte("v"), "h"), bad...)
	badValue[len(badValue)-len(bad)+1+4] = 0x7e // value length 63
	// A record of four bytes whose key length is a varint cut short.
	badKey := []byte{8, 0, 0, 0, 0x80}
	for _, c := range []struct {
		name string
		raw  []byte
		n    int32
		want string
	}{
		{"value past the end", badValue, 2, "record 1: value length 63 with"},
		{"key length", badKey, 1, "record 0: bad key length varint"},
		{"offset delta", record(3, nil, nil, "h"), 1, "record 0: offset delta 3, want 0"},
		{"fewer records", good, 3, "record 2: bad length"},
		{"more records", good, 1, "bytes after the last of 1 records"},
	} {
		err := walkRecords(c.raw, c.n)
		if err == nil || !errors.Is(err, protocols.ErrCorruptBatch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a corrupt batch error with %q", c.name, err, c.want)
		}
	}
}

// kiloBatch is the records of a batch as kgo sends it at 1 KiB per
// message: a thousand records, each with a key and one header.
func kiloBatch() ([]byte, int32) {
	var raw []byte
	const n = 1000
	value := make([]byte, 1024)
	for i := 0; i < n; i++ {
		raw = append(raw, record(int64(i), []byte("key"), value, "h")...)
	}
	return raw, n
}

// TestWalkRecordsDoesNotAllocate: checking a batch costs no allocation
// per record (it once built an error label per field, four a record).
func TestWalkRecordsDoesNotAllocate(t *testing.T) {
	raw, n := kiloBatch()
	allocs := testing.AllocsPerRun(20, func() {
		if err := walkRecords(raw, n); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("walkRecords allocated %.0f times for %d records", allocs, n)
	}
}

func BenchmarkWalkRecords(b *testing.B) {
	raw, n := kiloBatch()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if err := walkRecords(raw, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/record")
}
