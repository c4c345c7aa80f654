package console

import (
	"bytes"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
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

// Assets serves the console's files under AssetPrefix: files only, so
// a directory or a name that is not there is a 404 rather than a listing
// or the page under another path.
func Assets() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic("console: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		name := strings.TrimPrefix(r.URL.Path, AssetPrefix)
		if name == "index.html" || !fs.ValidPath(name) {
			http.NotFound(w, r)
			return
		}
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
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
