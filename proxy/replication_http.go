package proxy

// Replication over HTTP:
//
//	GET    /api/v1/replication                      status: streams, lag, links, inbound
//	GET    /api/v1/policies[?deleted=true]          every policy record (latest versions)
//	GET    /api/v1/policies?namespace=t/ns          one record (or ?topic=persistent://t/ns/x)
//	PUT    /api/v1/policies                         write one: {"namespace"|"topic", "regions",
//	                                                "start", "topology", "hub", "if_version", "dry_run"}
//	DELETE /api/v1/policies?namespace=t/ns[&if_version=N][&dry_run=true]
//
// and Pulsar's admin endpoints for the region list (Pulsar calls regions clusters):
//
//	POST|GET        /admin/v2/namespaces/{tenant}/{namespace}/replication          body ["us","eu"]
//	POST|GET|DELETE /admin/v2/persistent/{tenant}/{namespace}/{topic}/replication
//
// A Pulsar write keeps the record's topology, hub and start positions (those only the tern
// endpoint sets). Pulsar's GET on a namespace without a policy answers the local region, as a
// Pulsar namespace defaults to its own cluster; on a topic without its own policy it answers an
// empty body, or with ?applied=true the effective list.

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/replicator"
)

func (n *Node) replicationRoutes() {
	n.mux.HandleFunc("GET /api/v1/replication", func(w http.ResponseWriter, r *http.Request) {
		eng := n.repl.engine
		if eng == nil {
			writeAPIError(w, http.StatusServiceUnavailable, "replication has not started yet")
			return
		}
		writeJSON(w, http.StatusOK, eng.Status())
	})
	n.mux.HandleFunc("GET /api/v1/policies", n.getPolicies)
	n.mux.HandleFunc("PUT /api/v1/policies", n.putPolicy)
	n.mux.HandleFunc("DELETE /api/v1/policies", n.deletePolicy)

	n.mux.HandleFunc("GET /admin/v2/namespaces/{tenant}/{namespace}/replication", func(w http.ResponseWriter, r *http.Request) {
		key, ok := pulsarNamespaceKey(w, r)
		if !ok {
			return
		}
		regions := []string{n.cfg.Node.Region}
		if p, ok := n.repl.engine.Policy(key); ok && !p.Deleted {
			regions = p.Regions
		}
		writeJSON(w, http.StatusOK, regions)
	})
	n.mux.HandleFunc("POST /admin/v2/namespaces/{tenant}/{namespace}/replication", func(w http.ResponseWriter, r *http.Request) {
		key, ok := pulsarNamespaceKey(w, r)
		if !ok {
			return
		}
		ns, _ := protocols.ParseNamespace(key.Name)
		if err := n.ensureNamespace(ns); err != nil {
			writePulsarError(w, http.StatusInternalServerError, err.Error())
			return
		}
		n.pulsarSetRegions(w, r, key)
	})
	n.mux.HandleFunc("GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/replication", func(w http.ResponseWriter, r *http.Request) {
		key, name, ok := pulsarTopicKey(w, r)
		if !ok {
			return
		}
		if p, ok := n.repl.engine.Policy(key); ok && !p.Deleted {
			writeJSON(w, http.StatusOK, p.Regions)
			return
		}
		if applied, _ := strconv.ParseBool(r.URL.Query().Get("applied")); applied {
			regions := []string{n.cfg.Node.Region}
			if p, ok := n.repl.engine.EffectivePolicy(name); ok {
				regions = p.Regions
			}
			writeJSON(w, http.StatusOK, regions)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	n.mux.HandleFunc("POST /admin/v2/persistent/{tenant}/{namespace}/{topic}/replication", func(w http.ResponseWriter, r *http.Request) {
		if key, _, ok := pulsarTopicKey(w, r); ok {
			n.pulsarSetRegions(w, r, key)
		}
	})
	n.mux.HandleFunc("DELETE /admin/v2/persistent/{tenant}/{namespace}/{topic}/replication", func(w http.ResponseWriter, r *http.Request) {
		key, _, ok := pulsarTopicKey(w, r)
		if !ok {
			return
		}
		if _, err := n.repl.engine.DeletePolicy(r.Context(), replicator.PolicyWrite{Key: key}); err != nil {
			writePulsarError(w, policyErrStatus(err, true), err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func pulsarNamespaceKey(w http.ResponseWriter, r *http.Request) (replicator.PolicyKey, bool) {
	key := replicator.PolicyKey{Kind: replicator.KindNamespace, Name: r.PathValue("tenant") + "/" + r.PathValue("namespace")}
	if err := key.Validate(); err != nil {
		writePulsarError(w, http.StatusBadRequest, err.Error())
		return key, false
	}
	return key, true
}

func pulsarTopicKey(w http.ResponseWriter, r *http.Request) (replicator.PolicyKey, protocols.TopicName, bool) {
	name := protocols.TopicName{Tenant: r.PathValue("tenant"), Namespace: r.PathValue("namespace"), Local: r.PathValue("topic")}
	key := replicator.PolicyKey{Kind: replicator.KindTopic, Name: name.String()}
	if err := name.Validate(); err != nil {
		writePulsarError(w, http.StatusBadRequest, err.Error())
		return key, name, false
	}
	if err := key.Validate(); err != nil {
		writePulsarError(w, http.StatusBadRequest, err.Error())
		return key, name, false
	}
	return key, name, true
}

// pulsarSetRegions sets a record's region list from a Pulsar-style body, keeping the rest.
func (n *Node) pulsarSetRegions(w http.ResponseWriter, r *http.Request, key replicator.PolicyKey) {
	var regions []string
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&regions); err != nil {
		writePulsarError(w, http.StatusBadRequest, `send a JSON list of regions, for example ["us","eu"]`)
		return
	}
	spec := replicator.PolicySpec{Regions: regions}
	if cur, ok := n.repl.engine.Policy(key); ok && !cur.Deleted {
		spec.Topology, spec.Hub = cur.Topology, cur.Hub
		for reg, st := range cur.Start {
			if slices.Contains(regions, reg) {
				if spec.Start == nil {
					spec.Start = map[string]replicator.Start{}
				}
				spec.Start[reg] = st
			}
		}
	}
	if _, err := n.repl.engine.SetPolicy(r.Context(), replicator.PolicyWrite{Key: key, Spec: spec}); err != nil {
		writePulsarError(w, policyErrStatus(err, true), err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// policyRequest is the body of PUT /api/v1/policies.
type policyRequest struct {
	Namespace string `json:"namespace,omitempty"`
	Topic     string `json:"topic,omitempty"`
	replicator.PolicySpec
	IfVersion *int64 `json:"if_version,omitempty"`
	DryRun    bool   `json:"dry_run,omitempty"`
}

// policyKeyOf names the record a request or query means.
func policyKeyOf(namespace, topic string) (replicator.PolicyKey, error) {
	switch {
	case namespace != "" && topic != "":
		return replicator.PolicyKey{}, errors.New("name either namespace or topic, not both")
	case namespace != "":
		k := replicator.PolicyKey{Kind: replicator.KindNamespace, Name: namespace}
		return k, k.Validate()
	case topic != "":
		t, err := protocols.ParseTopicName(topic, "")
		if err != nil {
			return replicator.PolicyKey{}, err
		}
		k := replicator.PolicyKey{Kind: replicator.KindTopic, Name: t.String()}
		return k, k.Validate()
	}
	return replicator.PolicyKey{}, errors.New(`name the policy: namespace ("tenant/ns") or topic ("persistent://tenant/ns/topic")`)
}

func (n *Node) getPolicies(w http.ResponseWriter, r *http.Request) {
	eng := n.repl.engine
	q := r.URL.Query()
	if q.Get("namespace") == "" && q.Get("topic") == "" {
		deleted, _ := strconv.ParseBool(q.Get("deleted"))
		writeJSON(w, http.StatusOK, map[string]any{"regions": eng.KnownRegions(), "policies": eng.Policies(deleted)})
		return
	}
	key, err := policyKeyOf(q.Get("namespace"), q.Get("topic"))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	p, ok := eng.Policy(key)
	if !ok {
		writeAPIError(w, http.StatusNotFound, "no policy for "+key.String())
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (n *Node) putPolicy(w http.ResponseWriter, r *http.Request) {
	var req policyRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeAPIError(w, http.StatusBadRequest, "policy body: "+err.Error())
		return
	}
	key, err := policyKeyOf(req.Namespace, req.Topic)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	if key.Kind == replicator.KindNamespace && !req.DryRun {
		ns, _ := protocols.ParseNamespace(key.Name)
		if err := n.ensureNamespace(ns); err != nil {
			writeAPIError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	ch, err := n.repl.engine.SetPolicy(r.Context(), replicator.PolicyWrite{Key: key, Spec: req.PolicySpec, IfVersion: req.IfVersion, DryRun: req.DryRun})
	if err != nil {
		writePolicyError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ch)
}

func (n *Node) deletePolicy(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key, err := policyKeyOf(q.Get("namespace"), q.Get("topic"))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	pw := replicator.PolicyWrite{Key: key}
	if v := q.Get("if_version"); v != "" {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeAPIError(w, http.StatusBadRequest, "if_version: want a version number")
			return
		}
		pw.IfVersion = &x
	}
	pw.DryRun, _ = strconv.ParseBool(q.Get("dry_run"))
	ch, err := n.repl.engine.DeletePolicy(r.Context(), pw)
	if err != nil {
		writePolicyError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ch)
}

// policyErrStatus maps a policy write error to an HTTP status. Pulsar answers an unknown
// cluster with 412 Precondition Failed.
func policyErrStatus(err error, pulsar bool) int {
	var vm *replicator.VersionMismatchError
	var ur *replicator.UnknownRegionsError
	switch {
	case errors.As(err, &vm):
		return http.StatusConflict
	case errors.As(err, &ur) && pulsar:
		return http.StatusPreconditionFailed
	case errors.Is(err, replicator.ErrInvalidPolicy), errors.Is(err, protocols.ErrInvalidTopicName):
		return http.StatusBadRequest
	case errors.Is(err, replicator.ErrNotStarted):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writePolicyError(w http.ResponseWriter, err error) {
	body := map[string]any{"error": err.Error()}
	var ur *replicator.UnknownRegionsError
	if errors.As(err, &ur) {
		body["unknown_regions"], body["known_regions"] = ur.Unknown, ur.Known
	}
	var vm *replicator.VersionMismatchError
	if errors.As(err, &vm) {
		body["current_version"] = vm.Current
	}
	writeJSON(w, policyErrStatus(err, false), body)
}

// writePulsarError writes Pulsar's admin error shape.
func writePulsarError(w http.ResponseWriter, status int, reason string) {
	writeJSON(w, status, map[string]string{"reason": reason})
}

// pulsarReplicationStats is the "replication" section of Pulsar's topic stats for one log: per
// destination region, Pulsar's replicator fields (replicationBacklog, connected,
// replicationDelayInSeconds) and tern's own (state, lastError, lastTransfer).
func (n *Node) pulsarReplicationStats(p protocols.Partition) map[string]any {
	out := map[string]any{}
	eng := n.repl.engine
	if eng == nil {
		return out
	}
	for _, s := range eng.PartitionStatus(p.Topic.String(), p.Index) {
		st := map[string]any{
			"replicationBacklog":        s.LagMessages,
			"connected":                 s.State == replicator.StreamActive || s.State == replicator.StreamStalled,
			"replicationDelayInSeconds": int64(s.LagSeconds),
			"msgOutCounter":             s.SentMessages,
			"bytesOutCounter":           s.SentBytes,
			"state":                     s.State,
		}
		if s.LastError != "" {
			st["lastError"] = s.LastError
		}
		if s.LastTransfer != nil {
			st["lastTransfer"] = s.LastTransfer
		}
		out[s.Destination] = st
	}
	return out
}
