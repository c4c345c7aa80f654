package proxy

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/ternmq/tern/protocols"
)

// Admin REST: clusters, tenants, namespaces and namespace policies.

func (n *Node) tenantRoutes(h routeFunc) {
	h("GET /admin/v2/clusters", func(w http.ResponseWriter, r *http.Request) error {
		return okJSON(w, []string{n.cfg.Node.Region})
	})
	h("GET /admin/v2/tenants", func(w http.ResponseWriter, r *http.Request) error {
		ts, err := n.Tenants(r.Context())
		if err != nil {
			return err
		}
		return okJSON(w, nonNil(ts))
	})
	h("GET /admin/v2/tenants/{tenant}", func(w http.ResponseWriter, r *http.Request) error {
		info, err := n.Tenant(r.Context(), r.PathValue("tenant"))
		if err != nil {
			return err
		}
		return okJSON(w, info)
	})
	h("PUT /admin/v2/tenants/{tenant}", func(w http.ResponseWriter, r *http.Request) error {
		info := TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{n.cfg.Node.Region}}
		if err := readJSON(r, &info); err != nil {
			return err
		}
		if err := n.CreateTenant(r.Context(), r.PathValue("tenant"), info); err != nil {
			return err
		}
		return noContent(w)
	})
	h("POST /admin/v2/tenants/{tenant}", func(w http.ResponseWriter, r *http.Request) error {
		var info TenantInfo
		if err := readJSON(r, &info); err != nil {
			return err
		}
		if err := n.UpdateTenant(r.Context(), r.PathValue("tenant"), info); err != nil {
			return err
		}
		return noContent(w)
	})
	h("DELETE /admin/v2/tenants/{tenant}", func(w http.ResponseWriter, r *http.Request) error {
		if err := n.DeleteTenant(r.Context(), r.PathValue("tenant")); err != nil {
			return err
		}
		return noContent(w)
	})

	h("GET /admin/v2/namespaces/{tenant}", func(w http.ResponseWriter, r *http.Request) error {
		if _, err := n.Tenant(r.Context(), r.PathValue("tenant")); err != nil {
			return err
		}
		nss, err := n.Namespaces(r.Context(), r.PathValue("tenant"))
		if err != nil {
			return err
		}
		return okJSON(w, nonNil(nss))
	})
	h("PUT /admin/v2/namespaces/{tenant}/{ns}", func(w http.ResponseWriter, r *http.Request) error {
		ns, err := pathNamespace(r)
		if err != nil {
			return err
		}
		var p Policies
		if err := readJSON(r, &p); err != nil {
			return err
		}
		if err := n.CreateNamespace(r.Context(), ns, p); err != nil {
			return err
		}
		return noContent(w)
	})
	h("GET /admin/v2/namespaces/{tenant}/{ns}", func(w http.ResponseWriter, r *http.Request) error {
		ns, err := pathNamespace(r)
		if err != nil {
			return err
		}
		p, err := n.NamespacePolicies(r.Context(), ns)
		if err != nil {
			return err
		}
		return okJSON(w, p)
	})
	h("DELETE /admin/v2/namespaces/{tenant}/{ns}", func(w http.ResponseWriter, r *http.Request) error {
		ns, err := pathNamespace(r)
		if err != nil {
			return err
		}
		if err := n.DeleteNamespace(r.Context(), ns); err != nil {
			return err
		}
		return noContent(w)
	})
	h("GET /admin/v2/namespaces/{tenant}/{ns}/topics", func(w http.ResponseWriter, r *http.Request) error {
		ns, err := pathNamespace(r)
		if err != nil {
			return err
		}
		if _, err := n.NamespacePolicies(r.Context(), ns); err != nil {
			return err
		}
		names, err := n.topicNames(r, ns, false)
		if err != nil {
			return err
		}
		return okJSON(w, names)
	})
	n.policyRoutes(h)
}

// nsPolicy is one namespace policy's admin routes: GET gives it, POST sets
// it from the request, DELETE clears it; a nil function has no route.
type nsPolicy struct {
	name  string
	get   func(p *Policies) any
	set   func(r *http.Request, p *Policies) error
	clear func(r *http.Request, p *Policies) error
}

// valuePolicy is a policy held as one optional value: GET gives it, or
// unset while it has none; POST sets it from the JSON body; DELETE clears
// it.
func valuePolicy[T any](name string, field func(*Policies) **T, unset any) nsPolicy {
	return nsPolicy{
		name: name,
		get: func(p *Policies) any {
			if v := *field(p); v != nil {
				return v
			}
			return unset
		},
		set: func(r *http.Request, p *Policies) error {
			var v T
			if err := readJSON(r, &v); err != nil {
				return err
			}
			*field(p) = &v
			return nil
		},
		clear: func(_ *http.Request, p *Policies) error { *field(p) = nil; return nil },
	}
}

// policyRoutes serves the namespace policies tern honours or stores.
func (n *Node) policyRoutes(h routeFunc) {
	policies := []nsPolicy{
		valuePolicy("retention", func(p *Policies) **RetentionPolicy { return &p.Retention }, map[string]any{}),
		valuePolicy("messageTTL", func(p *Policies) **int64 { return &p.MessageTTLSeconds }, nil),
		valuePolicy("deduplication", func(p *Policies) **bool { return &p.Deduplication }, nil),
		{
			name: "backlogQuota",
			set: func(r *http.Request, p *Policies) error {
				var q BacklogQuota
				if err := readJSON(r, &q); err != nil {
					return err
				}
				if p.BacklogQuotas == nil {
					p.BacklogQuotas = map[string]BacklogQuota{}
				}
				p.BacklogQuotas[quotaType(r)] = q
				return nil
			},
			clear: func(r *http.Request, p *Policies) error { delete(p.BacklogQuotas, quotaType(r)); return nil },
		},
		{
			name: "backlogQuotaMap",
			get: func(p *Policies) any {
				if p.BacklogQuotas == nil {
					return map[string]BacklogQuota{}
				}
				return p.BacklogQuotas
			},
		},
	}
	for _, pol := range policies {
		path := "/admin/v2/namespaces/{tenant}/{ns}/" + pol.name
		if pol.get != nil {
			h("GET "+path, func(w http.ResponseWriter, r *http.Request) error {
				ns, err := pathNamespace(r)
				if err != nil {
					return err
				}
				p, err := n.NamespacePolicies(r.Context(), ns)
				if err != nil {
					return err
				}
				return okJSON(w, pol.get(&p))
			})
		}
		for method, f := range map[string]func(*http.Request, *Policies) error{"POST": pol.set, "DELETE": pol.clear} {
			if f == nil {
				continue
			}
			h(method+" "+path, func(w http.ResponseWriter, r *http.Request) error {
				ns, err := pathNamespace(r)
				if err != nil {
					return err
				}
				err = n.UpdateNamespacePolicies(r.Context(), ns, func(p *Policies) error { return f(r, p) })
				if err != nil {
					return err
				}
				return noContent(w)
			})
		}
	}
}

func quotaType(r *http.Request) string {
	if t := r.URL.Query().Get("backlogQuotaType"); t != "" {
		return t
	}
	return "destination_storage"
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// topicNames lists a namespace's topics as Pulsar does: non-partitioned
// topics and the partitions of partitioned ones, or with partitioned set
// only the partitioned topics themselves.
func (n *Node) topicNames(r *http.Request, ns protocols.NamespaceName, partitioned bool) ([]string, error) {
	topics, err := n.ListTopics(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, t := range topics {
		if partitioned {
			if t.Partitions > 0 {
				out = append(out, t.Name.String())
			}
			continue
		}
		for _, p := range t.Logs() {
			out = append(out, p.Name().String())
		}
	}
	slices.Sort(out)
	return out, nil
}

// errNotPartitioned reports a partitions call on a non-partitioned topic.
func errNotPartitioned(t protocols.TopicName) error {
	return &httpError{status: http.StatusConflict, msg: fmt.Sprintf("%s is not a partitioned topic", t)}
}
