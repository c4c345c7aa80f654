package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/freeport"
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

// waitHealthy waits up to 10s for a node's /healthz to answer 200; on
// failure it shows what stderr returns.
func waitHealthy(t *testing.T, httpAddr string, stderr func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 within 10s; stderr:\n%s", stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	return freePorts(t, 1)[0]
}

// freePorts is n distinct loopback ports, free for TCP and UDP a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	ports, err := freeport.Loopback(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// serveAddrs gives a `tern serve` process every listener on a loopback
// port of its own (the gossip and mesh defaults, :7946 and :7947, may be
// taken by another node on the machine): its HTTP and Kafka addresses,
// and the flags that set all five.
func serveAddrs(t *testing.T) (httpAddr, kafkaAddr string, flags []string) {
	t.Helper()
	p := freePorts(t, 5)
	return p[0], p[1], []string{"--http-addr", p[0], "--kafka-addr", p[1],
		"--pulsar-addr", p[2], "--gossip-addr", p[3], "--mesh-addr", p[4]}
}

// TestServeHealthAndGracefulStop runs `tern serve` as a process: /healthz
// answers 200 within a few seconds and SIGTERM ends it with status 0.
func TestServeHealthAndGracefulStop(t *testing.T) {
	bin := buildTern(t)
	httpAddr, _, addrFlags := serveAddrs(t)
	cmd := exec.Command(bin, append([]string{"serve", "--data-dir", t.TempDir()}, addrFlags...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitHealthy(t, httpAddr, stderr.String)
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

// TestServeAsksForHugePages: where pebble's memory comes from glibc's
// allocator (a Linux cgo build) and the kernel gives transparent huge
// pages on request, `tern serve` restarts itself with glibc's hugetlb
// tunable, once; storage.huge_pages: false leaves the environment alone.
// The log says which happened and why.
func TestServeAsksForHugePages(t *testing.T) {
	bin := buildTern(t)
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	mode, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	want := strings.Contains(string(info), "CGO_ENABLED=1") && strings.Contains(string(mode), "[madvise]")
	t.Logf("cgo build and THP on request: %v (THP: %q)", want, strings.TrimSpace(string(mode)))

	run := func(conf string, env ...string) (environ, log string) {
		t.Helper()
		dir := t.TempDir()
		cfg := filepath.Join(dir, "tern.yaml")
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		httpAddr, _, addrFlags := serveAddrs(t)
		cmd := exec.Command(bin, append([]string{"serve", "--config", cfg, "--data-dir", filepath.Join(dir, "data")}, addrFlags...)...)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "GLIBC_TUNABLES=") || strings.HasPrefix(kv, "TERN_HUGE_PAGES_EXEC=")
		})
		cmd.Env = append(cmd.Env, env...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		waitHealthy(t, httpAddr, func() string { b, _ := os.ReadFile(logf.Name()); return string(b) })
		// An exec keeps the process id: this is the serving image's
		// environment.
		envb, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(logf.Name())
		return strings.ReplaceAll(string(envb), "\x00", "\n"), string(b)
	}

	env, log := run("storage: {durability: sync}\n")
	asked := strings.Contains(env, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1\n")
	if asked != want {
		t.Fatalf("default config: tunable in the environment %v, want %v; log:\n%s", asked, want, log)
	}
	if want && !strings.Contains(log, `huge_pages="requested (GLIBC_TUNABLES=glibc.malloc.hugetlb=1)"`) {
		t.Fatalf("the log does not say huge pages were requested:\n%s", log)
	}
	if !strings.Contains(log, `msg="memory pages for pebble"`) {
		t.Fatalf("no memory pages line in the log:\n%s", log)
	}
	if n := strings.Count(log, `msg="memory pages for pebble"`); n != 1 {
		t.Fatalf("memory pages line logged %d times: the process started more than once:\n%s", n, log)
	}

	// An empty GLIBC_TUNABLES is replaced, not kept beside the new one:
	// glibc and Go would read different copies, and the node would exec
	// itself again and again.
	env, log = run("storage: {durability: sync}\n", "GLIBC_TUNABLES=")
	if asked := strings.Contains(env, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1\n"); asked != want {
		t.Fatalf("GLIBC_TUNABLES empty: tunable in the environment %v, want %v; log:\n%s", asked, want, log)
	}
	if want && strings.Count(env, "GLIBC_TUNABLES=") != 1 {
		t.Fatalf("GLIBC_TUNABLES set more than once:\n%s", env)
	}
	// An image that was exec'd once never execs again, whatever glibc did
	// with the tunable.
	env, log = run("storage: {durability: sync}\n", "TERN_HUGE_PAGES_EXEC=1")
	if strings.Contains(env, "glibc.malloc.hugetlb") {
		t.Fatalf("exec'd mark set, yet the node exec'd again:\n%s", env)
	}
	if want && !strings.Contains(log, `huge_pages="not requested: after one exec GLIBC_TUNABLES is \"\""`) {
		t.Fatalf("the log does not say why huge pages were not requested:\n%s", log)
	}

	env, log = run("storage: {durability: sync, huge_pages: false}\n")
	if strings.Contains(env, "glibc.malloc.hugetlb") {
		t.Fatalf("huge_pages: false, but the environment has the tunable:\n%s", env)
	}
	if !strings.Contains(log, `huge_pages="storage.huge_pages is false"`) {
		t.Fatalf("the log does not say huge pages are off by configuration:\n%s", log)
	}
}
