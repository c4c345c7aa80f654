package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Paths the console's handler serves.
const (
	// AssetPrefix is where the console's scripts, styles and icons live.
	AssetPrefix = "/console/"
	// IndexPath is the page itself.
	IndexPath = "/"
)

// securityHeaders keep the page to its own origin: scripts and styles only
// from the node, connections only back to it (fetch and WebSocket), no
// framing by other sites.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// Index serves the console's page.
func Index() http.Handler {
	page, err := static.ReadFile("static/index.html")
	if err != nil {
		panic("console: the embedded index.html is missing: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
}

// Assets serves the console's files under AssetPrefix.
func Assets() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic("console: " + err.Error())
	}
	files := http.StripPrefix(AssetPrefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		files.ServeHTTP(w, r)
	})
}

// Icon serves the icon at /favicon.ico, where browsers look for it
// unasked.
func Icon() http.Handler {
	icon, err := static.ReadFile("static/favicon.svg")
	if err != nil {
		panic("console: the embedded favicon.svg is missing: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "max-age=86400")
		_, _ = w.Write(icon)
	})
}
