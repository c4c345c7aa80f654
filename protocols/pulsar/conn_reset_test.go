package pulsar_test

import (
	"bufio"
	"encoding/binary"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
)

// metric reads the first series named name from the node's /metrics.
func metric(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// waitMetric waits up to 10 s for name to read want.
func waitMetric(t *testing.T, url, name string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := metric(t, url, name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want %v", name, got, want)
		}
	}
}

// A client that closes or resets its connection in the middle of a frame
// has gone away; it has not sent a bad frame. A frame that is bad is still
// counted.
func TestConnectionEndedMidFrameIsNoProtocolError(t *testing.T) {
	node := testcluster.Start(t).Node(0)
	url := node.HTTPURL()
	const errs, open = "tern_pulsar_protocol_errors_total", "tern_pulsar_connections"
	before := metric(t, url, errs)

	for _, reset := range []bool{false, true} {
		conn := dial(t, node.PulsarAddr())
		waitMetric(t, url, open, 1)
		var part [14]byte
		binary.BigEndian.PutUint32(part[:], 1000) // a 1000-byte frame, 10 bytes of it sent
		if _, err := conn.Write(part[:]); err != nil {
			t.Fatal(err)
		}
		if reset {
			if err := conn.(*net.TCPConn).SetLinger(0); err != nil { // Close sends a reset
				t.Fatal(err)
			}
		}
		conn.Close()
		waitMetric(t, url, open, 0)
		if got := metric(t, url, errs); got != before {
			t.Fatalf("a connection ended mid-frame (reset %v) counted as %v protocol errors", reset, got-before)
		}
	}

	// The control: a frame too small to hold its command is a protocol error.
	bad := dial(t, node.PulsarAddr())
	defer bad.Close()
	var tiny [5]byte
	binary.BigEndian.PutUint32(tiny[:], 1)
	if _, err := bad.Write(tiny[:]); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, url, errs, before+1)
}
