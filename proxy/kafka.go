package proxy

import (
	"context"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ternmq/tern/protocols/kafka"
)

// kafkaServer builds the Kafka front end from the node's configuration.
func (n *Node) kafkaServer() ProtocolServer {
	cfg := kafka.DefaultConfig()
	cfg.Namespace = n.cfg.Kafka.Namespace
	cfg.MaxInflightBytes = int(n.cfg.Limits.MaxInflightBytes)
	cfg.MaxRequestBytes = max(cfg.MaxRequestBytes, int(n.cfg.Limits.MaxMessageBytes)+1<<20)
	cfg.MaxConnections = n.cfg.Limits.MaxConnections
	cfg.FetchMaxBytes = int(n.cfg.Kafka.FetchMaxBytes)
	cfg.FetchSessionSlots = n.cfg.Kafka.FetchSessionSlots
	cfg.Logger = n.log
	cfg.Now = n.opts.Now
	cfg.ObserveRequest = n.observeKafkaRequest
	srv, err := kafka.New(cfg, n)
	if err != nil {
		return failedServer{err}
	}
	n.kafka.srv.Store(srv)
	return srv
}

// kafkaRequestBuckets are the upper bounds, in seconds, of the request
// time histogram: fine below 10 ms, where an acknowledged produce should
// be, then coarse up to a long-polling fetch's wait.
var kafkaRequestBuckets = []float64{
	0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03,
	0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

func newKafkaRequestTime(node, region string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tern_kafka_request_seconds",
		Help: "Time from a Kafka request being read to its response being written, by API " +
			"(a Produce with acks=all includes its fsync, a Fetch its long-poll wait).",
		Buckets:     kafkaRequestBuckets,
		ConstLabels: prometheus.Labels{"node": node, "region": region},
	}, []string{"api"})
}

// kafkaPhaseBuckets bound the phase histogram: finer than the request
// time's at the bottom, where the handler's work and the send are.
var kafkaPhaseBuckets = append([]float64{0.0001, 0.00025}, kafkaRequestBuckets...)

// kafkaPhases name the phases of kafka.RequestTimes, in its order.
var kafkaPhases = [...]string{"receive", "local", "queue", "wait", "send"}

func newKafkaRequestPhases(node, region string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tern_kafka_request_phase_seconds",
		Help: "Where a Kafka request's time went, by API and phase: receive (first bytes of the request " +
			"to its last), local (the handler: decoding, validating, a produce's write), queue (waiting " +
			"behind the connection's earlier answers), wait (a produce's fsync, a fetch's long poll, a " +
			"join's rebalance), send (encoding and writing the response).",
		Buckets:     kafkaPhaseBuckets,
		ConstLabels: prometheus.Labels{"node": node, "region": region},
	}, []string{"api", "phase"})
}

// kafkaObservers are one API's request time and phase observers.
type kafkaObservers struct {
	total  prometheus.Observer
	phases [len(kafkaPhases)]prometheus.Observer
}

// observeKafkaRequest feeds the request time and phase histograms; the
// API's observers are looked up once per key and kept.
func (n *Node) observeKafkaRequest(key int16, t kafka.RequestTimes) {
	if key < 0 || int(key) >= len(n.kafka.reqTime) {
		return
	}
	o := n.kafka.reqTime[key].Load()
	if o == nil {
		name := kmsg.NameForKey(key)
		if name == "" {
			return
		}
		o = &kafkaObservers{total: n.kafka.reqTimeVec.WithLabelValues(name)}
		for i, ph := range kafkaPhases {
			o.phases[i] = n.kafka.reqPhaseVec.WithLabelValues(name, ph)
		}
		n.kafka.reqTime[key].Store(o)
	}
	o.total.Observe(t.Total().Seconds())
	for i, d := range [...]time.Duration{t.Receive, t.Local, t.Queue, t.Wait, t.Send} {
		o.phases[i].Observe(d.Seconds())
	}
}

// kafkaCollector adapts kafka.Metrics to Prometheus at scrape time.
type kafkaCollector struct{ n *Node }

var (
	kafkaDescs = map[string]*prometheus.Desc{
		"tern_kafka_connections":                   prometheus.NewDesc("tern_kafka_connections", "Open Kafka client connections.", labels, nil),
		"tern_kafka_connections_total":             prometheus.NewDesc("tern_kafka_connections_total", "Kafka connections accepted since start.", labels, nil),
		"tern_kafka_protocol_errors_total":         prometheus.NewDesc("tern_kafka_protocol_errors_total", "Kafka connections closed for a protocol violation.", labels, nil),
		"tern_kafka_produced_batches_total":        prometheus.NewDesc("tern_kafka_produced_batches_total", "Record batches appended through Kafka.", labels, nil),
		"tern_kafka_produced_records_total":        prometheus.NewDesc("tern_kafka_produced_records_total", "Records appended through Kafka.", labels, nil),
		"tern_kafka_fetched_bytes_total":           prometheus.NewDesc("tern_kafka_fetched_bytes_total", "Record bytes sent in Kafka fetch responses.", labels, nil),
		"tern_kafka_fetch_sessions":                prometheus.NewDesc("tern_kafka_fetch_sessions", "Kafka fetch sessions (KIP-227) open.", labels, nil),
		"tern_kafka_fetch_session_partitions":      prometheus.NewDesc("tern_kafka_fetch_session_partitions", "Partitions held by open Kafka fetch sessions.", labels, nil),
		"tern_kafka_incremental_fetches_total":     prometheus.NewDesc("tern_kafka_incremental_fetches_total", "Kafka fetches served on a fetch session.", labels, nil),
		"tern_kafka_fetch_session_evictions_total": prometheus.NewDesc("tern_kafka_fetch_session_evictions_total", "Kafka fetch sessions closed to open another.", labels, nil),
	}
	kafkaRequests = prometheus.NewDesc("tern_kafka_requests_total", "Kafka requests by API.", append([]string{"api"}, labels...), nil)
)

func (c kafkaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range kafkaDescs {
		ch <- d
	}
	ch <- kafkaRequests
}

func (c kafkaCollector) Collect(ch chan<- prometheus.Metric) {
	srv := c.n.kafka.srv.Load()
	if srv == nil {
		return
	}
	m := srv.Metrics()
	node, region := c.n.cfg.Node.Name, c.n.cfg.Node.Region
	emit := func(name string, typ prometheus.ValueType, v int64) {
		ch <- prometheus.MustNewConstMetric(kafkaDescs[name], typ, float64(v), node, region)
	}
	emit("tern_kafka_connections", prometheus.GaugeValue, m.OpenConnections)
	emit("tern_kafka_connections_total", prometheus.CounterValue, m.Connections)
	emit("tern_kafka_protocol_errors_total", prometheus.CounterValue, m.ProtocolErrors)
	emit("tern_kafka_produced_batches_total", prometheus.CounterValue, m.ProducedBatches)
	emit("tern_kafka_produced_records_total", prometheus.CounterValue, m.ProducedRecords)
	emit("tern_kafka_fetched_bytes_total", prometheus.CounterValue, m.FetchedBytes)
	emit("tern_kafka_fetch_sessions", prometheus.GaugeValue, m.FetchSessions)
	emit("tern_kafka_fetch_session_partitions", prometheus.GaugeValue, m.FetchSessionPartitions)
	emit("tern_kafka_incremental_fetches_total", prometheus.CounterValue, m.IncrementalFetches)
	emit("tern_kafka_fetch_session_evictions_total", prometheus.CounterValue, m.FetchSessionEvictions)
	for api, v := range m.Requests {
		ch <- prometheus.MustNewConstMetric(kafkaRequests, prometheus.CounterValue, float64(v), api, node, region)
	}
}

// ValidateTopicConfig implements protocols.TopicConfigValidator.
func (n *Node) ValidateTopicConfig(config map[string]string) error {
	return n.validateTopicConfig(config)
}

// failedServer reports a front end that could not be built.
type failedServer struct{ err error }

func (f failedServer) Serve(ln net.Listener) error {
	_ = ln.Close()
	return f.err
}

func (f failedServer) Close(context.Context) error { return nil }
