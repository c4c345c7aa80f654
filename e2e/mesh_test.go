package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ternmq/tern/internal/testcluster"
	"github.com/ternmq/tern/regions"
)

func threeRegions(t *testing.T) *testcluster.Cluster {
	c := testcluster.Start(t,
		testcluster.Spec{Name: "us-1", Region: "us", Rack: "r1"},
		testcluster.Spec{Name: "eu-1", Region: "eu"},
		testcluster.Spec{Name: "edge-1", Region: "edge"},
	)
	c.WaitMesh(20 * time.Second)
	return c
}

// TestStatusListsEveryRegionAndNode runs `tern status --json` and the table
// form against a running three-region mesh.
func TestStatusListsEveryRegionAndNode(t *testing.T) {
	bin := buildTern(t)
	c := threeRegions(t)
	out, err := exec.Command(bin, "status", "--json", "--url", c.Node(1).HTTPURL()).CombinedOutput()
	if err != nil {
		t.Fatalf("tern status --json: %v\n%s", err, out)
	}
	var rep struct {
		Mesh regions.Snapshot `json:"mesh"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	if rep.Mesh.LocalNode != "eu-1" || rep.Mesh.LocalRegion != "eu" {
		t.Fatalf("local node %q region %q", rep.Mesh.LocalNode, rep.Mesh.LocalRegion)
	}
	got := map[string]string{}
	for _, r := range rep.Mesh.Regions {
		for _, n := range r.Nodes {
			got[n.Name] = r.Name + "/" + n.State.String() + "/" + n.Rack + "/" + n.HTTPAddr
		}
	}
	for _, n := range c.Nodes() {
		want := n.Region + "/alive/"
		if n.Name == "us-1" {
			want += "r1"
		}
		want += "/" + n.Config.Listeners.HTTP
		if got[n.Name] != want {
			t.Errorf("node %s: status says %q, want %q", n.Name, got[n.Name], want)
		}
	}
	table, err := exec.Command(bin, "status", "--url", c.Node(0).HTTPURL()).CombinedOutput()
	if err != nil {
		t.Fatalf("tern status: %v\n%s", err, table)
	}
	for _, w := range []string{"REGION", "us (local)", "edge-1", "eu-1", "alive"} {
		if !strings.Contains(string(table), w) {
			t.Errorf("status table lacks %q:\n%s", w, table)
		}
	}
	// An unreachable node is a clear failure with status 1.
	bad := exec.Command(bin, "status", "--url", "http://127.0.0.1:1")
	msg, err := bad.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(msg), "cannot reach tern") {
		t.Fatalf("status against nothing: %v\n%s", err, msg)
	}
}

// TestMeshSeesKillAndRestart: a killed node is reported failed by the
// others; restarted with the same data it is alive again with the same id.
func TestMeshSeesKillAndRestart(t *testing.T) {
	c := threeRegions(t)
	edge := c.Node(2)
	before := meshNode(t, c.Node(0), "edge-1")
	edge.Kill()
	testcluster.WaitFor(t, 15*time.Second, "edge-1 to be seen failed", func() bool {
		return meshNode(t, c.Node(0), "edge-1").State == regions.StateFailed
	})
	edge.Restart()
	testcluster.WaitFor(t, 15*time.Second, "edge-1 to be alive again", func() bool {
		return meshNode(t, c.Node(0), "edge-1").State == regions.StateAlive
	})
	if after := meshNode(t, c.Node(0), "edge-1"); after.ID != before.ID || after.ID == "" {
		t.Fatalf("edge-1 came back as %q, was %q", after.ID, before.ID)
	}
}

func meshNode(t *testing.T, from *testcluster.Node, name string) regions.NodeSnapshot {
	t.Helper()
	resp, err := http.Get(from.HTTPURL() + "/api/v1/mesh")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s regions.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Regions {
		for _, n := range r.Nodes {
			if n.Name == name {
				return n
			}
		}
	}
	return regions.NodeSnapshot{}
}

// TestDevMeshCommand runs `tern dev mesh`, asks `tern status --json` of the
// node it names, and stops the mesh with SIGINT.
func TestDevMeshCommand(t *testing.T) {
	bin := buildTern(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "dev", "mesh", "--regions", "us,eu,edge", "--data-dir", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := stdout.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.IndexByte(acc, '\n')
				if i < 0 {
					break
				}
				lines <- acc[:i]
				acc = acc[i+1:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	var url string
	deadline := time.After(60 * time.Second)
	for url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("dev mesh exited early; stderr:\n%s", stderr.String())
			}
			if strings.HasPrefix(l, "try: tern status --url ") {
				url = strings.TrimPrefix(l, "try: tern status --url ")
			}
		case <-deadline:
			t.Fatalf("dev mesh printed no address within 60s; stderr:\n%s", stderr.String())
		}
	}
	out, err := exec.Command(bin, "status", "--json", "--url", url).CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	var rep struct {
		Mesh regions.Snapshot `json:"mesh"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Mesh.Regions {
		for _, n := range r.Nodes {
			names = append(names, r.Name+":"+n.Name+":"+n.State.String())
		}
	}
	if got := strings.Join(names, ","); got != "edge:edge-1:alive,eu:eu-1:alive,us:us-1:alive" {
		t.Fatalf("status lists %s", got)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev mesh exited with %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev mesh did not stop within 30s of SIGINT")
	}
}
