package compare

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/ternmq/tern/bench/peer"
	"github.com/ternmq/tern/internal/freeport"
	"gopkg.in/yaml.v3"
)

// startServe runs `bin serve` on free loopback ports with its data in
// dir, waits until /readyz answers, and returns it as a peer: stop sends
// SIGTERM, as an operator would. Its config is the settings of the config
// file base, if given, with storage.durability set to durability.
func startServe(ctx context.Context, bin, durability, base, dir string) (*peerProc, error) {
	ports, err := freeport.Loopback(5)
	if err != nil {
		return nil, err
	}
	doc, err := serveConfig(base, durability)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "tern.yaml")
	if err := os.WriteFile(conf, doc, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--config", conf, "--data-dir", filepath.Join(dir, "data"),
		"--kafka-addr", ports[0], "--pulsar-addr", ports[1], "--http-addr", ports[2],
		"--gossip-addr", ports[3], "--mesh-addr", ports[4])
	p := &peerProc{cmd: cmd, term: true, stderr: &tailBuffer{max: 8 << 10}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("compare: start %s serve: %w", bin, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	p.addrs = peer.Addrs{Kafka: ports[0], Pulsar: "pulsar://" + ports[1], HTTP: "http://" + ports[2]}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-p.exited:
			return nil, fmt.Errorf("compare: %s serve ended before it was ready (%v): %s", bin, err, p.stderr.String())
		case <-ctx.Done():
			_ = p.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(p.addrs.HTTP + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			_ = p.stop()
			return nil, fmt.Errorf("compare: %s serve was not ready within 60s: %s", bin, p.stderr.String())
		}
	}
}

// durability is the --durability value of a tern target's peer arguments.
func durability(args []string) string {
	for i, a := range args {
		if a == "--durability" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return "sync"
}

// serveConfig is the config file a tern serve of compare's runs with: the
// settings of the file at base (none if base is empty) with
// storage.durability set. The file's settings are carried as written, not
// through this build's schema, so a tern binary older or newer than it
// reads them as it would the file.
func serveConfig(base, durability string) ([]byte, error) {
	doc := map[string]any{}
	if base != "" {
		b, err := os.ReadFile(base)
		if err != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("compare: %s: %w", base, err)
		}
		if doc == nil {
			doc = map[string]any{}
		}
	}
	storage, ok := doc["storage"].(map[string]any)
	if !ok {
		if v := doc["storage"]; v != nil { // "storage:" alone sets nothing
			return nil, fmt.Errorf("compare: %s: storage is not a mapping of settings", base)
		}
		storage = map[string]any{}
		doc["storage"] = storage
	}
	storage["durability"] = durability
	return yaml.Marshal(doc)
}
