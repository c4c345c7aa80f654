// Package console is tern's web console: the page the node serves at / on
// its HTTP port, for operators to watch topics, partitions, subscriptions
// and the mesh, and to tail a topic live.
//
// It owns the console's static files (HTML, CSS, JavaScript, icon), which
// are embedded in the binary with embed, so a fresh machine needs no build
// step, no Node.js and no network: the page is plain JavaScript that reads
// the node's JSON API (/api/v1/...) and tails topics through Pulsar's
// WebSocket API (/ws/v2/reader/...). It must not hold logic the API does
// not expose to every client: everything the console shows, a script can
// get from the same endpoints. It exists as its own package so that the
// node (package proxy) only mounts a handler and the assets stay in one
// place with their tests.
package console
