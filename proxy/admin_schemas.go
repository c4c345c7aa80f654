package proxy

import (
	"net/http"
	"strconv"

	"github.com/ternmq/tern/protocols"
)

// Admin REST: schemas, in the shapes of Pulsar's schema registry API.

type schemaResponse struct {
	Version    int64             `json:"version"`
	Type       string            `json:"type"`
	Timestamp  int64             `json:"timestamp"`
	Data       string            `json:"data"`
	Properties map[string]string `json:"properties"`
}

type postSchema struct {
	Type       string            `json:"type"`
	Schema     string            `json:"schema"`
	Properties map[string]string `json:"properties"`
}

func (n *Node) schemaRoutes(h routeFunc) {
	const base = "/admin/v2/schemas/{tenant}/{ns}/{topic}/schema"
	get := func(w http.ResponseWriter, r *http.Request, version int64) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		info, v, err := n.Schema(r.Context(), name, version)
		if err != nil {
			return err
		}
		props := info.Properties
		if props == nil {
			props = map[string]string{}
		}
		return okJSON(w, schemaResponse{Version: v, Type: info.Type, Timestamp: info.Timestamp, Data: string(info.Data), Properties: props})
	}
	h("GET "+base, func(w http.ResponseWriter, r *http.Request) error { return get(w, r, -1) })
	h("GET "+base+"/{version}", func(w http.ResponseWriter, r *http.Request) error {
		v, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
		if err != nil || v < 0 {
			return badRequest("schema version %q: want a non-negative number", r.PathValue("version"))
		}
		return get(w, r, v)
	})
	h("POST "+base, func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		var body postSchema
		if err := readJSON(r, &body); err != nil {
			return err
		}
		if body.Type == "" {
			return badRequest("the schema needs a type (AVRO, JSON, PROTOBUF, STRING, ...)")
		}
		v, err := n.AddSchema(r.Context(), name, protocols.SchemaInfo{Type: body.Type, Data: []byte(body.Schema), Properties: body.Properties})
		if err != nil {
			return err
		}
		return okJSON(w, map[string]any{"version": map[string]int64{"version": v}})
	})
	h("DELETE "+base, func(w http.ResponseWriter, r *http.Request) error {
		name, err := pathTopic(r)
		if err != nil {
			return err
		}
		if err := n.DeleteSchema(r.Context(), name); err != nil {
			return err
		}
		return okJSON(w, map[string]any{"version": map[string]int64{"version": 0}})
	})
}
