package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/ternmq/tern/proxy/console"
)

// importRE finds the relative imports of an ES module.
var importRE = regexp.MustCompile(`from '\./([a-z0-9-]+\.js)'`)

// server mounts the console's handlers as the node does, on a real
// loopback listener.
func server(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET "+console.IndexPath+"{$}", console.Index())
	mux.Handle("GET "+console.AssetPrefix, console.Assets())
	mux.Handle("GET /favicon.ico", console.Icon())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestConsoleIndex: the page comes with headers that keep scripts, styles and
// connections to the node's own origin, and it loads the console's
// script and styles from the asset path.
func TestConsoleIndex(t *testing.T) {
	srv := server(t)
	resp, body := get(t, srv.URL+"/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: HTTP %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("Content-Security-Policy %q allows inline code", csp)
	}
	if v := resp.Header.Get("X-Content-Type-Options"); v != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", v)
	}
	if v := resp.Header.Get("Referrer-Policy"); v != "no-referrer" {
		t.Errorf("Referrer-Policy %q", v)
	}
	for _, ref := range []string{`src="/console/app.js"`, `href="/console/app.css"`, `type="module"`} {
		if !strings.Contains(body, ref) {
			t.Errorf("the page lacks %s", ref)
		}
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "style=") {
		t.Error("the page has inline script or style, which its policy refuses")
	}
}

// TestConsoleAssets: every file the page names is served with its type and the
// same headers; anything else under /console/ is a 404, directories
// included.
func TestConsoleAssets(t *testing.T) {
	srv := server(t)
	for path, ctype := range map[string]string{
		"/console/app.js":      "text/javascript",
		"/console/app.css":     "text/css",
		"/console/favicon.svg": "image/svg+xml",
		"/favicon.ico":         "image/svg+xml",
	} {
		resp, body := get(t, srv.URL+path)
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s: HTTP %d, %d bytes", path, resp.StatusCode, len(body))
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, ct, ctype)
		}
		if strings.HasPrefix(path, "/console/") && resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
	// The script's modules, followed through their imports, all load.
	var code strings.Builder
	seen := map[string]bool{}
	queue := []string{"app.js"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		resp, js := get(t, srv.URL+"/console/"+name)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
			t.Fatalf("module %s: HTTP %d %s", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		code.WriteString(js)
		for _, m := range importRE.FindAllStringSubmatch(js, -1) {
			queue = append(queue, m[1])
		}
	}
	if len(seen) < 2 {
		t.Fatalf("app.js imports no modules: %v", seen)
	}
	for _, want := range []string{"/ws/v2/reader/persistent/", "/api/v1/console/topics", "/api/v1/node", "/api/v1/mesh"} {
		if !strings.Contains(code.String(), want) {
			t.Errorf("the console's modules never use %s", want)
		}
	}
	if strings.Contains(code.String(), "innerHTML") || strings.Contains(code.String(), "insertAdjacentHTML") {
		t.Error("the console's modules write markup; data must reach the page as text")
	}
	for _, path := range []string{"/console/x", "/console/", "/console/static/app.js", "/console/index.html", "/console/../go.mod", "/console/app.js/", "/index.html", "/x"} {
		resp, body := get(t, srv.URL+path)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: HTTP %d, want 404", path, resp.StatusCode)
		}
		if strings.Contains(body, "<html") {
			t.Errorf("GET %s served the page", path)
		}
	}
	resp, err := http.Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: HTTP %d, want 405", resp.StatusCode)
	}
}
