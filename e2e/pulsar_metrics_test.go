package e2e

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestPulsarMetricsCountTheTraffic: /metrics counts what Pulsar clients
// did, as a Pulsar broker's metrics do: SENDs and their messages in,
// messages out to consumers, producers and consumers attached, commands
// by type, each SEND's publish latency, and connections closed for a bad
// frame: after CONNECT, or in its place (a Kafka client at the Pulsar port).
func TestPulsarMetricsCountTheTraffic(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	cl := newClient(t, n)
	topic := newTopic(t, "metrics")
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	// Batches of exactly ten: the delay never ends one.
	batched := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Hour})
	sendAsyncAll(t, batched, 30, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("b%d", i))}
	})
	single := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	send(t, single, &pulsar.ProducerMessage{Payload: []byte("alone")})
	receiveN(t, cons, 31, true)

	want := map[string]float64{
		"tern_pulsar_in_entries_total":               4,
		"tern_pulsar_in_messages_total":              31,
		"tern_pulsar_out_messages_total":             31,
		"tern_pulsar_producers":                      2,
		"tern_pulsar_consumers":                      1,
		`tern_pulsar_commands_total{command="SEND"}`: 4,
		"tern_pulsar_publish_seconds_count":          4,
		"tern_pulsar_protocol_errors_total":          0,
	}
	waitMetrics(t, n, want)

	// A connection that sends garbage after CONNECT is closed and counted.
	r := dialPulsarRaw(t, n)
	r.connect()
	r.write([]byte{0, 0, 0, 8, 0, 0, 0, 100, 0, 0, 0, 0})
	if !r.closed() {
		t.Fatal("the broker kept the connection open")
	}
	single.Close()
	want["tern_pulsar_protocol_errors_total"] = 1
	want["tern_pulsar_producers"] = 1
	waitMetrics(t, n, want)

	// A Kafka client's first request where CONNECT should be is counted
	// too; a connection that closes before sending anything is not.
	kr := dialPulsarRaw(t, n)
	kr.write(frame(kmsg.NewPtrApiVersionsRequest(), 1, "kafka-client"))
	if !kr.closed() {
		t.Fatal("the broker kept open a connection that started with a Kafka request")
	}
	dialPulsarRaw(t, n).c.Close()
	want["tern_pulsar_protocol_errors_total"] = 2
	waitMetrics(t, n, want)
	if got := scrapeValue(t, n, "tern_pulsar_connections_total"); got < 2 {
		t.Errorf("tern_pulsar_connections_total %v, want the client's and the raw one", got)
	}
}

// A client that closes or resets its connection in the middle of a frame
// has gone away; it has not sent a bad frame. (The Go client does both
// when it answers a SEND_ERROR by reconnecting while its next SENDs are
// still being written.) A frame that is bad is still counted.
func TestPulsarConnectionEndedMidFrameIsNoProtocolError(t *testing.T) {
	n := testcluster.Start(t).Node(0)
	want := map[string]float64{"tern_pulsar_protocol_errors_total": 0, "tern_pulsar_connections": 0}
	for _, reset := range []bool{false, true} {
		r := dialPulsarRaw(t, n)
		r.connect()
		// A 1000-byte frame, 10 bytes of it sent.
		r.write([]byte{0, 0, 0x03, 0xe8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
		if reset {
			if err := r.c.(*net.TCPConn).SetLinger(0); err != nil { // Close sends a reset
				t.Fatal(err)
			}
		}
		r.c.Close()
		waitMetrics(t, n, want)
	}

	// The control: a frame too small to hold its command is counted.
	r := dialPulsarRaw(t, n)
	r.connect()
	r.write([]byte{0, 0, 0, 1, 0})
	if !r.closed() {
		t.Fatal("the broker kept the connection open")
	}
	want["tern_pulsar_protocol_errors_total"] = 1
	waitMetrics(t, n, want)
}

// waitMetrics waits up to 10s for /metrics to give every value in want
// (names with a label in braces pick that series).
func waitMetrics(t *testing.T, n *testcluster.Node, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string]float64{}
		fams := scrape(t, n)
		for name := range want {
			got[name] = familyValue(fams, name)
		}
		bad := false
		for name, v := range want {
			bad = bad || got[name] != v
		}
		if !bad {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics: got %v, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func scrapeValue(t *testing.T, n *testcluster.Node, name string) float64 {
	t.Helper()
	return familyValue(scrape(t, n), name)
}

func scrape(t *testing.T, n *testcluster.Node) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(n.HTTPURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// familyValue is the value of the series name gives: "metric", or
// `metric{label="value"}` for the series with that label; a histogram's
// "_count" suffix gives its sample count. -1 when there is none.
func familyValue(fams map[string]*dto.MetricFamily, name string) float64 {
	name, sel, _ := strings.Cut(strings.TrimSuffix(name, "}"), "{")
	label, value, _ := strings.Cut(sel, "=")
	value = strings.Trim(value, `"`)
	fam, count := fams[name], false
	if base, ok := strings.CutSuffix(name, "_count"); ok && fam == nil {
		fam, count = fams[base], true
	}
	for _, m := range fam.GetMetric() {
		if label != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == label && l.GetValue() == value
		}) {
			continue
		}
		switch {
		case count:
			return float64(m.GetHistogram().GetSampleCount())
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
