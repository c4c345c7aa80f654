package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/regions"
)

// startMesh joins the node to the mesh once its listeners are bound, so the
// addresses it gossips are the real ones.
func (n *Node) startMesh() error {
	cfg := regions.DefaultConfig()
	cfg.NodeName = n.cfg.Node.Name
	cfg.Region = n.cfg.Node.Region
	cfg.Rack = n.cfg.Node.Rack
	cfg.BindAddr = n.cfg.Mesh.GossipAddr
	cfg.AdvertiseAddr = n.cfg.Mesh.GossipAdvertise
	if cfg.AdvertiseAddr == "" {
		cfg.AdvertiseAddr = n.gossipAdvertiseDefault()
	}
	cfg.Seeds = n.cfg.Mesh.Join
	cfg.EncryptKey = n.cfg.Mesh.GossipKey
	cfg.DataDir = filepath.Join(n.cfg.DataDir, "mesh")
	cfg.Logger = n.log
	switch {
	case n.opts.MeshTimings != nil:
		cfg.Timings = *n.opts.MeshTimings
	case n.cfg.Mesh.Timings == "lan":
		cfg.Timings = regions.LANTimings()
	default:
		cfg.Timings = regions.WANTimings()
	}
	cfg.Advertise = regions.Advertise{
		QUIC:    n.advertiseAddr(n.meshQUICAddr()),
		Kafka:   n.local.KafkaAddr,
		Pulsar:  n.local.PulsarAddr,
		HTTP:    n.local.HTTPAddr,
		Version: n.opts.Version,
	}
	m, err := regions.New(cfg)
	if err != nil {
		return err
	}
	n.mesh = m
	return nil
}

// gossipAdvertiseDefault keeps a loopback-bound gossip address advertised
// as loopback; otherwise serf picks an interface address.
func (n *Node) gossipAdvertiseDefault() string {
	host, _, err := net.SplitHostPort(n.cfg.Mesh.GossipAddr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return host
	}
	if h := n.cfg.Listeners.AdvertisedHost; h != "" && net.ParseIP(h) != nil {
		return h
	}
	return ""
}

// advertiseAddr is a configured host:port as peers should dial it.
func (n *Node) advertiseAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if h := n.cfg.Listeners.AdvertisedHost; h != "" {
		host = h
	} else if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = advertisedHostname()
	}
	return net.JoinHostPort(host, port)
}

// Mesh is the node's membership (nil before Start).
func (n *Node) Mesh() *regions.Mesh { return n.mesh }

// RegionNodes implements protocols.Cluster: the up nodes of the local
// region that serve Kafka clients, this node first.
func (n *Node) RegionNodes() []protocols.NodeInfo {
	out := []protocols.NodeInfo{n.local}
	if n.mesh == nil {
		return out
	}
	for _, m := range n.mesh.Directory().Region(n.cfg.Node.Region) {
		if m.Name == n.local.Name || !m.State.Up() {
			continue
		}
		out = append(out, protocols.NodeInfo{
			Name: m.Name, ID: nodeID(m.Name), Region: n.cfg.Node.Region, Rack: m.Rack,
			KafkaAddr: m.Kafka, PulsarAddr: m.Pulsar, HTTPAddr: m.HTTP,
		})
	}
	slices.SortFunc(out[1:], func(a, b protocols.NodeInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// meshRoutes serves the mesh view and keyring rotation.
func (n *Node) meshRoutes() {
	n.mux.HandleFunc("GET /api/v1/mesh", func(w http.ResponseWriter, r *http.Request) {
		if n.mesh == nil {
			writeAPIError(w, http.StatusServiceUnavailable, "the node has not joined the mesh yet")
			return
		}
		writeJSON(w, http.StatusOK, n.mesh.Snapshot())
	})
	keyOp := func(op func(ctx context.Context, key string) (regions.KeyringResult, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if n.mesh == nil {
				writeAPIError(w, http.StatusServiceUnavailable, "the node has not joined the mesh yet")
				return
			}
			var body struct {
				Key string `json:"key"`
			}
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil || body.Key == "" {
				writeAPIError(w, http.StatusBadRequest, `send {"key": "<base64 of a 16, 24 or 32-byte key>"}`)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			defer cancel()
			res, err := op(ctx, body.Key)
			if err != nil {
				status := http.StatusBadGateway
				switch {
				case errors.Is(err, regions.ErrInvalidKey):
					status = http.StatusBadRequest
				case errors.Is(err, regions.ErrEncryptionDisabled):
					status = http.StatusConflict
				}
				writeAPIError(w, status, err.Error())
				return
			}
			writeJSON(w, http.StatusOK, res)
		}
	}
	n.mux.HandleFunc("GET /api/v1/mesh/keys", func(w http.ResponseWriter, r *http.Request) {
		if n.mesh == nil {
			writeAPIError(w, http.StatusServiceUnavailable, "the node has not joined the mesh yet")
			return
		}
		res, err := n.mesh.ListKeys(r.Context())
		if err != nil {
			writeAPIError(w, http.StatusBadGateway, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	n.mux.HandleFunc("POST /api/v1/mesh/keys", keyOp(func(ctx context.Context, k string) (regions.KeyringResult, error) { return n.mesh.InstallKey(ctx, k) }))
	n.mux.HandleFunc("PUT /api/v1/mesh/keys/primary", keyOp(func(ctx context.Context, k string) (regions.KeyringResult, error) { return n.mesh.UseKey(ctx, k) }))
	n.mux.HandleFunc("DELETE /api/v1/mesh/keys", keyOp(func(ctx context.Context, k string) (regions.KeyringResult, error) { return n.mesh.RemoveKey(ctx, k) }))
}

// writeAPIError writes tern's own API error shape.
func writeAPIError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
