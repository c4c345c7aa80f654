package kafka

// DescribeCluster, versions 0-1: the region's nodes, the cluster id and the
// local node as controller. Only the broker endpoint type (1) is served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeCluster, 0, 1, handleDescribeCluster) }

func handleDescribeCluster(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		r.resp = resp
		return nil
	}
	resp.ClusterID = c.s.b.ClusterID()
	resp.ControllerID = c.s.b.LocalNode().ID
	resp.ClusterAuthorizedOperations = -2147483648
	for _, b := range c.s.brokers() {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	r.resp = resp
	return nil
}
