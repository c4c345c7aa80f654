package main

// The WebSocket load generator is built in: it uses the WebSocket client
// tern produce and tern consume already link, so it costs the binary
// almost nothing.

import (
	"strings"

	"github.com/ternmq/tern/internal/perf"
	"github.com/ternmq/tern/internal/perf/perfcli"
	"github.com/ternmq/tern/internal/perf/wsdriver"
)

func init() { benchDrivers["websocket"] = wsBenchDriver }

func wsBenchDriver(f *perfcli.Flags) (perf.Driver, error) {
	return wsdriver.New(wsdriver.Config{URL: f.WebSocketURL, AdminURL: httpURL(f.AdminURL)})
}

// httpURL gives an admin address a scheme; empty stays empty.
func httpURL(u string) string {
	if u != "" && !strings.Contains(u, "://") {
		return "http://" + u
	}
	return u
}
