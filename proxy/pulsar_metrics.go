package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ternmq/tern/protocols/pulsar"
)

// pulsarCollector adapts pulsar.Metrics to Prometheus at scrape time.
type pulsarCollector struct {
	srv          *pulsar.Server
	node, region string
}

var (
	pulsarDescs = map[string]struct {
		d   *prometheus.Desc
		typ prometheus.ValueType
	}{
		"tern_pulsar_connections":           {prometheus.NewDesc("tern_pulsar_connections", "Open Pulsar client connections.", labels, nil), prometheus.GaugeValue},
		"tern_pulsar_connections_total":     {prometheus.NewDesc("tern_pulsar_connections_total", "Pulsar connections accepted since start.", labels, nil), prometheus.CounterValue},
		"tern_pulsar_protocol_errors_total": {prometheus.NewDesc("tern_pulsar_protocol_errors_total", "Pulsar connections closed for a bad frame or a command that breaks the protocol.", labels, nil), prometheus.CounterValue},
		"tern_pulsar_producers":             {prometheus.NewDesc("tern_pulsar_producers", "Pulsar producers attached now.", labels, nil), prometheus.GaugeValue},
		"tern_pulsar_consumers":             {prometheus.NewDesc("tern_pulsar_consumers", "Pulsar consumers attached now.", labels, nil), prometheus.GaugeValue},
		"tern_pulsar_in_entries_total":      {prometheus.NewDesc("tern_pulsar_in_entries_total", "Pulsar SENDs appended to the log (a batch is one entry); resends found to be duplicates excluded.", labels, nil), prometheus.CounterValue},
		"tern_pulsar_in_messages_total":     {prometheus.NewDesc("tern_pulsar_in_messages_total", "Messages appended through Pulsar producers; resends found to be duplicates excluded.", labels, nil), prometheus.CounterValue},
		"tern_pulsar_out_messages_total":    {prometheus.NewDesc("tern_pulsar_out_messages_total", "Messages sent to Pulsar consumers and readers.", labels, nil), prometheus.CounterValue},
		"tern_pulsar_queued_bytes":          {prometheus.NewDesc("tern_pulsar_queued_bytes", "Bytes of deliveries queued on Pulsar connections and not yet written out (at most about 4 MiB a connection).", labels, nil), prometheus.GaugeValue},
		"tern_pulsar_held_consumers_total":  {prometheus.NewDesc("tern_pulsar_held_consumers_total", "Times a Pulsar consumer with permits was sent nothing more until its connection had written out what was queued for it (4 MiB).", labels, nil), prometheus.CounterValue},
	}
	pulsarCommands = prometheus.NewDesc("tern_pulsar_commands_total", "Pulsar commands received, by type.", append([]string{"command"}, labels...), nil)
)

func (c pulsarCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range pulsarDescs {
		ch <- d.d
	}
	ch <- pulsarCommands
}

func (c pulsarCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.srv.Metrics()
	for name, v := range map[string]int64{
		"tern_pulsar_connections":           m.OpenConnections,
		"tern_pulsar_connections_total":     m.Connections,
		"tern_pulsar_protocol_errors_total": m.ProtocolErrors,
		"tern_pulsar_producers":             m.Producers,
		"tern_pulsar_consumers":             m.Consumers,
		"tern_pulsar_in_entries_total":      m.PublishedEntries,
		"tern_pulsar_in_messages_total":     m.PublishedMessages,
		"tern_pulsar_out_messages_total":    m.DispatchedMessages,
		"tern_pulsar_held_consumers_total":  m.HeldConsumers,
		"tern_pulsar_queued_bytes":          m.QueuedBytes,
	} {
		d := pulsarDescs[name]
		ch <- prometheus.MustNewConstMetric(d.d, d.typ, float64(v), c.node, c.region)
	}
	for cmd, v := range m.Commands {
		ch <- prometheus.MustNewConstMetric(pulsarCommands, prometheus.CounterValue, float64(v), cmd, c.node, c.region)
	}
}

// newPulsarPublishTime is the publish latency histogram: a SEND's frame
// read to its receipt queued, as the Kafka request time's buckets.
func newPulsarPublishTime(node, region string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tern_pulsar_publish_seconds",
		Help: "Time from a Pulsar SEND being read to its receipt being queued for the client: " +
			"the broker's publish latency, with the fsync under sync durability.",
		Buckets:     kafkaRequestBuckets,
		ConstLabels: prometheus.Labels{"node": node, "region": region},
	})
}

// registerPulsarMetrics adds the Pulsar front end's figures to /metrics
// and feeds its publish latency histogram.
func (n *Node) registerPulsarMetrics(cfg *pulsar.Config) func(*pulsar.Server) {
	h := newPulsarPublishTime(n.cfg.Node.Name, n.cfg.Node.Region)
	cfg.ObservePublish = func(d time.Duration) { h.Observe(d.Seconds()) }
	return func(srv *pulsar.Server) {
		n.registry.MustRegister(h, pulsarCollector{srv: srv, node: n.cfg.Node.Name, region: n.cfg.Node.Region})
	}
}
