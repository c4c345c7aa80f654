package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestKafkaRequestPhasesSayWhereTimeWent: tern_kafka_request_phase_seconds
// puts a slow request's time in the phase that held it: a produce whose
// client sent it in two parts 300 ms apart in receive, a fetch's long poll
// in wait, and a request pipelined behind that fetch in queue, with
// nothing of it in wait.
func TestKafkaRequestPhasesSayWhereTimeWent(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic = "phases"
	createTopic(t, addr, topic, 1, nil)
	const gap = 300 * time.Millisecond

	// A produce sent in two parts.
	rc := dialRaw(t, addr)
	b := frame(produceReq(topic, idemBatch(t, -1, -1, -1, 3)), 1, "raw-test")
	if _, err := rc.c.Write(b[:len(b)/2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(gap)
	if _, err := rc.c.Write(b[len(b)/2:]); err != nil {
		t.Fatal(err)
	}
	rc.readFrame()

	// A fetch that waits out its MaxWait, and a metadata request behind it.
	rc = dialRaw(t, addr)
	fetch := fetchReq(topic, 3, gap)
	fetch.MinBytes = 1 << 20
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	if _, err := rc.c.Write(append(frame(fetch, 1, "raw-test"), frame(meta, 2, "raw-test")...)); err != nil {
		t.Fatal(err)
	}
	rc.readFrame()
	rc.readFrame()

	// The observer runs once the response is written; the client has it
	// by then, but the scrape may still race the last observation.
	deadline := time.Now().Add(5 * time.Second)
	for {
		long, all := phaseCounts(t, node, 0.25)
		var bad []string
		want := func(api, phase string, ok bool, what string) {
			if !ok {
				bad = append(bad, api+" "+phase+": "+what)
			}
		}
		want("Produce", "receive", long["Produce/receive"] == 1, "want the split produce's one long receive")
		want("Fetch", "wait", long["Fetch/wait"] == 1, "want the long poll in wait")
		want("Metadata", "queue", long["Metadata/queue"] == 1, "want the metadata request queued behind the fetch")
		for _, k := range []string{"Produce/local", "Produce/queue", "Produce/send", "Fetch/receive", "Fetch/queue", "Metadata/wait", "Metadata/local"} {
			want(k, "", long[k] == 0, "want none of it over 250 ms")
		}
		// Each answered request is counted once in each phase.
		for _, api := range []string{"Produce", "Fetch", "Metadata"} {
			n := all[api+"/local"]
			for _, ph := range []string{"receive", "queue", "wait", "send"} {
				want(api, ph, all[api+"/"+ph] == n && n > 0, "want as many observations as the other phases")
			}
		}
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("phases: %v\nover 250 ms: %v\ncounts: %v", bad, long, all)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// phaseCounts scrapes the phase histogram: per "API/phase", how many
// observations were over the bucket bound above, and how many in all.
func phaseCounts(t *testing.T, n *testcluster.Node, above float64) (long, all map[string]uint64) {
	t.Helper()
	fam := scrape(t, n)["tern_kafka_request_phase_seconds"]
	if fam == nil {
		t.Fatal("/metrics has no tern_kafka_request_phase_seconds")
	}
	long, all = map[string]uint64{}, map[string]uint64{}
	for _, m := range fam.GetMetric() {
		var api, phase string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "api":
				api = l.GetValue()
			case "phase":
				phase = l.GetValue()
			}
		}
		h := m.GetHistogram()
		k := api + "/" + phase
		all[k] = h.GetSampleCount()
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == above {
				long[k] = h.GetSampleCount() - b.GetCumulativeCount()
			}
		}
	}
	return long, all
}
