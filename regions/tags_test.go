package regions

import (
	"strings"
	"testing"
)

func TestTagsRoundTrip(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Region, cfg.Rack = "eu-west", "rack_1"
	cfg.Advertise = Advertise{QUIC: "10.0.0.1:7947", Kafka: "[::1]:9092", Pulsar: "broker.eu:6650", HTTP: "10.0.0.1:8080", Version: "0.1.0 (abc)"}
	id := newID()
	got, err := ParseTags(cfg.tags(id))
	if err != nil {
		t.Fatal(err)
	}
	want := Tags{Region: "eu-west", Rack: "rack_1", ID: id, Advertise: cfg.Advertise}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// Empty optional fields are not published at all.
	cfg.Rack, cfg.Advertise = "", Advertise{}
	if tags := cfg.tags(id); len(tags) != 2 {
		t.Errorf("minimal tags: %v", tags)
	}
}

func TestParseTagsProblems(t *testing.T) {
	for _, c := range []struct {
		name string
		tags map[string]string
		want Tags
		errs []string
	}{
		{"foreign", map[string]string{"role": "consul"}, Tags{}, []string{`tag "region" is missing`}},
		{"unknown keys ignored", map[string]string{"region": "eu", "future": "x"}, Tags{Region: "eu"}, nil},
		{"bad fields dropped, good kept", map[string]string{
			"region": "eu", "rack": "a b", "quic": "nohost", "kafka": ":9092", "pulsar": "h:0", "http": "h:80", "id": "XYZ", "v": "1\x00",
		}, Tags{Region: "eu", Advertise: Advertise{HTTP: "h:80"}}, []string{`"rack"`, `"quic"`, `"kafka"`, `"pulsar"`, `"id"`, `"v"`}},
		{"long region", map[string]string{"region": strings.Repeat("r", 65)}, Tags{}, []string{"at most 64"}},
	} {
		got, err := ParseTags(c.tags)
		if got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
		if len(c.errs) == 0 && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		for _, e := range c.errs {
			if err == nil || !strings.Contains(err.Error(), e) {
				t.Errorf("%s: error %v lacks %s", c.name, err, e)
			}
		}
	}
}

// FuzzParseTags: any tag map decodes without panicking, the fields it
// accepts are well formed, and publishing them again decodes to the same.
func FuzzParseTags(f *testing.F) {
	f.Add("eu", "r1", placeholderID, "10.0.0.1:7947", "h:9092", "v1", "x", "y")
	f.Add("", "", "", "", "", "", "", "")
	f.Add("eu/1", "r 1", "ABC", ":1", "[::1]:65536", "v\x00", "region", "")
	f.Add(strings.Repeat("a", 64), strings.Repeat("b", 65), strings.Repeat("f", 32), "[fe80::1%eth0]:1", "a:b:c", "é", "id", "0")
	f.Fuzz(func(t *testing.T, region, rack, id, quic, kafka, v, k, val string) {
		m := map[string]string{TagRegion: region, TagRack: rack, TagID: id, TagQUIC: quic, TagKafka: kafka, TagVersion: v, k: val}
		got, err := ParseTags(m)
		if got.Region == "" && err == nil {
			t.Fatalf("no region but no error: %v", m)
		}
		for _, a := range []string{got.QUIC, got.Kafka, got.Pulsar, got.HTTP} {
			if a != "" && validAddr(a) != nil {
				t.Fatalf("accepted bad address %q", a)
			}
		}
		if got.ID != "" && len(got.ID) != idLen {
			t.Fatalf("accepted id %q", got.ID)
		}
		if got.Region == "" {
			return
		}
		cfg := Config{Region: got.Region, Rack: got.Rack, Advertise: got.Advertise}
		again, err := ParseTags(cfg.tags(got.ID))
		if got.ID == "" {
			again.ID = ""
		}
		if err != nil && got.ID != "" {
			t.Fatalf("re-published tags fail: %v", err)
		}
		if again != got {
			t.Fatalf("round trip: %+v -> %+v", got, again)
		}
	})
}
