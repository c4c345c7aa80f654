package proxy

import (
	"context"
	"net"

	"github.com/ternmq/tern/protocols/kafka"
)

// kafkaServer builds the Kafka front end from the node's configuration.
func (n *Node) kafkaServer() ProtocolServer {
	cfg := kafka.DefaultConfig()
	cfg.Namespace = n.cfg.Kafka.Namespace
	cfg.MaxInflightBytes = int(n.cfg.Limits.MaxInflightBytes)
	cfg.MaxRequestBytes = max(cfg.MaxRequestBytes, int(n.cfg.Limits.MaxMessageBytes)+1<<20)
	cfg.MaxConnections = n.cfg.Limits.MaxConnections
	cfg.Logger = n.log
	cfg.Now = n.opts.Now
	srv, err := kafka.New(cfg, n)
	if err != nil {
		return failedServer{err}
	}
	return srv
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
