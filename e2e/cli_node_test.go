package e2e

import (
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/ternmq/tern/internal/testcluster"
)

// TestCLI runs the operator CLI end to end: the tern binary, built once, against a running
// node (topics, namespaces, produce and consume) and a two-region mesh (replication policy
// with dry run, apply, data arriving, status), with golden transcripts.
func TestCLI(t *testing.T) {
	bin := buildTern(t)
	t.Run("node", func(t *testing.T) { testCLINode(t, bin) })
	t.Run("mesh", func(t *testing.T) { testCLIMesh(t, bin) })
}

func testCLINode(t *testing.T, bin string) {
	c := testcluster.Start(t)
	n := c.Node(0)
	cl := cli{t: t, bin: bin, url: n.HTTPURL()}
	tr := newTranscript(t, "node")

	tr.note("topics")
	tr.do(cl, step{args: []string{"topics", "create", "orders", "--partitions", "3", "--retention", "7d", "--max-message-size", "1MiB"}})
	tr.do(cl, step{args: []string{"topics", "create", "persistent://public/default/events", "--partitions", "0"}})
	tr.do(cl, step{args: []string{"topics", "list"}})
	tr.do(cl, step{args: []string{"topics", "alter", "orders", "--partitions", "4", "--retention-size", "1GiB"}})
	tr.do(cl, step{args: []string{"topics", "alter", "orders", "--unset", "retention"}})
	tr.do(cl, step{args: []string{"topics", "describe", "orders"}})

	tr.note("produce and consume over Kafka; consumers print partitions in any order, so their lines are sorted")
	tr.do(cl, step{args: []string{"produce", "orders", "--protocol", "kafka", "--key-separator", ":", "--property", "source=cli"},
		stdin: "k1:first\nk2:second\nk3:third\nk4:fourth\n"})
	tr.do(cl, step{args: []string{"consume", "orders", "--protocol", "kafka", "--from", "earliest", "-n", "4", "--idle", "20s"}, sort: true})
	tr.do(cl, step{args: []string{"consume", "orders", "--protocol", "kafka", "--group", "audit", "-n", "4", "--idle", "20s", "--values"}, sort: true})
	tr.note("the group committed what it printed: nothing is left for it")
	tr.do(cl, step{args: []string{"consume", "orders", "--protocol", "kafka", "--group", "audit", "-n", "1", "--idle", "3s"}, want: 1})
	tr.note("produce and consume over Pulsar's WebSocket API, the default protocol")
	tr.do(cl, step{args: []string{"produce", "events", "--key-separator", ":", "--property", "via=ws"},
		stdin: "a:one\nb:two\n"})
	tr.do(cl, step{args: []string{"consume", "events", "--from", "earliest", "-n", "2", "--idle", "20s"}})
	tr.do(cl, step{args: []string{"topics", "list", "--namespace", "public/default"}})

	tr.note("namespaces")
	tr.do(cl, step{args: []string{"namespaces", "create", "acme/billing", "--retention", "7d", "--retention-size", "10GiB", "--ttl", "1d",
		"--dedup", "on", "--durability", "async", "--backlog-size", "5GiB", "--backlog-policy", "producer_exception"}})
	pulsarSeesCLIPolicies(t, n)
	tr.do(cl, step{args: []string{"namespaces", "set", "acme/billing", "--ttl", "2h", "--backlog-age", "12h", "--clear", "durability"}})
	tr.do(cl, step{args: []string{"topics", "create", "acme/billing/invoices", "--partitions", "2"}})
	tr.do(cl, step{args: []string{"namespaces", "list"}})
	tr.note("pulsar-admin's calls change what tern shows: retention set through pulsaradmin")
	if err := newAdmin(t, n).Namespaces().SetRetention("acme/billing", utils.RetentionPolicies{RetentionTimeInMinutes: 2880, RetentionSizeInMB: 2048}); err != nil {
		t.Fatal(err)
	}
	tr.do(cl, step{args: []string{"namespaces", "describe", "acme/billing"}})
	tr.do(cl, step{args: []string{"namespaces", "delete", "acme/billing"}, want: 1})
	tr.do(cl, step{args: []string{"topics", "delete", "acme/billing/invoices"}})
	tr.do(cl, step{args: []string{"namespaces", "delete", "acme/billing"}})
	tr.check()
}

// pulsarSeesCLIPolicies reads the policies `tern namespaces create` set through the Go client's
// pulsaradmin package: the CLI writes Pulsar's endpoints and shapes, so Pulsar tooling reads
// the same values.
func pulsarSeesCLIPolicies(t *testing.T, n *testcluster.Node) {
	t.Helper()
	ns := newAdmin(t, n).Namespaces()
	ret, err := ns.GetRetention("acme/billing")
	if err != nil || ret.RetentionTimeInMinutes != 7*24*60 || ret.RetentionSizeInMB != 10*1024 {
		t.Fatalf("pulsaradmin GetRetention = %+v, %v; want 10080 minutes and 10240 MB", ret, err)
	}
	ttl, err := ns.GetNamespaceMessageTTL("acme/billing")
	if err != nil || ttl != 86400 {
		t.Fatalf("pulsaradmin GetNamespaceMessageTTL = %d, %v; want 86400", ttl, err)
	}
	quotas, err := ns.GetBacklogQuotaMap("acme/billing")
	q, ok := quotas[utils.DestinationStorage]
	if err != nil || !ok || q.LimitSize != 5<<30 || q.Policy != utils.ProducerException {
		t.Fatalf("pulsaradmin GetBacklogQuotaMap = %+v, %v; want destination_storage 5GiB producer_exception", quotas, err)
	}
}
