package proxy

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ternmq/tern/protocols/websocket"
)

// The Pulsar WebSocket API v2 on the node's HTTP port (/ws/), and the web
// console beside it. The WebSocket sessions are hijacked connections, which
// the HTTP server's Shutdown neither closes nor waits for, so the node
// closes them itself first thing in Close, before the front ends and the
// subscriptions they use go away.

// nodeWeb maps each *Node to its web state.
var nodeWeb sync.Map

// webState is what the HTTP side keeps per node.
type webState struct {
	ws    *websocket.Server
	rates *rateBook
}

func (n *Node) web() *webState {
	v, _ := nodeWeb.LoadOrStore(n, &webState{rates: newRateBook()})
	return v.(*webState)
}

// rates is the node's rate sample book.
func (n *Node) rates() *rateBook { return n.web().rates }

// webRoutes mounts the WebSocket API and the console.
func (n *Node) webRoutes() {
	cfg := websocket.DefaultConfig()
	cfg.MaxMessageSize = int(n.cfg.Limits.MaxMessageBytes)
	cfg.MaxSessions = n.cfg.Limits.MaxConnections
	cfg.MaxInflightBytes = int(n.cfg.Limits.MaxInflightBytes)
	cfg.Logger = n.log.With("component", "websocket")
	srv, err := websocket.New(cfg, n)
	if err != nil {
		n.log.Error("the WebSocket API is off: its configuration is invalid", "err", err)
	} else {
		n.web().ws = srv
		n.Handle("/ws/", srv)
		n.registry.MustRegister(wsCollector{srv: srv, node: n.cfg.Node.Name, region: n.cfg.Node.Region})
	}
	n.consoleAPIRoutes()
	n.consoleRoutes()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		<-n.stop
		nodeWeb.Delete(n)
	}()
}

// WebSocket is the node's WebSocket front end (nil when it is off).
func (n *Node) WebSocket() *websocket.Server {
	if v, ok := nodeWeb.Load(n); ok {
		return v.(*webState).ws
	}
	return nil
}

// closeWeb ends every WebSocket session; the node's web state is dropped
// once the node has stopped.
func (n *Node) closeWeb(ctx context.Context) []error {
	v, ok := nodeWeb.Load(n)
	if !ok || v.(*webState).ws == nil {
		return nil
	}
	if err := v.(*webState).ws.Close(ctx); err != nil {
		return []error{fmt.Errorf("websocket: %w", err)}
	}
	return nil
}

// wsCollector adapts websocket.Metrics to Prometheus at scrape time.
type wsCollector struct {
	srv          *websocket.Server
	node, region string
}

var (
	wsSessions = prometheus.NewDesc("tern_websocket_sessions", "Open WebSocket sessions by endpoint.", append([]string{"endpoint"}, labels...), nil)
	wsDescs    = map[string]*prometheus.Desc{
		"tern_websocket_sessions_total":        prometheus.NewDesc("tern_websocket_sessions_total", "WebSocket sessions opened since start.", labels, nil),
		"tern_websocket_refused_total":         prometheus.NewDesc("tern_websocket_refused_total", "WebSocket upgrades answered with an HTTP error.", labels, nil),
		"tern_websocket_produced_total":        prometheus.NewDesc("tern_websocket_produced_total", "Messages made durable through WebSocket producers.", labels, nil),
		"tern_websocket_delivered_total":       prometheus.NewDesc("tern_websocket_delivered_total", "Messages pushed to WebSocket consumers and readers.", labels, nil),
		"tern_websocket_acked_total":           prometheus.NewDesc("tern_websocket_acked_total", "Acknowledgements from WebSocket consumers.", labels, nil),
		"tern_websocket_bad_input_total":       prometheus.NewDesc("tern_websocket_bad_input_total", "WebSocket client messages refused as malformed.", labels, nil),
		"tern_websocket_dead_lettered_total":   prometheus.NewDesc("tern_websocket_dead_lettered_total", "Messages WebSocket consumers moved to dead-letter topics.", labels, nil),
		"tern_websocket_frames_received_total": prometheus.NewDesc("tern_websocket_frames_received_total", "WebSocket messages read from clients.", labels, nil),
		"tern_websocket_frames_sent_total":     prometheus.NewDesc("tern_websocket_frames_sent_total", "WebSocket messages written to clients.", labels, nil),
		"tern_websocket_socket_writes_total":   prometheus.NewDesc("tern_websocket_socket_writes_total", "Writes to WebSocket connections; a consumer's pushed messages leave several to a write.", labels, nil),
	}
)

func (c wsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- wsSessions
	for _, d := range wsDescs {
		ch <- d
	}
}

func (c wsCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.srv.Metrics()
	for ep, v := range map[string]int64{"producer": m.Producers, "consumer": m.Consumers, "reader": m.Readers, "pingpong": m.PingPongs} {
		ch <- prometheus.MustNewConstMetric(wsSessions, prometheus.GaugeValue, float64(v), ep, c.node, c.region)
	}
	emit := func(name string, v int64) {
		ch <- prometheus.MustNewConstMetric(wsDescs[name], prometheus.CounterValue, float64(v), c.node, c.region)
	}
	emit("tern_websocket_sessions_total", m.Sessions)
	emit("tern_websocket_refused_total", m.Refused)
	emit("tern_websocket_produced_total", m.Produced)
	emit("tern_websocket_delivered_total", m.Delivered)
	emit("tern_websocket_acked_total", m.Acked)
	emit("tern_websocket_bad_input_total", m.BadInput)
	emit("tern_websocket_dead_lettered_total", m.DeadLettered)
	emit("tern_websocket_frames_received_total", m.FramesIn)
	emit("tern_websocket_frames_sent_total", m.FramesOut)
	emit("tern_websocket_socket_writes_total", m.Writes)
}
