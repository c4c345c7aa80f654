package proxy_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ternmq/tern/internal/testcluster"
)

// TestConsoleMounted: a node serves the console at its root and its files
// under /console/, and the console's routes shadow none of the node's
// other endpoints.
func TestConsoleMounted(t *testing.T) {
	n := testcluster.Start(t).Node(0)
	fetch := func(path string) (int, string, string) {
		t.Helper()
		resp, err := http.Get(n.HTTPURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	status, ctype, body := fetch("/")
	if status != http.StatusOK || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(body, "<title>tern console</title>") {
		t.Fatalf("GET /: HTTP %d %s", status, ctype)
	}
	for _, path := range []string{"/console/app.js", "/console/app.css", "/console/favicon.svg", "/favicon.ico"} {
		if status, _, _ := fetch(path); status != http.StatusOK {
			t.Errorf("GET %s: HTTP %d", path, status)
		}
	}
	for _, path := range []string{"/console/x", "/nope", "/api/v1/nope"} {
		if status, _, body := fetch(path); status != http.StatusNotFound || strings.Contains(body, "<html") {
			t.Errorf("GET %s: HTTP %d, want 404 without the page", path, status)
		}
	}
	// The node's other endpoints answer as themselves.
	for _, c := range []struct{ path, ctype, has string }{
		{"/api/v1/node", "application/json", `"name"`},
		{"/api/v1/console/topics", "application/json", `"topics"`},
		{"/admin/v2/tenants", "application/json", "public"},
		{"/metrics", "text/plain", "tern_"},
		{"/healthz", "text/plain", "ok"},
	} {
		status, ctype, body := fetch(c.path)
		if status != http.StatusOK || !strings.HasPrefix(ctype, c.ctype) || !strings.Contains(body, c.has) {
			t.Errorf("GET %s: HTTP %d %s %.80q", c.path, status, ctype, body)
		}
	}
	// A plain GET of a WebSocket path reaches the WebSocket server, which
	// refuses it for want of an upgrade.
	if status, _, body := fetch("/ws/v2/reader/persistent/public/default/x"); status == http.StatusOK || strings.Contains(body, "<html") {
		t.Errorf("GET /ws/...: HTTP %d %.80q", status, body)
	}
}
