package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes registers the node's HTTP endpoints. Feature files add their own
// admin routes through Handle.
func (n *Node) routes() {
	n.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	n.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !n.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	n.meshRoutes()
	n.replicationRoutes()
	n.mux.Handle("GET /metrics", promhttp.HandlerFor(n.registry, promhttp.HandlerOpts{ErrorLog: nil}))
}

// Handle registers an HTTP handler on the node's mux (admin REST,
// WebSocket, console). Patterns use net/http's method and wildcard syntax.
func (n *Node) Handle(pattern string, h http.Handler) { n.mux.Handle(pattern, h) }

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
