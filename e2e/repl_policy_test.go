package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/replicator"
)

// TestReplRegionAddedLater: a region added to a policy with start "earliest" receives the
// history; one added with "latest" receives only what comes after.
func TestReplRegionAddedLater(t *testing.T) {
	c := regionsCluster(t, "us", "eu", "ap", "sa")
	us, eu, ap, sa := c.Node(0), c.Node(1), c.Node(2), c.Node(3)
	ch := putPolicy(t, us, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu"}})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	name := topicName(t, "history")
	if _, err := us.Proxy().CreateTopic(context.Background(), name, 0, nil); err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: -1}
	hist := produceMany(t, us, p, "us", "h", 0, 100, 5)
	waitCount(t, eu, p, len(hist), 20*time.Second)
	// Nothing goes to regions outside the policy.
	for _, s := range us.Proxy().Replication().Status().Streams {
		if s.Topic == name.String() && s.Destination != "eu" {
			t.Fatalf("us replicates to %s before it joined the policy: %+v", s.Destination, s)
		}
	}
	if got := readValues(t, ap, p); len(got) != 0 {
		t.Fatalf("ap holds %d messages before it joined the policy", len(got))
	}
	euHist := produceMany(t, eu, p, "eu", "h", 0, 20, 5)
	waitCount(t, us, p, len(hist)+len(euHist), 20*time.Second)

	// Add ap from the earliest offset, with a compare-and-set on the version read.
	v := ch.Policy.Version
	ch = putPolicy(t, eu, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu", "ap"}, "if_version": v})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	want := map[string][]string{"us": hist, "eu": euHist}
	checkExactlyOnce(t, "ap", waitCount(t, ap, p, len(hist)+len(euHist), 20*time.Second), want)
	// Wait for the new cursors to exist and be drained before adding sa from the latest offset.
	for _, n := range []*testcluster.Node{us, eu} {
		waitCaughtUp(t, n, 10*time.Second)
	}
	ch = putPolicy(t, ap, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu", "ap", "sa"},
		"start": map[string]string{"sa": "latest"}})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	testcluster.WaitFor(t, 10*time.Second, "senders to sa", func() bool {
		for _, n := range []*testcluster.Node{us, eu, ap} {
			s, ok := streamTo(n, name, -1, "sa")
			if !ok || s.State != replicator.StreamActive {
				return false
			}
		}
		return true
	})
	after := map[string][]string{}
	for _, n := range []*testcluster.Node{us, eu, ap} {
		after[n.Region] = produceMany(t, n, p, n.Region, "after", 0, 10, 2)
	}
	checkExactlyOnce(t, "sa", waitCount(t, sa, p, 60, 20*time.Second), after)
	for _, n := range []*testcluster.Node{us, eu, ap} {
		want[n.Region] = append(want[n.Region], after[n.Region]...)
	}
	for _, n := range []*testcluster.Node{us, eu, ap} {
		want := map[string][]string{"us": append(append([]string{}, hist...), after["us"]...),
			"eu": append(append([]string{}, euHist...), after["eu"]...), "ap": after["ap"]}
		checkExactlyOnce(t, n.Name, waitCount(t, n, p, len(hist)+len(euHist)+60, 20*time.Second), want)
	}
}

// TestReplPartitionCountMismatch: a topic with other partition counts in two regions is refused
// with advice; the status says so and is unhealthy; growing the smaller side fixes it.
func TestReplPartitionCountMismatch(t *testing.T) {
	c := regionsCluster(t, "us", "eu")
	us, eu := c.Node(0), c.Node(1)
	name := topicName(t, "uneven")
	if _, err := us.Proxy().CreateTopic(context.Background(), name, 3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := eu.Proxy().CreateTopic(context.Background(), name, 2, nil); err != nil {
		t.Fatal(err)
	}
	ch := putPolicy(t, us, map[string]any{"topic": name.String(), "regions": []string{"us", "eu"}})
	waitPolicy(t, c, replicator.PolicyKey{Kind: replicator.KindTopic, Name: name.String()}, ch.Policy.Version)
	p := protocols.Partition{Topic: name, Index: 2}
	vals := produceMany(t, us, p, "us", "u", 0, 5, 2)
	testcluster.WaitFor(t, 15*time.Second, "the mismatch to be reported", func() bool {
		s, ok := streamTo(us, name, 2, "eu")
		return ok && s.State == replicator.StreamRefused && strings.Contains(s.LastError, "partition count mismatch") &&
			strings.Contains(s.LastError, "grow it to 3 partitions in region eu")
	})
	if st := replStatus(t, us); st.Summary.Healthy {
		t.Fatalf("summary healthy with a refused stream: %+v", st.Summary)
	}
	if err := eu.Proxy().SetPartitions(context.Background(), name, 3); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, "eu", waitCount(t, eu, p, len(vals), 30*time.Second), map[string][]string{"us": vals})
	testcluster.WaitFor(t, 10*time.Second, "the stream to recover", func() bool {
		s, ok := streamTo(us, name, 2, "eu")
		return ok && s.State == replicator.StreamActive && s.LagMessages == 0
	})
}

// TestReplPolicyAPI: validation with the list of known regions, compare-and-set, dry run,
// deletion, and Pulsar's admin endpoints, across regions.
func TestReplPolicyAPI(t *testing.T) {
	c := regionsCluster(t, "us", "eu")
	us, eu := c.Node(0), c.Node(1)
	code, out := httpJSON(t, "PUT", us.HTTPURL()+"/api/v1/policies", map[string]any{"namespace": "public/default", "regions": []string{"us", "mars"}})
	if code != http.StatusBadRequest || !strings.Contains(string(out), "unknown regions mars") || !strings.Contains(string(out), `"known_regions"`) ||
		!strings.Contains(string(out), "eu, us") {
		t.Fatalf("unknown region: %d %s", code, out)
	}
	code, out = httpJSON(t, "PUT", us.HTTPURL()+"/api/v1/policies", map[string]any{"namespace": "public/default", "regions": []string{"us", "eu"},
		"topology": "hub"})
	if code != http.StatusBadRequest || !strings.Contains(string(out), "hub") {
		t.Fatalf("hub topology without a hub: %d %s", code, out)
	}
	// Dry run: nothing written.
	code, out = httpJSON(t, "PUT", us.HTTPURL()+"/api/v1/policies", map[string]any{"namespace": "acme/orders", "regions": []string{"us", "eu"}, "dry_run": true})
	if code != http.StatusOK || !strings.Contains(string(out), `"applied": false`) {
		t.Fatalf("dry run: %d %s", code, out)
	}
	if _, ok := us.Proxy().Replication().Policy(nsKey("acme/orders")); ok {
		t.Fatal("a dry run wrote the policy")
	}
	ch := putPolicy(t, us, map[string]any{"namespace": "acme/orders", "regions": []string{"us", "eu"}, "if_version": 0})
	if ch.Policy.Version != 1 || ch.Previous != nil {
		t.Fatalf("first write: %+v", ch)
	}
	waitPolicy(t, c, nsKey("acme/orders"), 1)
	// A stale compare-and-set is refused with the current version.
	code, out = httpJSON(t, "PUT", eu.HTTPURL()+"/api/v1/policies", map[string]any{"namespace": "acme/orders", "regions": []string{"eu"}, "if_version": 0})
	if code != http.StatusConflict || !strings.Contains(string(out), `"current_version": 1`) {
		t.Fatalf("stale CAS: %d %s", code, out)
	}
	// Pulsar's endpoints read and write the region list.
	var regions []string
	getJSON(t, eu.HTTPURL()+"/admin/v2/namespaces/acme/orders/replication", &regions)
	if !slices.Equal(regions, []string{"eu", "us"}) {
		t.Fatalf("pulsar GET: %v", regions)
	}
	code, out = httpJSON(t, "POST", eu.HTTPURL()+"/admin/v2/namespaces/acme/orders/replication", []string{"eu"})
	if code != http.StatusNoContent {
		t.Fatalf("pulsar POST: %d %s", code, out)
	}
	waitPolicy(t, c, nsKey("acme/orders"), 2)
	getJSON(t, us.HTTPURL()+"/admin/v2/namespaces/acme/orders/replication", &regions)
	if !slices.Equal(regions, []string{"eu"}) {
		t.Fatalf("pulsar GET after POST in the other region: %v", regions)
	}
	code, out = httpJSON(t, "POST", us.HTTPURL()+"/admin/v2/namespaces/acme/orders/replication", []string{"eu", "atlantis"})
	if code != http.StatusPreconditionFailed || !strings.Contains(string(out), `"reason"`) || !strings.Contains(string(out), "atlantis") {
		t.Fatalf("pulsar POST with an unknown cluster: %d %s", code, out)
	}
	// A namespace without a policy stays in its region.
	getJSON(t, us.HTTPURL()+"/admin/v2/namespaces/public/default/replication", &regions)
	if !slices.Equal(regions, []string{"us"}) {
		t.Fatalf("default: %v", regions)
	}
	// Topic level: set, read (own and applied), delete.
	topic := "/admin/v2/persistent/acme/orders/payments/replication"
	if code, out := httpJSON(t, "POST", us.HTTPURL()+topic, []string{"us", "eu"}); code != http.StatusNoContent {
		t.Fatalf("topic POST: %d %s", code, out)
	}
	tkey := replicator.PolicyKey{Kind: replicator.KindTopic, Name: "persistent://acme/orders/payments"}
	waitPolicy(t, c, tkey, 1)
	getJSON(t, eu.HTTPURL()+topic, &regions)
	if !slices.Equal(regions, []string{"eu", "us"}) {
		t.Fatalf("topic GET: %v", regions)
	}
	if code, out := httpJSON(t, "DELETE", eu.HTTPURL()+topic, nil); code != http.StatusNoContent {
		t.Fatalf("topic DELETE: %d %s", code, out)
	}
	waitPolicy(t, c, tkey, 2)
	if code, out := httpJSON(t, "GET", us.HTTPURL()+topic, nil); code != http.StatusNoContent || len(out) != 0 {
		t.Fatalf("topic GET after DELETE: %d %q", code, out)
	}
	getJSON(t, us.HTTPURL()+topic+"?applied=true", &regions)
	if !slices.Equal(regions, []string{"eu"}) {
		t.Fatalf("applied: %v (the namespace's)", regions)
	}
	// The list endpoint shows every record and the known regions.
	var list struct {
		Regions  []string            `json:"regions"`
		Policies []replicator.Policy `json:"policies"`
	}
	getJSON(t, eu.HTTPURL()+"/api/v1/policies?deleted=true", &list)
	if !slices.Equal(list.Regions, []string{"eu", "us"}) || len(list.Policies) != 2 || !list.Policies[1].Deleted {
		t.Fatalf("list: %+v", list)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, out := httpJSON(t, "GET", url, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, out)
	}
}

// TestReplReplicateTo: entries restricted by the producer (Pulsar replicate_to, or disabled
// replication) go only where they are allowed.
func TestReplReplicateTo(t *testing.T) {
	c := regionsCluster(t, "us", "eu", "ap")
	us, eu, ap := c.Node(0), c.Node(1), c.Node(2)
	ch := putPolicy(t, us, map[string]any{"namespace": "public/default", "regions": []string{"us", "eu", "ap"}})
	waitPolicy(t, c, nsKey("public/default"), ch.Policy.Version)
	name := topicName(t, "restricted")
	if _, err := us.Proxy().CreateTopic(context.Background(), name, 0, nil); err != nil {
		t.Fatal(err)
	}
	p := protocols.Partition{Topic: name, Index: -1}
	send := func(v string, to []string) {
		msgs := []protocols.Message{{Timestamp: time.Now().UnixMilli(), Value: []byte(v)}}
		b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		var env protocols.Envelope
		if to != nil {
			if err := protocols.SetReplicateTo(&env, to); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := us.Proxy().Produce(context.Background(), p, protocols.ProduceRequest{Envelope: env, Batch: b}); err != nil {
			t.Fatal(err)
		}
	}
	send("us/all-1", nil)
	send("us/eu-only", []string{"eu"})
	send("us/local", []string{protocols.ReplicateLocalOnly})
	send("us/ap-only", []string{"ap", "us"})
	send("us/all-2", nil)
	checkExactlyOnce(t, "eu", waitCount(t, eu, p, 3, 20*time.Second), map[string][]string{"us": {"us/all-1", "us/eu-only", "us/all-2"}})
	checkExactlyOnce(t, "ap", waitCount(t, ap, p, 3, 20*time.Second), map[string][]string{"us": {"us/all-1", "us/ap-only", "us/all-2"}})
	waitCaughtUp(t, us, 10*time.Second) // filtered entries do not leave a lag behind
}

// TestReplStatusCLI: `tern status` shows the replication section: health, links and streams,
// in the table and in --json.
func TestReplStatusCLI(t *testing.T) {
	bin := buildTern(t)
	c, name := twoRegions(t, "cli")
	us, eu := c.Node(0), c.Node(1)
	p := protocols.Partition{Topic: name, Index: 1}
	vals := produceMany(t, us, p, "us", "c", 0, 3, 2)
	waitCount(t, eu, p, len(vals), 20*time.Second)
	waitCaughtUp(t, us, 10*time.Second)
	out, err := exec.Command(bin, "status", "--url", us.HTTPURL()).CombinedOutput()
	if err != nil {
		t.Fatalf("tern status: %v\n%s", err, out)
	}
	for _, w := range []string{"replication: healthy", "LINK", "eu-1", "public/default/cli", "TOPIC", "active"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("status lacks %q:\n%s", w, out)
		}
	}
	out, err = exec.Command(bin, "status", "--json", "--url", us.HTTPURL()).CombinedOutput()
	if err != nil {
		t.Fatalf("tern status --json: %v\n%s", err, out)
	}
	var rep struct {
		Replication *replicator.Status `json:"replication"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || rep.Replication == nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	found := false
	for _, s := range rep.Replication.Streams {
		if s.Topic == name.String() && s.Partition == 1 && s.Destination == "eu" {
			found = s.Cursor == int64(len(vals)) && s.LagMessages == 0
		}
	}
	if !found {
		t.Fatalf("stream of partition 1 to eu missing or lagging: %+v", rep.Replication.Streams)
	}
}
