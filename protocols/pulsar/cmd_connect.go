package pulsar

// CONNECT -> CONNECTED.
//
// The broker answers with the lower of its own protocol version (20) and the
// client's, as Java brokers do, and announces max_message_size. A client that
// sets proxy_to_broker_url reaches this node as a proxy for another broker;
// until regions have more than one node every lookup resolves to the node
// answering it, so the request is served here. Authentication is not
// enforced: auth data is accepted and ignored, and no AUTH_CHALLENGE is sent
// (the Go client fails a handshake that gets one).

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// maxProtocolVersion is the highest protocol version tern speaks.
const maxProtocolVersion = int32(pb.ProtocolVersion_v20)

// handshake reads CONNECT and answers CONNECTED.
func (c *conn) handshake() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	if _, err := c.fr.ReadCommand(&c.cmd); err != nil {
		return err
	}
	if c.stopping.Load() {
		return errorf("server closing")
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	c.s.stats.command(c.cmd.GetType())
	if c.cmd.GetType() != pb.BaseCommand_CONNECT {
		return fmt.Errorf("pulsar: the first command is %s; a connection starts with CONNECT", c.cmd.GetType())
	}
	cc := c.cmd.GetConnect()
	c.version = min(cc.GetProtocolVersion(), maxProtocolVersion)
	c.entryMeta = cc.GetFeatureFlags().GetSupportsBrokerEntryMetadata()
	c.lastRead.Store(time.Now().UnixNano())
	c.log.Debug("client connected", "client_version", cc.GetClientVersion(), "protocol_version", cc.GetProtocolVersion())
	c.queue(NewCommand(&pb.CommandConnected{
		ServerVersion:   proto.String(c.s.cfg.ServerVersion),
		ProtocolVersion: proto.Int32(c.version),
		MaxMessageSize:  proto.Int32(int32(c.s.cfg.MaxMessageSize)),
		FeatureFlags:    &pb.FeatureFlags{SupportsBrokerEntryMetadata: proto.Bool(true)},
	}))
	return nil
}
