package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/ternmq/tern/internal/testcluster"
)

// pulsarProduceOrigin publishes per messages to each partition of a partitioned topic through
// pulsar-client-go (batching on, a router that picks the partition from the key) and returns the
// values per partition in the order sent.
func pulsarProduceOrigin(t *testing.T, n *testcluster.Node, topic string, parts, per int) map[int32][]string {
	t.Helper()
	c := newClient(t, n)
	p := mustProducer(t, c, pulsar.ProducerOptions{
		Topic: topic, BatchingMaxPublishDelay: 2 * time.Millisecond,
		MessageRouter: func(m *pulsar.ProducerMessage, _ pulsar.TopicMetadata) int {
			var part int
			fmt.Sscanf(m.Key, "p%d", &part)
			return part
		},
	})
	out := map[int32][]string{}
	var msgs []*pulsar.ProducerMessage
	for i := 0; i < per; i++ {
		for part := 0; part < parts; part++ {
			v := fmt.Sprintf("%s/p%d-%06d", n.Region, part, i)
			out[int32(part)] = append(out[int32(part)], v)
			msgs = append(msgs, &pulsar.ProducerMessage{Key: fmt.Sprintf("p%d", part), Payload: []byte(v)})
		}
	}
	sendAsyncAll(t, p, len(msgs), func(i int) *pulsar.ProducerMessage { return msgs[i] })
	return out
}

// pulsarConsumeAll subscribes from the earliest message and receives want messages, returning
// the values per partition in the order received.
func pulsarConsumeAll(t *testing.T, n *testcluster.Node, topic, sub string, want int) map[int32][]string {
	t.Helper()
	c := newClient(t, n)
	cons := mustSubscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	got := map[int32][]string{}
	for _, m := range receiveN(t, cons, want, true) {
		var part int32 = -1
		if i := strings.LastIndex(m.Topic(), "-partition-"); i >= 0 {
			fmt.Sscanf(m.Topic()[i+len("-partition-"):], "%d", &part)
		}
		got[part] = append(got[part], string(m.Payload()))
	}
	expectNone(t, cons, 300*time.Millisecond)
	return got
}

// TestReplActiveActiveKafkaAndPulsar: a Kafka producer in us and a Pulsar producer in eu write
// to the same partitioned topic at once; Kafka and Pulsar consumers in both regions see every
// message exactly once, in origin order per origin and partition.
func TestReplActiveActiveKafkaAndPulsar(t *testing.T) {
	c := regionsCluster(t, "us", "eu")
	us, eu := c.Node(0), c.Node(1)
	// The policy goes through Pulsar's admin API, as pulsar-admin would send it.
	admin, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: eu.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Namespaces().SetNamespaceReplicationClusters("public/default", []string{"us", "eu"}); err != nil {
		t.Fatal(err)
	}
	if got, err := admin.Namespaces().GetNamespaceReplicationClusters("public/default"); err != nil || strings.Join(got, ",") != "eu,us" {
		t.Fatalf("pulsar-admin reads %v %v", got, err)
	}
	waitPolicy(t, c, nsKey("public/default"), 1)
	const topic, parts, per = "mixed", 2, 300
	full := "persistent://public/default/" + topic
	createTopic(t, us.KafkaAddr(), topic, parts, nil)
	name := topicName(t, topic)
	testcluster.WaitFor(t, 20*time.Second, "replication to create the topic in eu", func() bool {
		info, err := eu.Proxy().Topic(context.Background(), name)
		return err == nil && info.Partitions == parts
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	want := map[int32]map[string][]string{0: {}, 1: {}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(2)
	collect := func(region string, vals map[int32][]string) {
		mu.Lock()
		defer mu.Unlock()
		for p, vs := range vals {
			want[p][region] = vs
		}
	}
	go func() { defer wg.Done(); collect("us", kafkaProduceOrigin(t, ctx, us, topic, parts, per)) }()
	go func() { defer wg.Done(); collect("eu", pulsarProduceOrigin(t, eu, full, parts, per)) }()
	wg.Wait()
	total := 2 * parts * per
	for _, n := range []*testcluster.Node{us, eu} {
		k := kafkaConsumeAll(t, ctx, n, topic, parts, total)
		pl := pulsarConsumeAll(t, n, full, "sub-"+n.Name, total)
		for p := int32(0); p < parts; p++ {
			checkExactlyOnce(t, fmt.Sprintf("%s kafka consumer partition %d", n.Name, p), k[p], want[p])
			checkExactlyOnce(t, fmt.Sprintf("%s pulsar consumer partition %d", n.Name, p), pl[p], want[p])
		}
	}
	// Pulsar's topic stats show the replication to the other region.
	waitCaughtUp(t, us, 10*time.Second)
	st, err := admin.Topics().GetStats(*mustTopicName(t, full+"-partition-0"))
	if err != nil {
		t.Fatal(err)
	}
	r, ok := st.Replication["us"]
	if !ok || !r.Connected || r.ReplicationBacklog != 0 {
		t.Fatalf("eu's stats of partition 0 replicating to us: %+v (all: %+v)", r, st.Replication)
	}
}

func mustTopicName(t *testing.T, s string) *utils.TopicName {
	t.Helper()
	n, err := utils.GetTopicName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReplPulsarReplicationClusters: Pulsar producers' per-message replication clusters and
// disabled replication are honoured; pulsar-admin's topic-level replication clusters override
// the namespace's.
func TestReplPulsarReplicationClusters(t *testing.T) {
	c := regionsCluster(t, "us", "eu", "ap")
	us, eu, ap := c.Node(0), c.Node(1), c.Node(2)
	admin, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: us.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Namespaces().SetNamespaceReplicationClusters("public/default", []string{"us", "eu", "ap"}); err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, c, nsKey("public/default"), 1)
	topic := newTopic(t, "clusters")
	p := mustProducer(t, newClient(t, us), pulsar.ProducerOptions{Topic: topic})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("us/everywhere-1")})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("us/eu-only"), ReplicationClusters: []string{"eu"}})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("us/local-only"), DisableReplication: true})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("us/everywhere-2")})
	pl := func(n *testcluster.Node, want int) []string {
		return payloads(receiveN(t, mustSubscribe(t, newClient(t, n), pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest}), want, true))
	}
	checkExactlyOnce(t, "eu", pl(eu, 3), map[string][]string{"us": {"us/everywhere-1", "us/eu-only", "us/everywhere-2"}})
	checkExactlyOnce(t, "ap", pl(ap, 2), map[string][]string{"us": {"us/everywhere-1", "us/everywhere-2"}})
	checkExactlyOnce(t, "us", pl(us, 4), map[string][]string{"us": {"us/everywhere-1", "us/eu-only", "us/local-only", "us/everywhere-2"}})

	// A topic-level policy set through pulsar-admin narrows this topic to us and ap.
	tn := mustTopicName(t, topic)
	if err := admin.Topics().SetReplicationClusters(*tn, []string{"us", "ap"}); err != nil {
		t.Fatal(err)
	}
	if got, err := admin.Topics().GetReplicationClusters(*tn); err != nil || strings.Join(got, ",") != "ap,us" {
		t.Fatalf("topic clusters %v %v", got, err)
	}
	waitPolicy(t, c, topicKey(topic), 1)
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("us/after")})
	checkExactlyOnce(t, "ap after", waitCount(t, ap, topicPartition(t, topic), 3, 20*time.Second),
		map[string][]string{"us": {"us/everywhere-1", "us/everywhere-2", "us/after"}})
	waitCaughtUp(t, us, 10*time.Second)
	if got := readValues(t, eu, topicPartition(t, topic)); len(got) != 3 {
		t.Fatalf("eu holds %v; the topic policy no longer includes eu", got)
	}
}
