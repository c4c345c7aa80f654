package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
)

type nopSink struct{}

func (nopSink) Deliver(protocols.Delivery) {}
func (nopSink) ActiveChanged(bool)         {}
func (nopSink) Ended(error)                {}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

type apiTopic struct {
	Name          string   `json:"name"`
	Partitions    int      `json:"partitions"`
	Messages      int64    `json:"messages"`
	Backlog       int64    `json:"backlog"`
	Subscriptions int      `json:"subscriptions"`
	MsgRateIn     *float64 `json:"msgRateIn"`
	BytesRateIn   *float64 `json:"bytesRateIn"`
	Logs          []struct {
		Partition int   `json:"partition"`
		End       int64 `json:"end"`
	} `json:"logs"`
	SubscriptionList []struct {
		Name         string  `json:"name"`
		Backlog      int64   `json:"backlog"`
		PerPartition []int64 `json:"perPartition"`
		Consumers    []struct {
			Name      string `json:"name"`
			Partition int    `json:"partition"`
		} `json:"consumers"`
	} `json:"subscriptionList"`
	Groups []struct {
		Name      string  `json:"name"`
		Lag       int64   `json:"lag"`
		Committed []int64 `json:"committed"`
	} `json:"groups"`
}

// TestConsoleAPI: the console's topic list and detail report counts,
// backlog per subscription and partition, Kafka group lag, and rates once
// two samples a second apart exist.
func TestConsoleAPI(t *testing.T) {
	n := testcluster.Start(t).Node(0)
	ctx := context.Background()
	name, _ := protocols.ParseTopicName("console-orders", "public/default")
	if _, err := n.Proxy().CreateTopic(ctx, name, 2, nil); err != nil {
		t.Fatal(err)
	}
	p0 := protocols.Partition{Topic: name, Index: 0}
	p1 := protocols.Partition{Topic: name, Index: 1}
	cons, err := n.Proxy().Subscribe(ctx, p0, protocols.SubscribeRequest{Subscription: "sub", Durable: true, ConsumerName: "c0",
		Start: protocols.StartPosition{Kind: protocols.StartEarliest}}, nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for _, p := range []protocols.Partition{p0, p0, p1} {
		if _, err := n.Proxy().Produce(ctx, p, protocols.ProduceRequest{Batch: batchOf(t, "a", "b")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Proxy().CommitOffsets(ctx, "g1", []protocols.CommittedOffset{{Partition: p0, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	var list struct{ Topics []apiTopic }
	if s := getJSON(t, n.HTTPURL()+"/api/v1/console/topics", &list); s != 200 {
		t.Fatalf("list: HTTP %d", s)
	}
	var row *apiTopic
	for i := range list.Topics {
		if list.Topics[i].Name == name.String() {
			row = &list.Topics[i]
		}
	}
	if row == nil || row.Partitions != 2 || row.Messages != 6 || row.Subscriptions != 1 || row.Backlog != 4 || row.MsgRateIn != nil {
		t.Fatalf("row %+v", row)
	}
	var d apiTopic
	if s := getJSON(t, n.HTTPURL()+"/api/v1/console/topics/public/default/console-orders", &d); s != 200 {
		t.Fatalf("detail: HTTP %d", s)
	}
	if len(d.Logs) != 2 || d.Logs[0].End != 4 || d.Logs[1].End != 2 || len(d.SubscriptionList) != 1 {
		t.Fatalf("detail %+v", d)
	}
	sub := d.SubscriptionList[0]
	if sub.Name != "sub" || sub.Backlog != 4 || len(sub.PerPartition) != 2 || sub.PerPartition[0] != 4 || len(sub.Consumers) != 1 || sub.Consumers[0].Name != "c0" {
		t.Fatalf("subscription %+v", sub)
	}
	if len(d.Groups) != 1 || d.Groups[0].Name != "g1" || d.Groups[0].Lag != 3 || d.Groups[0].Committed[1] != -1 {
		t.Fatalf("groups %+v", d.Groups)
	}
	// Rates: produce between samples until a rate shows.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := n.Proxy().Produce(ctx, p1, protocols.ProduceRequest{Batch: batchOf(t, "x")}); err != nil {
			t.Fatal(err)
		}
		var r apiTopic
		getJSON(t, n.HTTPURL()+"/api/v1/console/topics/public/default/console-orders", &r)
		if r.MsgRateIn != nil && *r.MsgRateIn > 0 && r.BytesRateIn != nil && *r.BytesRateIn > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no rate after 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := getJSON(t, n.HTTPURL()+"/api/v1/console/topics/public/default/nope", &d); s != http.StatusNotFound {
		t.Fatalf("missing topic: HTTP %d", s)
	}
	var node map[string]any
	if s := getJSON(t, n.HTTPURL()+"/api/v1/node", &node); s != 200 || node["name"] != "node-1" || node["topics"].(float64) < 1 {
		t.Fatalf("node %v", node)
	}
}
