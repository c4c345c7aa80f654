package proxy

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ternmq/tern/replicator"
)

// replicationCollector adapts replicator.Status to Prometheus at scrape time: lag comes from the
// log and the durable cursors, as in GET /api/v1/replication.
type replicationCollector struct{ n *Node }

var (
	streamLabels  = []string{"node", "region", "topic", "partition", "destination"}
	inboundLabels = []string{"node", "region", "topic", "partition", "from_region", "from_node"}
	linkLabels    = []string{"node", "region", "peer", "peer_region"}

	replLagMessages = prometheus.NewDesc("tern_replication_lag_messages",
		"Messages of the partition not yet acknowledged by the destination region.", streamLabels, nil)
	replLagSeconds = prometheus.NewDesc("tern_replication_lag_seconds",
		"Age of the oldest message not yet acknowledged by the destination region (0 without lag).", streamLabels, nil)
	replStalled = prometheus.NewDesc("tern_replication_stalled",
		"1 when the stream has a backlog and nothing was acknowledged for longer than replication.stall_after.", streamLabels, nil)
	replConnected = prometheus.NewDesc("tern_replication_stream_open",
		"1 when the stream to the destination is open.", streamLabels, nil)
	replLastTransfer = prometheus.NewDesc("tern_replication_last_transfer_timestamp_seconds",
		"When the destination last acknowledged something (Unix seconds; 0 never).", streamLabels, nil)
	replSentBytes = prometheus.NewDesc("tern_replication_sent_bytes_total",
		"Entry bytes sent to the destination since the sender started.", streamLabels, nil)
	replSentMessages = prometheus.NewDesc("tern_replication_sent_messages_total",
		"Messages sent to the destination since the sender started (resends included).", streamLabels, nil)
	replLost = prometheus.NewDesc("tern_replication_lost_to_retention_messages",
		"Messages retention removed before they reached the destination.", streamLabels, nil)
	replInMessages = prometheus.NewDesc("tern_replication_received_messages_total",
		"Replicated messages appended (or dropped as duplicates) from the peer.", inboundLabels, nil)
	replInDuplicates = prometheus.NewDesc("tern_replication_duplicate_entries_total",
		"Replicated entries dropped because this region already held them.", inboundLabels, nil)
	replLinkUp = prometheus.NewDesc("tern_replication_link_up",
		"1 when the QUIC link to the peer is up.", linkLabels, nil)
	replLinkRTT = prometheus.NewDesc("tern_replication_link_rtt_seconds",
		"Smoothed round-trip time of the link (0 while down).", linkLabels, nil)
	replLinkBytesSent = prometheus.NewDesc("tern_replication_link_sent_bytes_total",
		"Bytes of link frames sent to the peer.", linkLabels, nil)
	replLinkBytesRecv = prometheus.NewDesc("tern_replication_link_received_bytes_total",
		"Bytes of link frames received from the peer.", linkLabels, nil)
	replDescs = []*prometheus.Desc{replLagMessages, replLagSeconds, replStalled, replConnected, replLastTransfer,
		replSentBytes, replSentMessages, replLost, replInMessages, replInDuplicates,
		replLinkUp, replLinkRTT, replLinkBytesSent, replLinkBytesRecv}
)

func (c *replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range replDescs {
		ch <- d
	}
}

func (c *replicationCollector) Collect(ch chan<- prometheus.Metric) {
	eng := c.n.repl.engine
	if eng == nil {
		return
	}
	st := eng.Status()
	node, region := c.n.cfg.Node.Name, c.n.cfg.Node.Region
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, s := range st.Streams {
		lv := []string{node, region, s.Topic, strconv.Itoa(s.Partition), s.Destination}
		var last float64
		if s.LastTransfer != nil {
			last = float64(s.LastTransfer.UnixMilli()) / 1000
		}
		open := s.State == replicator.StreamActive || s.State == replicator.StreamStalled
		ch <- prometheus.MustNewConstMetric(replLagMessages, prometheus.GaugeValue, float64(s.LagMessages), lv...)
		ch <- prometheus.MustNewConstMetric(replLagSeconds, prometheus.GaugeValue, s.LagSeconds, lv...)
		ch <- prometheus.MustNewConstMetric(replStalled, prometheus.GaugeValue, b(s.State == replicator.StreamStalled), lv...)
		ch <- prometheus.MustNewConstMetric(replConnected, prometheus.GaugeValue, b(open), lv...)
		ch <- prometheus.MustNewConstMetric(replLastTransfer, prometheus.GaugeValue, last, lv...)
		ch <- prometheus.MustNewConstMetric(replSentBytes, prometheus.CounterValue, float64(s.SentBytes), lv...)
		ch <- prometheus.MustNewConstMetric(replSentMessages, prometheus.CounterValue, float64(s.SentMessages), lv...)
		ch <- prometheus.MustNewConstMetric(replLost, prometheus.GaugeValue, float64(s.LostToRetention), lv...)
	}
	for _, in := range st.Inbound {
		lv := []string{node, region, in.Topic, strconv.Itoa(in.Partition), in.FromRegion, in.FromNode}
		ch <- prometheus.MustNewConstMetric(replInMessages, prometheus.CounterValue, float64(in.Messages), lv...)
		ch <- prometheus.MustNewConstMetric(replInDuplicates, prometheus.CounterValue, float64(in.Duplicates), lv...)
	}
	for _, l := range st.Links {
		lv := []string{node, region, l.Peer, l.Region}
		ch <- prometheus.MustNewConstMetric(replLinkUp, prometheus.GaugeValue, b(l.State == replicator.LinkUp.String()), lv...)
		ch <- prometheus.MustNewConstMetric(replLinkRTT, prometheus.GaugeValue, l.RTTMs/1000, lv...)
		ch <- prometheus.MustNewConstMetric(replLinkBytesSent, prometheus.CounterValue, float64(l.BytesSent), lv...)
		ch <- prometheus.MustNewConstMetric(replLinkBytesRecv, prometheus.CounterValue, float64(l.BytesReceived), lv...)
	}
}
