package proxy

// Namespace durability in the style of Pulsar's namespace policy endpoints, so scripts that set
// retention or messageTTL the Pulsar way can set it the same way:
//
//	GET    /admin/v2/namespaces/{tenant}/{ns}/durability    "sync", "async", or null (node default)
//	POST   /admin/v2/namespaces/{tenant}/{ns}/durability    body "sync" or "async"
//	DELETE /admin/v2/namespaces/{tenant}/{ns}/durability    back to the node default
//
// Pulsar has no such policy (its persistence policy sizes BookKeeper ensembles, which tern does
// not have): durability is tern's choice between an fsync before every acknowledgement and an
// fsync on an interval (DESIGN §3).

import (
	"net/http"
)

func (n *Node) durabilityRoutes(h routeFunc) {
	const path = "/admin/v2/namespaces/{tenant}/{ns}/durability"
	h("GET "+path, func(w http.ResponseWriter, r *http.Request) error {
		ns, err := pathNamespace(r)
		if err != nil {
			return err
		}
		p, err := n.NamespacePolicies(r.Context(), ns)
		if err != nil {
			return err
		}
		if p.Durability == "" {
			return okJSON(w, nil)
		}
		return okJSON(w, p.Durability)
	})
	h("POST "+path, func(w http.ResponseWriter, r *http.Request) error {
		ns, err := pathNamespace(r)
		if err != nil {
			return err
		}
		var v string
		if err := readJSON(r, &v); err != nil {
			return err
		}
		if v != "sync" && v != "async" {
			return badRequest(`durability %q: send "sync" (fsync before each acknowledgement) or "async" (acknowledgement before the fsync)`, v)
		}
		if err := n.UpdateNamespacePolicies(r.Context(), ns, func(p *Policies) error { p.Durability = v; return nil }); err != nil {
			return err
		}
		return noContent(w)
	})
	h("DELETE "+path, func(w http.ResponseWriter, r *http.Request) error {
		ns, err := pathNamespace(r)
		if err != nil {
			return err
		}
		if err := n.UpdateNamespacePolicies(r.Context(), ns, func(p *Policies) error { p.Durability = ""; return nil }); err != nil {
			return err
		}
		return noContent(w)
	})
}
