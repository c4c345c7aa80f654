package localstore

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// TestKeyLayoutGolden pins every key layout: a change here is a storage
// format change and needs a migration.
func TestKeyLayoutGolden(t *testing.T) {
	cases := []struct {
		name string
		key  Key
		want string
	}{
		{"meta", MetaKey("next-pid"), "01" + hex.EncodeToString([]byte("next-pid"))},
		{"topic", topicKey("persistent://a/b/c"), "02" + hex.EncodeToString([]byte("persistent://a/b/c"))},
		{"partition", partitionKey(7), "0300000007"},
		{"head", headKey(7), "0400000007"},
		{"replay from", replayFromKey(), "05"},
		{"entry", logKey(kindEntry, 7, 0x0102030405), "10000000070000000102030405"},
		{"entry part", entryPartKey(7, 0x0102030405, 2), "1000000007000000010203040500000002"},
		{"index", logKey(kindIndex, 7, 1), "11000000070000000000000001"},
		{"cursor", CursorKey(7, "sub"), "2000000007" + hex.EncodeToString([]byte("sub"))},
		{"group", GroupOffsetKey("g1", 7), "210002" + hex.EncodeToString([]byte("g1")) + "00000007"},
		{"producer", ProducerKey(7, 'k', []byte{0, 1}), "22000000076b0001"},
		{"repl cursor", ReplCursorKey(7, "eu"), "2300000007" + hex.EncodeToString([]byte("eu"))},
		{"repl hwm", ReplHWMKey(7, "us"), "2400000007" + hex.EncodeToString([]byte("us"))},
	}
	for _, c := range cases {
		if got := hex.EncodeToString(c.key); got != c.want {
			t.Errorf("%s key = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestKeysSortNumerically(t *testing.T) {
	a := logKey(kindEntry, 1, 255)
	b := logKey(kindEntry, 1, 256)
	c := logKey(kindEntry, 2, 0)
	if !(string(a) < string(b) && string(b) < string(c)) {
		t.Fatal("entry keys do not sort by (partition, offset)")
	}
	// An entry's parts sit between it and the next entry.
	if p := string(entryPartKey(1, 255, 1)); !(string(a) < p && p < string(entryPartKey(1, 255, 2)) && p < string(b)) {
		t.Fatal("entry part keys do not sort between their entry and the next")
	}
	if string(pidEnd(kindEntry, 1)) > string(c) {
		t.Fatal("pidEnd(1) is past partition 2's first key")
	}
	if string(pidEnd(kindEntry, 1)) <= string(logKey(kindEntry, 1, 1<<62)) {
		t.Fatal("pidEnd(1) does not cover partition 1")
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := map[string]string{"01": "02", "01ff": "02", "ffff": "", "0a0bff": "0a0c"}
	for in, want := range cases {
		k, _ := hex.DecodeString(in)
		if got := hex.EncodeToString(PrefixEnd(k)); got != want {
			t.Errorf("PrefixEnd(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestHeadAndIndexGolden(t *testing.T) {
	h := head{Start: 1, Next: 2, Bytes: 3, Entries: 4, MaxTime: 5, LastAppend: 6}
	want := "01" + "0000000000000001" + "0000000000000002" + "0000000000000003" +
		"0000000000000004" + "0000000000000005" + "0000000000000006"
	if got := hex.EncodeToString(h.encode()); got != want {
		t.Fatalf("head = %s, want %s", got, want)
	}
	if back, err := decodeHead(h.encode()); err != nil || back != h {
		t.Fatalf("head round trip = %+v, %v", back, err)
	}
	iv := indexValue{Count: 10, Size: 2000, AppendTime: 3, MaxTime: 4}
	if back, err := decodeIndex(iv.encode()); err != nil || back != iv {
		t.Fatalf("index round trip = %+v, %v", back, err)
	}
	if _, err := decodeHead([]byte{2}); err == nil {
		t.Fatal("decodeHead accepted a short record")
	}
}

// TestLookupPartitionNamedDoesNotKeepTheName: a name built on the caller's
// stack stays there (fetches of many partitions look up each one), and
// the lookup answers as LookupPartition does.
func TestLookupPartitionNamedDoesNotKeepTheName(t *testing.T) {
	s := openTest(t, Config{})
	tm, err := s.CreateTopic("persistent://public/default/named", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range tm.PIDs {
		got, err := s.LookupPartitionNamed([]byte(tm.Name), i)
		if err != nil || got != want {
			t.Fatalf("partition %d: %d, %v; want %d", i, got, err, want)
		}
	}
	if _, err := s.LookupPartitionNamed([]byte(tm.Name), 3); !errors.Is(err, ErrPartitionNotFound) {
		t.Fatalf("partition 3 of 3: %v", err)
	}
	if _, err := s.LookupPartitionNamed([]byte("persistent://public/default/none"), 0); !errors.Is(err, ErrTopicNotFound) || !strings.Contains(err.Error(), "none") {
		t.Fatalf("unknown topic: %v", err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		var buf [64]byte
		_, _ = s.LookupPartitionNamed(append(buf[:0], tm.Name...), 1)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a lookup: the name escapes", allocs)
	}
}
