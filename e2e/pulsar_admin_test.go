package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/ternmq/tern/internal/testcluster"
)

func newAdmin(t testing.TB, n *testcluster.Node) pulsaradmin.Client {
	t.Helper()
	a, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: n.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPulsarAdminTenantsNamespacesTopics drives the admin REST API with the
// Go client's pulsaradmin package.
func TestPulsarAdminTenantsNamespacesTopics(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	a := newAdmin(t, n)

	must(t, a.Tenants().Create(utils.TenantData{Name: "acme", AllowedClusters: []string{"local"}}))
	if err := a.Tenants().Create(utils.TenantData{Name: "acme"}); err == nil || !strings.Contains(err.Error(), "409") && !strings.Contains(err.Error(), "exists") {
		t.Fatalf("creating a tenant twice: %v", err)
	}
	tenants, err := a.Tenants().List()
	must(t, err)
	if !slices.Contains(tenants, "acme") || !slices.Contains(tenants, "public") {
		t.Fatalf("tenants %v", tenants)
	}
	must(t, a.Namespaces().CreateNamespace("acme/orders"))
	nss, err := a.Namespaces().GetNamespaces("acme")
	must(t, err)
	if !slices.Equal(nss, []string{"acme/orders"}) {
		t.Fatalf("namespaces %v", nss)
	}
	// A policy never set reads as Pulsar's broker answers it: retention as
	// {}, a value policy as null.
	policy := func(name string) string {
		t.Helper()
		code, out := httpJSON(t, "GET", n.HTTPURL()+"/admin/v2/namespaces/acme/orders/"+name, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", name, code, out)
		}
		return strings.TrimSpace(string(out))
	}
	for name, want := range map[string]string{"retention": "{}", "messageTTL": "null", "deduplication": "null", "backlogQuotaMap": "{}"} {
		if got := policy(name); got != want {
			t.Errorf("%s never set: %s, want %s", name, got, want)
		}
	}
	must(t, a.Namespaces().SetRetention("acme/orders", utils.RetentionPolicies{RetentionTimeInMinutes: 60, RetentionSizeInMB: 100}))
	ret, err := a.Namespaces().GetRetention("acme/orders")
	must(t, err)
	if ret.RetentionTimeInMinutes != 60 || ret.RetentionSizeInMB != 100 {
		t.Fatalf("retention %+v", ret)
	}
	must(t, a.Namespaces().SetNamespaceMessageTTL("acme/orders", 300))
	if ttl, err := a.Namespaces().GetNamespaceMessageTTL("acme/orders"); err != nil || ttl != 300 {
		t.Fatalf("ttl %d %v", ttl, err)
	}
	must(t, a.Namespaces().SetDeduplicationStatus("acme/orders", true))
	if got := policy("deduplication"); got != "true" {
		t.Errorf("deduplication after setting it: %s", got)
	}
	must(t, a.Namespaces().RemoveNamespaceMessageTTL("acme/orders"))
	if got := policy("messageTTL"); got != "null" {
		t.Errorf("messageTTL after removing it: %s, want null", got)
	}
	must(t, a.Namespaces().SetBacklogQuota("acme/orders", utils.BacklogQuota{LimitSize: 1 << 30, LimitTime: -1, Policy: utils.ProducerException}, utils.DestinationStorage))
	quotas, err := a.Namespaces().GetBacklogQuotaMap("acme/orders")
	must(t, err)
	if q := quotas[utils.DestinationStorage]; q.LimitSize != 1<<30 || q.Policy != utils.ProducerException {
		t.Fatalf("backlog quotas %+v", quotas)
	}

	parts, _ := utils.GetTopicName("persistent://acme/orders/parts")
	single, _ := utils.GetTopicName("persistent://acme/orders/single")
	must(t, a.Topics().Create(*parts, 3))
	must(t, a.Topics().Create(*single, 0))
	if err := a.Topics().Create(*single, 0); err == nil {
		t.Fatal("creating a topic twice succeeded")
	}
	meta, err := a.Topics().GetMetadata(*parts)
	must(t, err)
	if meta.Partitions != 3 {
		t.Fatalf("partitions %d", meta.Partitions)
	}
	must(t, a.Topics().Update(*parts, 4))
	ns, _ := utils.GetNamespaceName("acme/orders")
	partitioned, plain, err := a.Topics().List(*ns)
	must(t, err)
	if !slices.Equal(partitioned, []string{"persistent://acme/orders/parts"}) || len(plain) != 5 {
		t.Fatalf("topics: partitioned %v, others %v", partitioned, plain)
	}
	topics, err := a.Namespaces().GetTopics("acme/orders")
	must(t, err)
	if len(topics) != 5 {
		t.Fatalf("namespace topics %v", topics)
	}

	// A non-empty namespace cannot be deleted; an empty one can.
	if err := a.Namespaces().DeleteNamespace("acme/orders"); err == nil {
		t.Fatal("deleted a namespace with topics")
	}
	must(t, a.Topics().Delete(*parts, false, false))
	must(t, a.Topics().Delete(*single, false, true))
	must(t, a.Namespaces().DeleteNamespace("acme/orders"))
	must(t, a.Tenants().Delete("acme"))

	// Errors come as {"reason": ...} with Pulsar's status codes.
	resp, err := http.Get(n.HTTPURL() + "/admin/v2/persistent/nope/none/x/stats")
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var reason struct{ Reason string }
	if resp.StatusCode != 404 || json.Unmarshal(body, &reason) != nil || reason.Reason == "" {
		t.Fatalf("missing topic: %d %s", resp.StatusCode, body)
	}
}

// TestPulsarAdminSubscriptionsAndStats: stats, internal stats,
// subscription create/skip/reset/delete, and HTTP lookup, against a topic
// the binary protocol writes to.
func TestPulsarAdminSubscriptionsAndStats(t *testing.T) {
	c := testcluster.Start(t)
	n := c.Node(0)
	a := newAdmin(t, n)
	cl := newClient(t, n)
	topic := newTopic(t, "adminsubs")
	tn, _ := utils.GetTopicName(topic)

	must(t, a.Topics().Create(*tn, 0))
	must(t, a.Subscriptions().Create(*tn, "early", utils.Earliest))
	p := mustProducer(t, cl, pulsar.ProducerOptions{Topic: topic, Name: "admin-producer", DisableBatching: true})
	ids := sendAsyncAll(t, p, 10, func(i int) *pulsar.ProducerMessage { return &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))} })
	cons := mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "live", Type: pulsar.Shared, Name: "c1", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	receiveN(t, cons, 4, true)

	subs, err := a.Subscriptions().List(*tn)
	must(t, err)
	if !slices.Equal(subs, []string{"early", "live"}) {
		t.Fatalf("subscriptions %v", subs)
	}
	var st utils.TopicStats
	testcluster.WaitFor(t, 10*time.Second, "acks to reach the broker", func() bool {
		st, err = a.Topics().GetStats(*tn)
		return err == nil && st.Subscriptions["live"].MsgBacklog == 6
	})
	if st.MsgCounterIn != 10 || st.Subscriptions["early"].MsgBacklog != 10 || len(st.Publishers) != 1 || st.Publishers[0].ProducerName != "admin-producer" {
		t.Fatalf("stats %+v", st)
	}
	if live := st.Subscriptions["live"]; live.SubType != "Shared" || len(live.Consumers) != 1 || live.Consumers[0].ConsumerName != "c1" {
		t.Fatalf("live subscription stats %+v", live)
	}
	internal, err := a.Topics().GetInternalStats(*tn)
	must(t, err)
	if internal.NumberOfEntries != 10 || len(internal.Cursors) != 2 || len(internal.Ledgers) != 1 {
		t.Fatalf("internal stats %+v", internal)
	}

	must(t, a.Subscriptions().SkipMessages(*tn, "early", 3))
	st, _ = a.Topics().GetStats(*tn)
	if b := st.Subscriptions["early"].MsgBacklog; b != 7 {
		t.Fatalf("backlog after skipping 3: %d", b)
	}
	must(t, a.Subscriptions().ClearBacklog(*tn, "early"))
	st, _ = a.Topics().GetStats(*tn)
	if b := st.Subscriptions["early"].MsgBacklog; b != 0 {
		t.Fatalf("backlog after skip_all: %d", b)
	}
	// Reset the subscription to #5 and read from there.
	cons.Close()
	must(t, a.Subscriptions().ResetCursorToMessageID(*tn, "live", utils.MessageID{LedgerID: ids[5].LedgerID(), EntryID: ids[5].EntryID(), PartitionIndex: -1}))
	cons = mustSubscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "live", Type: pulsar.Shared, Name: "c2"})
	if got := receiveN(t, cons, 5, false); string(got[0].Payload()) != "5" || string(got[4].Payload()) != "9" {
		t.Fatalf("after resetting to #5: %v", payloads(got))
	}
	if err := a.Subscriptions().Delete(*tn, "live"); err == nil {
		t.Fatal("deleted a subscription with a consumer attached")
	}
	must(t, a.Subscriptions().Delete(*tn, "early"))
	subs, _ = a.Subscriptions().List(*tn)
	if !slices.Equal(subs, []string{"live"}) {
		t.Fatalf("subscriptions after delete %v", subs)
	}

	// HTTP lookup answers with this node's addresses.
	resp, err := http.Get(n.HTTPURL() + "/lookup/v2/topic/persistent/public/default/" + strings.TrimPrefix(topic, "persistent://public/default/"))
	must(t, err)
	var look map[string]string
	must(t, json.NewDecoder(resp.Body).Decode(&look))
	resp.Body.Close()
	if look["brokerUrl"] != n.PulsarURL() {
		t.Fatalf("lookup %v", look)
	}
}
