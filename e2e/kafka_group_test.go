package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// member is one group member whose assignment the test watches.
type member struct {
	name string
	cl   *kgo.Client

	mu       sync.Mutex
	assigned map[int32]bool

	// dead makes the member vanish without leaving: its connections are
	// closed and new ones refused, as if its process had died.
	dead  bool
	conns []net.Conn
}

func (m *member) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.assigned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (m *member) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dead = true
	for _, c := range m.conns {
		c.Close()
	}
}

func (m *member) dial(ctx context.Context, network, host string) (net.Conn, error) {
	m.mu.Lock()
	dead := m.dead
	m.mu.Unlock()
	if dead {
		return nil, errors.New("member is dead")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		m.mu.Lock()
		m.conns = append(m.conns, c)
		m.mu.Unlock()
	}
	return c, err
}

// joinMember starts a cooperative-sticky consumer of topic in group that
// keeps polling until the test ends.
func joinMember(t *testing.T, addr, group, topic, name string) *member {
	m := &member{name: name, assigned: map[int32]bool{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.Dialer(m.dial), kgo.ClientID(name),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RetryTimeout(5*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			for _, p := range a[topic] {
				m.assigned[p] = true
			}
			m.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			for _, p := range r[topic] {
				delete(m.assigned, p)
			}
			m.mu.Unlock()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			for _, p := range r[topic] {
				delete(m.assigned, p)
			}
			m.mu.Unlock()
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return m
}

// waitSplit waits until the members' assignments are disjoint and cover
// every partition, each member holding want[i] partitions.
func waitSplit(t *testing.T, parts int, members []*member, want []int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		owners := map[int32]int{}
		ok := true
		var desc []string
		for i, m := range members {
			ps := m.partitions()
			desc = append(desc, fmt.Sprintf("%s=%v", m.name, ps))
			if len(ps) != want[i] {
				ok = false
			}
			for _, p := range ps {
				owners[p]++
			}
		}
		for p := int32(0); p < int32(parts); p++ {
			if owners[p] != 1 {
				ok = false
			}
		}
		if ok {
			t.Logf("%s: %v", what, desc)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: assignments never settled: %v", what, desc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKafkaGroupRebalance: two members split the partitions; when one
// leaves the other takes them all; a new member splits them again; when it
// dies without leaving, its session times out and the survivor takes them
// all.
func TestKafkaGroupRebalance(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	const topic, parts = "rebalance", 4
	createTopic(t, addr, topic, parts, nil)
	a := joinMember(t, addr, "g-rebalance", topic, "a")
	waitSplit(t, parts, []*member{a}, []int{4}, "a alone")
	b := joinMember(t, addr, "g-rebalance", topic, "b")
	waitSplit(t, parts, []*member{a, b}, []int{2, 2}, "a and b")

	b.cl.LeaveGroup()
	waitSplit(t, parts, []*member{a}, []int{4}, "after b left")

	c := joinMember(t, addr, "g-rebalance", topic, "c")
	waitSplit(t, parts, []*member{a, c}, []int{2, 2}, "a and c")
	start := time.Now()
	c.kill()
	waitSplit(t, parts, []*member{a}, []int{4}, "after c died")
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("c's partitions moved %v after it died; its 6s session should have had to expire first", d)
	}
}
