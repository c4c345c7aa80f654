package configs

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValidAndMatchesBuiltin(t *testing.T) {
	d := DefaultConfig()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.Node.Region != "local" || d.DataDir != "./data" || d.Listeners.Kafka != ":9092" ||
		d.Listeners.Pulsar != ":6650" || d.Listeners.HTTP != ":8080" || d.Storage.Durability != "sync" ||
		time.Duration(d.Retention.MaxAge) != 7*24*time.Hour || d.Storage.MemtableSize != 64<<20 {
		t.Fatalf("embedded default: %+v", d)
	}
	// The file and the built-in defaults agree field by field.
	b := builtin()
	b.fill()
	got, _ := d.Marshal()
	want, _ := b.Marshal()
	if string(got) != string(want) {
		t.Fatalf("single.yaml and builtin() differ:\n%s\n---\n%s", got, want)
	}
}

func TestParseOverridesAndUnits(t *testing.T) {
	n, err := Parse([]byte(`
node: {name: n1, region: eu, rack: r1}
storage: {durability: async, async_sync_interval: 250ms, memtable_size: 128MiB}
retention: {max_age: 36h, max_bytes: 1GB}
`))
	if err != nil {
		t.Fatal(err)
	}
	if n.Node.Name != "n1" || n.Storage.Durability != "async" || n.Storage.MemtableSize != 128<<20 ||
		n.Retention.MaxBytes != 1e9 || time.Duration(n.Storage.AsyncSyncInterval) != 250*time.Millisecond ||
		n.Listeners.Kafka != ":9092" {
		t.Fatalf("parsed %+v", n)
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestParseRejectsUnknownFields(t *testing.T) {
	_, err := Parse([]byte("storage: {durabilty: sync}\n"))
	if err == nil || !strings.Contains(err.Error(), "durabilty") {
		t.Fatalf("misspelt field: %v", err)
	}
	_, err = Parse([]byte("retention: {max_age: soon}\n"))
	if err == nil || !strings.Contains(err.Error(), "7d") {
		t.Fatalf("bad duration: %v", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	n := DefaultConfig()
	n.Node.Region = "bad region"
	n.Listeners.Kafka = "9092"
	n.Storage.Durability = "fast"
	n.Kafka.Namespace = "public"
	n.Limits.MaxMessageBytes = 10
	n.Storage.Compression = "lz4"
	n.Storage.SegmentCache = BytesOrAuto{Bytes: -1}
	n.Storage.GroupCommitInterval = Duration(2 * time.Second)
	n.Kafka.FetchMaxBytes = 100
	n.Kafka.FetchSessionSlots = -1
	err := n.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, field := range []string{"node.region", "listeners.kafka", "storage.durability", "kafka.namespace", "limits.max_message_bytes", "storage.compression", "storage.segment_cache", "storage.group_commit_interval", "kafka.fetch_max_bytes", "kafka.fetch_session_slots"} {
		if !strings.Contains(err.Error(), field+":") {
			t.Errorf("error does not name %s:\n%v", field, err)
		}
	}
	if !strings.Contains(err.Error(), "want one of none, snappy, minlz, zstd") {
		t.Errorf("error does not list the compressions: %v", err)
	}
	if !strings.Contains(err.Error(), "want 0 (none) to 1000000") {
		t.Errorf("error does not say which session counts are accepted: %v", err)
	}
	if !strings.Contains(err.Error(), "want sync or async") {
		t.Errorf("error does not say what is accepted: %v", err)
	}

	// A segment is allocated whole: the quota must hold a few.
	n = DefaultConfig()
	n.Limits.DiskQuota = 128 << 20
	if err := n.Validate(); err == nil || !strings.Contains(err.Error(), "storage.segment_size: 64MiB with limits.disk_quota 128MiB") ||
		!strings.Contains(err.Error(), "at most a quarter of the quota") {
		t.Errorf("a 64MiB segment under a 128MiB quota: %v", err)
	}
	n.Storage.SegmentSize = 32 << 20
	if err := n.Validate(); err != nil {
		t.Errorf("a 32MiB segment under a 128MiB quota: %v", err)
	}
	n.Storage.SegmentSize, n.Storage.Segments = 64<<20, false
	if err := n.Validate(); err != nil {
		t.Errorf("no segments under a 128MiB quota: %v", err)
	}
}

func TestBytesAndDurations(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "64MiB": 64 << 20, "1.5KiB": 1536, "2GB": 2e9, "-1": -1, "10B": 10} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d %v, want %d", in, got, err, want)
		}
	}
	if _, err := ParseBytes("lots"); err == nil {
		t.Error("ParseBytes accepted lots")
	}
	if Bytes(64<<20).String() != "64MiB" || Bytes(1000).String() != "1000" || Bytes(-1).String() != "-1" {
		t.Errorf("Bytes.String: %s %s %s", Bytes(64<<20), Bytes(1000), Bytes(-1))
	}
	if d, err := ParseDuration("7d"); err != nil || d != 7*24*time.Hour {
		t.Errorf("7d = %v %v", d, err)
	}
}

func TestExampleMeshConfigsAreValid(t *testing.T) {
	files, _ := filepath.Glob("mesh/*.yaml")
	if len(files) < 3 {
		t.Fatalf("found %d example mesh configs, want 3", len(files))
	}
	seen := map[string]bool{}
	for _, f := range files {
		n, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		for _, a := range []string{n.Listeners.Kafka, n.Listeners.Pulsar, n.Listeners.HTTP, n.Mesh.GossipAddr} {
			if seen[a] {
				t.Errorf("%s reuses address %s", f, a)
			}
			seen[a] = true
		}
	}
}

func TestSegmentCacheAutoOrSize(t *testing.T) {
	if d := DefaultConfig(); !d.Storage.SegmentCache.Auto {
		t.Fatalf("default segment_cache %v, want auto", d.Storage.SegmentCache)
	}
	for doc, want := range map[string]BytesOrAuto{
		"storage: {segment_cache: auto}":   {Auto: true},
		"storage: {segment_cache: 512MiB}": {Bytes: 512 << 20},
		"storage: {segment_cache: 0}":      {},
	} {
		n, err := Parse([]byte(doc))
		if err != nil || n.Storage.SegmentCache != want {
			t.Errorf("%s: %+v %v, want %+v", doc, n.Storage.SegmentCache, err, want)
			continue
		}
		// What Marshal writes reads back the same.
		out, _ := n.Marshal()
		back, err := Parse(out)
		if err != nil || back.Storage.SegmentCache != want {
			t.Errorf("%s: marshalled and parsed again: %+v %v", doc, back.Storage.SegmentCache, err)
		}
	}
	_, err := Parse([]byte("storage: {segment_cache: most}"))
	if err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), `"most"`) {
		t.Errorf("segment_cache: most: %v", err)
	}
	n := DefaultConfig()
	n.Storage.SegmentCache = BytesOrAuto{Bytes: -1}
	if err := n.Validate(); err == nil || !strings.Contains(err.Error(), "storage.segment_cache: -1: want auto") {
		t.Errorf("segment_cache -1: %v", err)
	}
}
