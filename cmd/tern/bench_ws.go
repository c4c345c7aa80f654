package main

// The WebSocket load generator is built in: it uses the WebSocket client
// tern produce and tern consume already link, so it costs the binary
// almost nothing.

import "github.com/ternmq/tern/internal/perf/perfcli"

func init() { benchDrivers["websocket"] = perfcli.WebSocket }
