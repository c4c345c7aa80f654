package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kcatPath finds kcat: a test that needs it skips locally when it is
// missing and fails under CI, where .ci/run installs it.
func kcatPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kcat is not installed; .ci/run installs it with apt-get")
		}
		t.Skip("kcat is not installed (apt-get install kcat)")
	}
	return p
}

func runKcat(t *testing.T, bin string, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestKafkaKcat: kcat (librdkafka) lists metadata (-L), produces with every
// codec (-P), reads back (-C) and consumes in a group (-G).
func TestKafkaKcat(t *testing.T) {
	bin := kcatPath(t)
	node := startKafka(t)
	addr := node.KafkaAddr()
	n := recordsPerCase()
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			topic := "kcat-" + codec
			createTopic(t, addr, topic, 3, nil)
			var in bytes.Buffer
			for i := 0; i < n; i++ {
				fmt.Fprintf(&in, "k%d\t%s\n", i%7, payload(topic, i))
			}
			runKcat(t, bin, in.Bytes(), "-b", addr, "-P", "-t", topic, "-K", "\t",
				"-X", "compression.codec="+codec, "-X", "linger.ms=5")

			md := string(runKcat(t, bin, nil, "-b", addr, "-L", "-t", topic))
			if !strings.Contains(md, fmt.Sprintf("topic \"%s\" with 3 partitions", topic)) {
				t.Errorf("kcat -L does not show %s with 3 partitions:\n%s", topic, md)
			}

			check := func(mode string, out []byte) {
				l := newLedger(topic, n)
				for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					f := strings.SplitN(line, " ", 3)
					if len(f) != 3 {
						t.Fatalf("%s: bad line %q", mode, line)
					}
					p, _ := strconv.Atoi(f[0])
					o, _ := strconv.ParseInt(f[1], 10, 64)
					l.add(int32(p), o, []byte(f[2]))
				}
				l.check(t)
			}
			check("-C", runKcat(t, bin, nil, "-b", addr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%p %o %s\n"))
			check("-G", runKcat(t, bin, nil, "-b", addr, "-G", "kcat-"+topic, topic, "-o", "beginning", "-c", strconv.Itoa(n),
				"-X", "auto.offset.reset=earliest", "-f", "%p %o %s\n"))
		})
	}
	md := string(runKcat(t, bin, nil, "-b", addr, "-L"))
	if !strings.Contains(md, "1 brokers:") || !strings.Contains(md, addr) {
		t.Errorf("kcat -L does not list the node as the one broker:\n%s", md)
	}
}
