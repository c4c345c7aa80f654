package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// codecs are the compression codecs every client is tested with.
var codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// recordsPerCase bounds each produce/consume case.
func recordsPerCase() int {
	if testing.Short() {
		return 200
	}
	return 1000
}

// payload is the value of record i of a case: its index, key and padding,
// so a consumer can check content, order and duplicates.
func payload(tag string, i int) []byte {
	return fmt.Appendf(nil, "%s-%06d-%s", tag, i, bytes.Repeat([]byte("x"), i%97))
}

// ledger checks that consumed records are exactly the produced ones: no
// loss, no duplicates, and per partition in production order.
type ledger struct {
	mu       sync.Mutex
	want     int
	tag      string
	seen     map[int]int     // index -> times seen
	lastIdx  map[int32]int   // partition -> last index seen
	lastOff  map[int32]int64 // partition -> last offset seen
	problems []string
}

func newLedger(tag string, want int) *ledger {
	return &ledger{tag: tag, want: want, seen: map[int]int{}, lastIdx: map[int32]int{}, lastOff: map[int32]int64{}}
}

func (l *ledger) add(partition int32, offset int64, value []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var idx int
	if _, err := fmt.Sscanf(string(value), l.tag+"-%06d-", &idx); err != nil {
		l.problems = append(l.problems, fmt.Sprintf("unexpected value %.40q", value))
		return
	}
	if !bytes.Equal(value, payload(l.tag, idx)) {
		l.problems = append(l.problems, fmt.Sprintf("record %d: corrupted value", idx))
	}
	if last, ok := l.lastOff[partition]; ok && offset <= last {
		l.problems = append(l.problems, fmt.Sprintf("partition %d: offset %d after %d", partition, offset, last))
	}
	if last, ok := l.lastIdx[partition]; ok && idx <= last {
		l.problems = append(l.problems, fmt.Sprintf("partition %d: record %d after %d (order broken)", partition, idx, last))
	}
	l.lastIdx[partition] = idx
	l.lastOff[partition] = offset
	l.seen[idx]++
	if l.seen[idx] > 1 {
		l.problems = append(l.problems, fmt.Sprintf("record %d seen %d times", idx, l.seen[idx]))
	}
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// check fails the test on any problem or missing record.
func (l *ledger) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var missing []int
	for i := 0; i < l.want; i++ {
		if l.seen[i] == 0 {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		sort.Ints(missing)
		t.Errorf("%s: %d of %d records missing (first %v)", l.tag, len(missing), l.want, missing[:min(len(missing), 10)])
	}
	for i, p := range l.problems {
		if i == 10 {
			t.Errorf("... %d more problems", len(l.problems)-10)
			break
		}
		t.Errorf("%s: %s", l.tag, p)
	}
}

// startKafka starts one node and returns it.
func startKafka(t *testing.T) *testcluster.Node {
	t.Helper()
	return testcluster.Start(t).Node(0)
}

// kgoClient is a franz-go client for addr; it closes with the test.
func kgoClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a Kafka topic with n partitions through the protocol.
func createTopic(t *testing.T, addr, topic string, n int32, configs map[string]string) {
	t.Helper()
	cl := kgoClient(t, addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, n, 1
	for k, v := range configs {
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create topic %s: error %d %v", topic, c, resp.Topics[0].ErrorMessage)
	}
}

// highWatermarks returns the high watermark of every partition of a topic,
// read through the node's broker API.
func highWatermarks(t *testing.T, n *testcluster.Node, topic string, parts int) []int64 {
	t.Helper()
	name, err := protocols.ParseTopicName(topic, "public/default")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, parts)
	for i := range out {
		off, err := n.Proxy().Offsets(context.Background(), protocols.Partition{Topic: name, Index: i})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = off.HighWatermark
	}
	return out
}

// rawConn speaks the Kafka protocol by hand, for tests that send what no
// client would.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// frame builds a request frame with a v1 or v2 header.
func frame(req kmsg.Request, corr int32, clientID string) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// roundTrip sends req and reads its response.
func (r *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.corr++
	if _, err := r.c.Write(frame(req, r.corr, "raw-test")); err != nil {
		r.t.Fatal(err)
	}
	body := r.readFrame()
	if got := int32(binary.BigEndian.Uint32(body)); got != r.corr {
		r.t.Fatalf("correlation id %d, want %d", got, r.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("decoding %T: %v", resp, err)
	}
	return resp
}

func (r *rawConn) readFrame() []byte {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	body, err := r.nextFrame()
	if err != nil {
		r.t.Fatalf("reading response: %v", err)
	}
	return body
}

// nextFrame reads one response frame's body; it may run outside the test
// goroutine.
func (r *rawConn) nextFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, body); err != nil {
		return nil, err
	}
	return body, nil
}

// closedByServer reports whether the server closed the connection within
// the timeout (reads EOF or a reset rather than data or a timeout).
func (r *rawConn) closedByServer(timeout time.Duration) bool {
	_ = r.c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 1024)
	for {
		_, err := r.c.Read(buf)
		if err == nil {
			continue // a response to an earlier request; keep reading
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return false
		}
		return true
	}
}
