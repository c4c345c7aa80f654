package proxy

import "github.com/ternmq/tern/proxy/console"

// consoleRoutes serves the web console: its page at the root only (the
// {$} anchor keeps every other path to its own handler or a 404), its
// files under /console/, and the icon browsers ask for unprompted.
func (n *Node) consoleRoutes() {
	n.Handle("GET "+console.IndexPath+"{$}", console.Index())
	n.Handle("GET "+console.AssetPrefix, console.Assets())
	n.Handle("GET /favicon.ico", console.Icon())
}
