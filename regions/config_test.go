package regions

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Timings != WANTimings() || cfg.BindAddr != ":7946" || cfg.Region != "local" || !cfg.RejoinAfterLeave {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NodeName = "bad name"
	cfg.Region = ""
	cfg.Rack = "r/1"
	cfg.MeshName = ""
	cfg.BindAddr = "localhost:7946"
	cfg.AdvertiseAddr = "example.com"
	cfg.Seeds = []string{"10.0.0.1:7946", "10.0.0.2", ":7946", "10.0.0.3:99999"}
	cfg.JoinRetryMin = 0
	cfg.JoinRetryMax = -1
	cfg.EncryptKey = "short"
	cfg.LeaveTimeout = 0
	cfg.SubscriberBuffer = 0
	cfg.Advertise.QUIC = "no-port"
	cfg.Advertise.Version = "v\n1"
	cfg.Timings.ProbeTimeout = cfg.Timings.ProbeInterval
	cfg.Timings.SuspicionMult = 0
	cfg.Timings.GossipInterval = 0
	err := cfg.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate: %v", err)
	}
	for _, want := range []string{
		"NodeName \"bad name\" contains ' '", "Region is empty", "Rack \"r/1\"", "MeshName is empty",
		"BindAddr \"localhost:7946\": the host must be an IP", "AdvertiseAddr \"example.com\"",
		"Seeds[1] \"10.0.0.2\"", "Seeds[2] \":7946\": the host is empty", "Seeds[3]", "JoinRetryMin", "JoinRetryMax",
		"EncryptKey", "LeaveTimeout", "SubscriberBuffer", "Advertise.QUIC", "Advertise.Version",
		"Timings.ProbeTimeout", "Timings.SuspicionMult", "Timings.GossipInterval",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "Seeds[0]") {
		t.Errorf("a good seed was reported: %v", err)
	}
}

func TestValidateKeys(t *testing.T) {
	for _, c := range []struct {
		key string
		ok  bool
	}{
		{key1, true}, {key2, true}, {"AAECAwQFBgcICQoLDA0ODxAREhMUFRYX", true}, // 16, 32, 24 bytes
		{"AAECAwQFBgcICQoLDA0O", false}, // 15 bytes
		{"!!!!", false},
	} {
		cfg := DefaultConfig()
		cfg.EncryptKey = c.key
		err := cfg.Validate()
		if (err == nil) != c.ok {
			t.Errorf("key %q: %v", c.key, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("key %q: %v does not wrap ErrInvalidKey", c.key, err)
		}
	}
}

func TestTagBudget(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Advertise = Advertise{QUIC: "q.example:7947", Kafka: "k.example:9092", Pulsar: "p.example:6650", HTTP: "h.example:8080"}
	base := encodedTagsLen(cfg.tags(placeholderID))
	// Fill the version to exactly serf's limit: accepted by Validate and
	// by serf itself.
	cfg.Advertise.Version = strings.Repeat("v", 512-base)
	if n := encodedTagsLen(cfg.tags(placeholderID)); n != 512 {
		// The msgpack string header grows at 32 and 256 bytes; adjust.
		cfg.Advertise.Version = cfg.Advertise.Version[:len(cfg.Advertise.Version)-(n-512)]
	}
	if n := encodedTagsLen(cfg.tags(placeholderID)); n != 512 {
		t.Fatalf("could not build 512-byte tags: %d", n)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("512 bytes rejected: %v", err)
	}
	cfg.NodeName = "budget"
	cfg.BindAddr = "127.0.0.1:0"
	cfg.Timings = fastTimings()
	cfg.LeaveTimeout = time.Second
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("serf disagrees about the 512-byte budget: %v", err)
	}
	m.Close()

	cfg.Advertise.Version += "v"
	err = cfg.Validate()
	if !errors.Is(err, ErrTagsTooLarge) {
		t.Fatalf("513 bytes: %v", err)
	}
	if !strings.Contains(err.Error(), "by 1 bytes") || !strings.Contains(err.Error(), "largest first: v (") {
		t.Errorf("error does not say what to shorten: %v", err)
	}
}

func TestTimingsFormulas(t *testing.T) {
	wan, lan := WANTimings(), LANTimings()
	// memberlist's documented figures: WAN with 10 nodes suspects for 30s,
	// up to 180s; LAN for 4s.
	if got := wan.SuspicionTimeout(10); got != 30*time.Second {
		t.Errorf("WAN suspicion(10) = %v", got)
	}
	if got := wan.SuspicionMaxTimeout(10); got != 180*time.Second {
		t.Errorf("WAN max suspicion(10) = %v", got)
	}
	if got := lan.SuspicionTimeout(10); got != 4*time.Second {
		t.Errorf("LAN suspicion(10) = %v", got)
	}
	if got := wan.SuspicionTimeout(1); got != 30*time.Second {
		t.Errorf("WAN suspicion(1) = %v", got)
	}
	prev := time.Duration(0)
	for _, n := range []int{2, 3, 10, 100} {
		b := wan.FailureDetectionBound(n)
		if b <= prev || b < wan.SuspicionMaxTimeout(n) {
			t.Errorf("bound(%d) = %v after %v", n, b, prev)
		}
		prev = b
	}
}
