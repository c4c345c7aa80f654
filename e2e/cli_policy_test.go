package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/proxy"
	"github.com/ternmq/tern/replicator"
)

// cliStatus is the part of `tern policy status --json` the test waits on.
type cliStatus struct {
	Healthy bool `json:"healthy"`
	Regions []struct {
		Region      string `json:"region"`
		Streams     int    `json:"streams"`
		Active      int    `json:"active"`
		LagMessages int64  `json:"lag_messages"`
	} `json:"regions"`
	Inbound []struct {
		Messages int64 `json:"messages"`
	} `json:"inbound"`
}

// settled reports every stream active with no lag, streams toward every region, and at least
// inbound messages received.
func (s cliStatus) settled(streams int, inbound int64) bool {
	if !s.Healthy || len(s.Regions) == 0 {
		return false
	}
	n := 0
	for _, r := range s.Regions {
		if r.Active != r.Streams || r.LagMessages != 0 {
			return false
		}
		n += r.Streams
	}
	var in int64
	for _, i := range s.Inbound {
		in += i.Messages
	}
	return n == streams && in >= inbound
}

func testCLIMesh(t *testing.T, bin string) {
	c := regionsCluster(t, "us", "eu")
	us, eu := c.Node(0), c.Node(1)
	cu := cli{t: t, bin: bin, url: us.HTTPURL(), label: "us"}
	ce := cli{t: t, bin: bin, url: eu.HTTPURL(), label: "eu"}
	tr := newTranscript(t, "mesh")
	nsKey := replicator.PolicyKey{Kind: replicator.KindNamespace, Name: "public/default"}
	unchanged := func(what string) {
		t.Helper()
		for _, n := range []*testcluster.Node{us, eu} {
			if p, ok := n.Proxy().Replication().Policy(nsKey); ok {
				t.Fatalf("%s: %s holds policy version %d; nothing should have changed", what, n.Name, p.Version)
			}
		}
		if _, err := eu.Proxy().Topic(t.Context(), protocols.TopicName{Tenant: "public", Namespace: "default", Local: "orders"}); err == nil {
			t.Fatalf("%s: orders exists in eu; nothing should have been replicated", what)
		}
	}

	tr.note("us holds orders (3 partitions, 5 messages) and audit (2 partitions); eu holds audit with 4 partitions")
	tr.do(cu, step{args: []string{"topics", "create", "orders", "--partitions", "3"}})
	tr.do(cu, step{args: []string{"produce", "orders", "--protocol", "kafka", "--key-separator", "="},
		stdin: "a=apple\nb=banana\nc=cherry\nd=date\ne=elderberry\n"})
	tr.do(cu, step{args: []string{"topics", "create", "audit", "--partitions", "2"}})
	tr.do(ce, step{args: []string{"topics", "create", "audit", "--partitions", "4"}})

	tr.note("bad input is refused with what to change, and changes nothing")
	tr.do(cu, step{args: []string{"policy", "set", "public/default", "--regions", "us,eu,mars"}, want: 2})
	tr.do(cu, step{args: []string{"policy", "set", "public/default", "--regions", "us,eu", "--if-version", "3"}, want: 1})
	tr.do(cu, step{args: []string{"policy", "set", "public/de fault", "--regions", "us,eu"}, want: 2})
	tr.do(cu, step{args: []string{"policy", "set", "a/b/c/d", "--regions", "us,eu"}, want: 2})
	tr.do(cu, step{args: []string{"policy", "set", "orders-partition-1", "--regions", "us,eu"}, want: 2})
	tr.do(cu, step{args: []string{"policy", "set", "public/default", "--regions", "us,eu", "--start", "sometime"}, want: 2})
	tr.do(cu, step{args: []string{"topics", "alter", "orders", "--partitions", "2"}, want: 1})
	unchanged("after bad input")

	tr.note("the dry run prints the plan, including the partition count conflict, and changes nothing")
	tr.do(cu, step{args: []string{"policy", "set", "public/default", "--regions", "us,eu", "--dry-run"}})
	tr.do(cu, step{args: []string{"policy", "set", "public/default", "--regions", "us,eu"}, want: 1})
	unchanged("after the dry run and the refused apply")
	checkPlanJSON(t, cu)
	tr.do(ce, step{args: []string{"topics", "list"}})
	tr.do(cu, step{args: []string{"policy", "get", "public/default"}})

	tr.note("grow audit in us to eu's count; the plan is clean; apply it")
	tr.do(cu, step{args: []string{"topics", "alter", "audit", "--partitions", "4"}})
	tr.do(cu, step{args: []string{"policy", "set", "public/default", "--regions", "us,eu", "--dry-run"}})
	unchanged("after the second dry run")
	tr.do(cu, step{args: []string{"policy", "set", "public/default", "--regions", "us,eu", "--if-version", "0"}})
	tr.do(cu, step{args: []string{"policy", "set", "public/default", "--regions", "eu,us"}})

	tr.note("the data arrives in eu")
	tr.do(ce, step{args: []string{"consume", "orders", "--protocol", "kafka", "--from", "earliest", "-n", "5", "--idle", "30s"}, sort: true})

	tr.note("status: waited until every stream is active with no lag")
	// 7 partitions (orders 3, audit 4) stream from each region to the other.
	for _, n := range []cli{cu, ce} {
		var inbound int64
		if n.label == "eu" {
			inbound = 5
		}
		testcluster.WaitFor(t, 30*time.Second, n.label+" replication settled", func() bool {
			var s cliStatus
			n.runJSON(&s, "policy", "status", "public/default")
			return s.settled(7, inbound)
		})
	}
	tr.do(cu, step{args: []string{"policy", "status", "public/default"}})
	tr.do(ce, step{args: []string{"policy", "status", "persistent://public/default/orders"}})
	tr.do(cu, step{args: []string{"policy", "status", "public/default", "--check"}})
	testcluster.WaitFor(t, 20*time.Second, "eu sees the policy", func() bool {
		p, ok := eu.Proxy().Replication().Policy(nsKey)
		return ok && p.Version == 1
	})
	tr.do(ce, step{args: []string{"policy", "get", "orders"}})
	tr.do(ce, step{args: []string{"topics", "list"}})
	tr.do(cu, step{args: []string{"policy", "list"}})

	tr.note("a write against a version that is no longer current is refused")
	tr.do(cu, step{args: []string{"policy", "set", "public/default", "--regions", "us", "--if-version", "0"}, want: 1})
	if p, _ := us.Proxy().Replication().Policy(nsKey); p.Version != 1 || !slices.Equal(p.Regions, []string{"eu", "us"}) {
		t.Fatalf("after the refused write the policy is %+v, want version 1 with eu, us", p)
	}

	tr.note("removing the policy, planned first")
	tr.do(cu, step{args: []string{"policy", "rm", "public/default", "--dry-run"}})
	tr.check()
}

// checkPlanJSON checks the dry run's figures against the topics themselves: the backlog the
// plan announces for eu is exactly what orders and audit retain in us.
func checkPlanJSON(t *testing.T, cu cli) {
	t.Helper()
	var out struct {
		DryRun bool `json:"dry_run"`
		Change struct {
			Applied bool `json:"applied"`
		} `json:"change"`
		Plan proxy.PolicyPlan `json:"plan"`
	}
	cu.runJSON(&out, "policy", "set", "public/default", "--regions", "us,eu", "--dry-run")
	var orders, audit proxy.TopicDetail
	cu.runJSON(&orders, "topics", "describe", "orders")
	cu.runJSON(&audit, "topics", "describe", "audit")
	p := out.Plan
	if !out.DryRun || out.Change.Applied || len(p.Added) != 1 || p.Added[0].Region != "eu" || len(p.Conflicts) != 1 {
		t.Fatalf("dry run: %+v", out)
	}
	a := p.Added[0]
	if orders.Messages != 5 || orders.Bytes <= 0 || a.BacklogMessages != orders.Messages+audit.Messages || a.BacklogBytes != orders.Bytes+audit.Bytes {
		t.Fatalf("plan backlog for eu is %d messages, %d bytes; orders holds %d messages, %d bytes and audit %d, %d",
			a.BacklogMessages, a.BacklogBytes, orders.Messages, orders.Bytes, audit.Messages, audit.Bytes)
	}
	want := map[string]string{"persistent://public/default/orders": "create", "persistent://public/default/audit": "mismatch"}
	for _, rt := range a.Topics {
		if want[rt.Name] != rt.Action {
			t.Fatalf("plan says %s is %q in eu, want %q", rt.Name, rt.Action, want[rt.Name])
		}
		if rt.Action == "mismatch" && (rt.TheirPartitions == nil || *rt.TheirPartitions != 4) {
			t.Fatalf("plan: audit has %v partitions in eu, want 4", rt.TheirPartitions)
		}
	}
}
