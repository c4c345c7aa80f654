package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/replicator"
)

// regionsCluster starts one node per region ("us" -> node "us-1") and waits for the mesh.
func regionsCluster(t *testing.T, regions ...string) *testcluster.Cluster {
	t.Helper()
	specs := make([]testcluster.Spec, len(regions))
	for i, r := range regions {
		specs[i] = testcluster.Spec{Name: r + "-1", Region: r}
	}
	c := testcluster.Start(t, specs...)
	c.WaitMesh(20 * time.Second)
	return c
}

// putPolicy writes a policy through the node's HTTP API and fails the test on error.
func putPolicy(t *testing.T, n *testcluster.Node, body map[string]any) replicator.PolicyChange {
	t.Helper()
	status, out := httpJSON(t, "PUT", n.HTTPURL()+"/api/v1/policies", body)
	if status != http.StatusOK {
		t.Fatalf("PUT /api/v1/policies %v: %d %s", body, status, out)
	}
	var ch replicator.PolicyChange
	if err := json.Unmarshal(out, &ch); err != nil {
		t.Fatal(err)
	}
	return ch
}

func httpJSON(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// waitPolicy waits until every running node sees the namespace policy at least at version v.
func waitPolicy(t *testing.T, c *testcluster.Cluster, key replicator.PolicyKey, v int64) {
	t.Helper()
	testcluster.WaitFor(t, 20*time.Second, fmt.Sprintf("policy %s v%d everywhere", key, v), func() bool {
		for _, n := range c.Nodes() {
			p := n.Proxy()
			if p == nil {
				continue
			}
			got, ok := p.Replication().Policy(key)
			if !ok || got.Version < v {
				return false
			}
		}
		return true
	})
}

func nsKey(ns string) replicator.PolicyKey {
	return replicator.PolicyKey{Kind: replicator.KindNamespace, Name: ns}
}

func topicName(t *testing.T, s string) protocols.TopicName {
	t.Helper()
	n, err := protocols.ParseTopicName(s, "public/default")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// produceValues appends one batch per call holding the given values (keys = values).
func produceValues(t *testing.T, n *testcluster.Node, p protocols.Partition, vals ...string) protocols.ProduceResult {
	t.Helper()
	msgs := make([]protocols.Message, len(vals))
	for i, v := range vals {
		msgs[i] = protocols.Message{Timestamp: time.Now().UnixMilli(), Key: []byte(v), Value: []byte(v)}
	}
	b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := n.Proxy().Produce(context.Background(), p, protocols.ProduceRequest{Batch: b})
	if err != nil {
		t.Fatalf("produce to %s on %s: %v", p.Name(), n.Name, err)
	}
	return r
}

// readValues returns every message value of a partition, in log order (empty if the topic does
// not exist yet).
func readValues(t *testing.T, n *testcluster.Node, p protocols.Partition) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	dec := &protocols.Decompressor{}
	off := int64(0)
	for {
		f, err := n.Proxy().Fetch(ctx, p, off, 1<<20)
		if err != nil {
			if strings.Contains(err.Error(), "not found") {
				return nil
			}
			t.Fatalf("fetch %s from %s at %d: %v", p.Name(), n.Name, off, err)
		}
		if len(f.Entries) == 0 {
			return out
		}
		for _, e := range f.Entries {
			de, err := protocols.DecodeEntry(e.Value)
			if err != nil {
				t.Fatal(err)
			}
			ms, err := protocols.Records(de.Batch, de.Header, dec)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				out = append(out, string(m.Value))
			}
			off = e.BaseOffset + e.Count
		}
	}
}

// waitValues waits until the partition on n holds exactly want messages.
func waitCount(t *testing.T, n *testcluster.Node, p protocols.Partition, want int, timeout time.Duration) []string {
	t.Helper()
	var got []string
	deadline := time.Now().Add(timeout)
	for {
		got = readValues(t, n, p)
		if len(got) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != want {
		t.Fatalf("%s on %s holds %d messages, want %d\n%s", p.Name(), n.Name, len(got), want, statusDump(n))
	}
	return got
}

// checkExactlyOnce checks that got holds every expected value once and that the values of each
// origin (the prefix before the first '/') appear in the order they were produced.
func checkExactlyOnce(t *testing.T, where string, got []string, want map[string][]string) {
	t.Helper()
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	total := 0
	for origin, vals := range want {
		total += len(vals)
		var order []string
		for _, v := range got {
			if strings.HasPrefix(v, origin+"/") {
				order = append(order, v)
			}
		}
		if !slices.Equal(order, vals) {
			missing, dups := 0, 0
			for _, v := range vals {
				switch seen[v] {
				case 0:
					missing++
				case 1:
				default:
					dups++
				}
			}
			t.Fatalf("%s: values from %s: %d received, %d expected, %d missing, %d duplicated, or out of order (first got %v)",
				where, origin, len(order), len(vals), missing, dups, head(order, 5))
		}
	}
	if len(got) != total {
		t.Fatalf("%s: %d messages, want %d", where, len(got), total)
	}
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// seq names values origin/tag-000001 ... so order can be checked.
func seq(origin, tag string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = origin + "/" + tag + "-" + strconv.Itoa(1000000 + from + i)[1:]
	}
	return out
}

// statusDump renders a node's replication status for failure messages.
func statusDump(n *testcluster.Node) string {
	p := n.Proxy()
	if p == nil || p.Replication() == nil {
		return "(node stopped)"
	}
	b, _ := json.MarshalIndent(p.Replication().Status(), "", "  ")
	return string(b)
}

// replStatus reads GET /api/v1/replication.
func replStatus(t *testing.T, n *testcluster.Node) replicator.Status {
	t.Helper()
	code, out := httpJSON(t, "GET", n.HTTPURL()+"/api/v1/replication", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/replication: %d %s", code, out)
	}
	var st replicator.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitCaughtUp waits until every stream of n to dest has no lag.
func waitCaughtUp(t *testing.T, n *testcluster.Node, timeout time.Duration) {
	t.Helper()
	testcluster.WaitFor(t, timeout, n.Name+" replication caught up", func() bool {
		st := n.Proxy().Replication().Status()
		for _, s := range st.Streams {
			if s.LagMessages > 0 {
				return false
			}
		}
		return len(st.Streams) > 0
	})
}

// produceMany appends entries of perEntry messages each, named origin/tag-NNNNNN from `from`,
// keeping up to 64 appends in flight so they share fsyncs. It returns the values in order.
func produceMany(t *testing.T, n *testcluster.Node, p protocols.Partition, origin, tag string, from, entries, perEntry int) []string {
	t.Helper()
	ctx := context.Background()
	var all []string
	var pending []protocols.PendingProduce
	flush := func() {
		for _, pp := range pending {
			if _, err := pp.Wait(); err != nil {
				t.Fatalf("produce to %s on %s: %v", p.Name(), n.Name, err)
			}
		}
		pending = pending[:0]
	}
	for i := 0; i < entries; i++ {
		vals := seq(origin, tag, from+i*perEntry, perEntry)
		msgs := make([]protocols.Message, len(vals))
		for j, v := range vals {
			msgs[j] = protocols.Message{Timestamp: time.Now().UnixMilli(), Key: []byte(v), Value: []byte(v)}
		}
		b, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		pp, err := n.Proxy().StartProduce(ctx, p, protocols.ProduceRequest{Batch: b})
		if err != nil {
			t.Fatalf("produce to %s on %s: %v", p.Name(), n.Name, err)
		}
		pending = append(pending, pp)
		all = append(all, vals...)
		if len(pending) == 64 {
			flush()
		}
	}
	flush()
	return all
}

// hw is a partition's high watermark on a node (-1 if it does not exist there yet).
func hw(n *testcluster.Node, p protocols.Partition) int64 {
	px := n.Proxy()
	if px == nil {
		return -1
	}
	o, err := px.Offsets(context.Background(), p)
	if err != nil {
		return -1
	}
	return o.HighWatermark
}

func topicKey(topic string) replicator.PolicyKey {
	return replicator.PolicyKey{Kind: replicator.KindTopic, Name: topic}
}

// topicPartition is the single log of a non-partitioned topic.
func topicPartition(t *testing.T, topic string) protocols.Partition {
	return protocols.Partition{Topic: topicName(t, topic), Index: -1}
}
