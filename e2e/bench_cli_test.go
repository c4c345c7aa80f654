package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestBenchCommand runs `tern bench` briefly against a node: the table
// with its percentile columns, the JSON with counts and the server's RSS
// from /metrics, the WebSocket driver, and the message naming the build
// command when Pulsar's companion binary is missing.
func TestBenchCommand(t *testing.T) {
	bin := buildTern(t)
	node := testcluster.Start(t).Node(0)
	common := []string{"--kafka-addr", node.KafkaAddr(), "--url", "http://" + node.Config.Listeners.HTTP,
		"--warmup", "0s", "--duration", "1s", "--size", "200"}

	out, err := exec.Command(bin, append([]string{"bench", "e2e", "--rate", "1000"}, common...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("bench e2e: %v\n%s", err, out)
	}
	for _, want := range []string{"tern/kafka e2e", "publish", "end-to-end", "p99.9 ms", "load average", "machine speed (CRC-32C of a cached MiB): start ", "server: RSS peak"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	cmd := exec.Command(bin, append([]string{"bench", "produce", "--json"}, common...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench produce --json: %v\n%s", err, stderr.String())
	}
	var res struct {
		Mode    string `json:"mode"`
		Publish struct {
			Messages int64   `json:"messages"`
			Rate     float64 `json:"msgs_per_s"`
			Latency  struct {
				P99 float64 `json:"p99_ms"`
			} `json:"latency"`
		} `json:"publish"`
		Server struct {
			RSS int64 `json:"rss_peak_bytes"`
		} `json:"server"`
		LoadStart  []float64 `json:"load_start"`
		SpeedStart float64   `json:"speed_start_gbps"`
		SpeedEnd   float64   `json:"speed_end_gbps"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("JSON: %v\n%s", err, raw)
	}
	if res.Mode != "produce" || res.Publish.Messages <= 0 || res.Publish.Rate <= 0 || res.Publish.Latency.P99 <= 0 || res.Server.RSS <= 0 || len(res.LoadStart) != 3 || res.SpeedStart <= 0 || res.SpeedEnd <= 0 {
		t.Errorf("JSON result %+v from\n%s", res, raw)
	}

	// The WebSocket load generator is built into tern.
	out, err = exec.Command(bin, append([]string{"bench", "produce", "--protocol", "websocket", "--ws-url", "ws://" + node.Config.Listeners.HTTP}, common...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("bench produce --protocol websocket: %v\n%s", err, out)
	}
	for _, want := range []string{"tern/websocket produce", "publish", "p99.9 ms", "server: RSS peak"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("websocket output lacks %q:\n%s", want, out)
		}
	}

	out, err = exec.Command(bin, "bench", "produce", "--protocol", "kafka", "--no-batching").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--no-batching is for --protocol pulsar") {
		t.Errorf("--no-batching with kafka: %v\n%s", err, out)
	}

	cmd = exec.Command(bin, "bench", "produce", "--protocol", "pulsar")
	cmd.Env = append(os.Environ(), "PATH=/nonexistent")
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "go build -o") {
		t.Errorf("--protocol pulsar without tern-bench: %v\n%s", err, out)
	}
}
