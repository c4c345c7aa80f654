package compare

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ternmq/tern/internal/perf"
)

// ServerView is where a tern server's time went in one e2e run, read from
// its /metrics before it stops: for each phase, the upper bound (ms) of the
// histogram bucket holding its 99th percentile, over the whole run (warm-up
// and drain included, as the server cannot tell them apart). It says
// whether an e2e tail was the disk's (a produce's wait), the server's work
// (local), or the client's and the machine's (receive, send).
type ServerView struct {
	System string    `json:"system"`
	Mode   perf.Mode `json:"mode"`
	Round  int       `json:"round"`
	// P99 maps a phase ("Produce wait", "Fetch send", "fdatasync",
	// "Pulsar publish") to its bound in ms; -1 past the last bucket.
	P99 map[string]float64 `json:"p99_ms"`
}

// viewPhases are the series a view reads, in the order it prints them.
var viewPhases = []struct {
	name, family string
	labels       map[string]string
}{
	{"Produce receive", "tern_kafka_request_phase_seconds", map[string]string{"api": "Produce", "phase": "receive"}},
	{"Produce local", "tern_kafka_request_phase_seconds", map[string]string{"api": "Produce", "phase": "local"}},
	{"Produce queue", "tern_kafka_request_phase_seconds", map[string]string{"api": "Produce", "phase": "queue"}},
	{"Produce wait", "tern_kafka_request_phase_seconds", map[string]string{"api": "Produce", "phase": "wait"}},
	{"Produce send", "tern_kafka_request_phase_seconds", map[string]string{"api": "Produce", "phase": "send"}},
	{"Fetch local", "tern_kafka_request_phase_seconds", map[string]string{"api": "Fetch", "phase": "local"}},
	{"Fetch wait", "tern_kafka_request_phase_seconds", map[string]string{"api": "Fetch", "phase": "wait"}},
	{"Fetch send", "tern_kafka_request_phase_seconds", map[string]string{"api": "Fetch", "phase": "send"}},
	{"Pulsar publish", "tern_pulsar_publish_seconds", nil},
	{"fdatasync", "tern_storage_segment_fsync_seconds", nil},
	{"append commit", "tern_storage_append_commit_seconds", nil},
}

// scrapeView reads a tern server's /metrics at base; nil when it has no
// series a view reads (not a tern server, or one that served nothing).
func scrapeView(base string) (map[string]float64, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("compare: %s/metrics: %s", base, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("compare: %s/metrics: %w", base, err)
	}
	return viewOf(fams), nil
}

// viewOf picks the view's 99th percentiles out of parsed metrics.
func viewOf(fams map[string]*dto.MetricFamily) map[string]float64 {
	var out map[string]float64
	for _, ph := range viewPhases {
		for _, m := range fams[ph.family].GetMetric() {
			if !hasLabels(m, ph.labels) || m.GetHistogram().GetSampleCount() == 0 {
				continue
			}
			if out == nil {
				out = map[string]float64{}
			}
			x := bucketQuantile(m.GetHistogram(), 0.99) * 1000
			if math.IsInf(x, 1) {
				x = -1 // JSON has no infinity
			}
			out[ph.name] = x
		}
	}
	return out
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

// bucketQuantile is the upper bound of the bucket holding quantile q of h:
// what a histogram can say without guessing inside a bucket.
func bucketQuantile(h *dto.Histogram, q float64) float64 {
	need := q * float64(h.GetSampleCount())
	for _, b := range h.GetBucket() {
		if float64(b.GetCumulativeCount()) >= need {
			return b.GetUpperBound()
		}
	}
	return math.Inf(1)
}

// viewLines prints each e2e run's server view, one line per run.
func viewLines(views []ServerView, m perf.Mode) string {
	var b strings.Builder
	for _, v := range views {
		if v.Mode != m {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("  server p99 by phase, ms (bucket bounds from tern's /metrics, whole run with warm-up; receive/send: the client and machine, local: the server's work, queue: behind earlier answers, wait: fsync or long poll, append commit: an append's write to its commit):\n")
		}
		var parts []string
		for _, ph := range viewPhases {
			if x, ok := v.P99[ph.name]; ok {
				parts = append(parts, fmt.Sprintf("%s %s", ph.name, bound(x)))
			}
		}
		fmt.Fprintf(&b, "    %s round %d: %s\n", v.System, v.Round, strings.Join(parts, ", "))
	}
	return b.String()
}

func bound(ms float64) string {
	if ms < 0 {
		return "over the last bucket"
	}
	return fmt.Sprintf("<=%.3g", ms)
}
