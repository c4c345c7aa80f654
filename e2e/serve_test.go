package e2e

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildTern builds the tern binary once per test run.
func buildTern(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tern")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/tern")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServeHealthAndGracefulStop runs `tern serve` as a process: /healthz
// answers 200 within a few seconds and SIGTERM ends it with status 0.
func TestServeHealthAndGracefulStop(t *testing.T) {
	bin := buildTern(t)
	httpAddr := freePort(t)
	cmd := exec.Command(bin, "serve", "--data-dir", t.TempDir(), "--http-addr", httpAddr,
		"--kafka-addr", freePort(t), "--pulsar-addr", freePort(t))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 within 10s; stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("tern exited with %v after SIGTERM; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("tern did not exit within 30s of SIGTERM")
	}
	if !strings.Contains(stderr.String(), "tern node stopped") {
		t.Fatalf("no clean shutdown logged:\n%s", stderr.String())
	}
}

// TestServeUsageErrors: bad flags and bad configuration exit with status 2
// and a message naming the field and what is accepted.
func TestServeUsageErrors(t *testing.T) {
	bin := buildTern(t)
	badYAML := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("storage:\n  durability: sometimes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--no-such-flag"}, []string{"unknown flag"}},
		{[]string{"serve", "--region", "bad region"}, []string{"node.region", "letters, digits"}},
		{[]string{"serve", "--kafka-addr", "nine"}, []string{"listeners.kafka", "host:port"}},
		{[]string{"serve", "--config", badYAML}, []string{"storage.durability", "want sync or async"}},
		{[]string{"serve", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, []string{"missing.yaml"}},
		{[]string{"nosuchcommand"}, []string{"unknown command"}},
	}
	for _, c := range cases {
		cmd := exec.Command(bin, c.args...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("tern %v: exit %v, want status 2; output:\n%s", c.args, err, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("tern %v: output lacks %q:\n%s", c.args, w, out)
			}
		}
	}
}
