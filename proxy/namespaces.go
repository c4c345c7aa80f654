package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ternmq/tern/protocols"
)

// Tenants and namespaces are metadata records:
//
//	tenant/<tenant>               TenantInfo
//	namespace/<tenant>/<ns>       Policies
//
// Topics live in namespaces; namespace policies are the defaults their
// topics inherit (topic overrides > namespace policies > node defaults).

// TenantInfo is a tenant, in Pulsar's admin JSON shape.
type TenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`
}

// Policies are a namespace's settings. Absent (nil or empty) fields
// inherit the node defaults.
type Policies struct {
	// Retention bounds each partition's log (Pulsar's RetentionPolicies
	// shape: minutes and megabytes, -1 for unbounded).
	Retention *RetentionPolicy `json:"retention_policies,omitempty"`
	// MessageTTLSeconds expires unacknowledged messages (0 or nil: never).
	MessageTTLSeconds *int64 `json:"message_ttl_in_seconds,omitempty"`
	// Deduplication enables Pulsar producer deduplication.
	Deduplication *bool `json:"deduplicationEnabled,omitempty"`
	// Durability is "sync" or "async"; empty inherits the node default.
	Durability string `json:"durability,omitempty"`
	// BacklogQuotas are Pulsar's backlog quotas by type
	// ("destination_storage", "message_age"). They are stored and reported;
	// the node does not enforce them yet.
	BacklogQuotas map[string]BacklogQuota `json:"backlog_quota_map,omitempty"`
}

// BacklogQuota is Pulsar's backlog quota shape.
type BacklogQuota struct {
	// LimitSize is the backlog size limit in bytes (-1: none).
	LimitSize int64 `json:"limitSize"`
	// LimitTime is the backlog age limit in seconds (-1: none).
	LimitTime int64 `json:"limitTime"`
	// Policy is producer_request_hold, producer_exception or
	// consumer_backlog_eviction.
	Policy string `json:"policy"`
}

// RetentionPolicy is Pulsar's retention shape.
type RetentionPolicy struct {
	RetentionTimeInMinutes int64 `json:"retentionTimeInMinutes"`
	RetentionSizeInMB      int64 `json:"retentionSizeInMB"`
}

func tenantMetaKey(t string) string { return "tenant/" + t }
func nsMetaKey(ns protocols.NamespaceName) string {
	return "namespace/" + ns.Tenant + "/" + ns.Namespace
}

// CreateTenant adds a tenant.
func (n *Node) CreateTenant(ctx context.Context, name string, info TenantInfo) error {
	if _, err := protocols.ParseNamespace(name + "/x"); err != nil {
		return err
	}
	n.nsMu.Lock()
	defer n.nsMu.Unlock()
	if _, ok, err := n.store.GetMeta(tenantMetaKey(name)); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%w: %s", ErrTenantExists, name)
	}
	return n.putJSON(tenantMetaKey(name), info)
}

// UpdateTenant replaces a tenant's info.
func (n *Node) UpdateTenant(ctx context.Context, name string, info TenantInfo) error {
	n.nsMu.Lock()
	defer n.nsMu.Unlock()
	if _, ok, err := n.store.GetMeta(tenantMetaKey(name)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %s", ErrTenantNotFound, name)
	}
	return n.putJSON(tenantMetaKey(name), info)
}

// Tenant returns a tenant's info.
func (n *Node) Tenant(ctx context.Context, name string) (TenantInfo, error) {
	var info TenantInfo
	ok, err := n.getJSON(tenantMetaKey(name), &info)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %s", ErrTenantNotFound, name)
	}
	return info, err
}

// Tenants lists tenant names.
func (n *Node) Tenants(ctx context.Context) ([]string, error) {
	var out []string
	err := n.store.ScanMeta(ctx, "tenant/", func(name string, _ []byte) error {
		out = append(out, strings.TrimPrefix(name, "tenant/"))
		return nil
	})
	return out, err
}

// DeleteTenant removes an empty tenant.
func (n *Node) DeleteTenant(ctx context.Context, name string) error {
	n.nsMu.Lock()
	defer n.nsMu.Unlock()
	if _, ok, err := n.store.GetMeta(tenantMetaKey(name)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %s", ErrTenantNotFound, name)
	}
	nss, err := n.Namespaces(ctx, name)
	if err != nil {
		return err
	}
	if len(nss) > 0 {
		return fmt.Errorf("%w: %s has %d namespaces; delete them first", ErrTenantNotEmpty, name, len(nss))
	}
	return n.store.DeleteMeta(tenantMetaKey(name))
}

// CreateNamespace adds a namespace to an existing tenant.
func (n *Node) CreateNamespace(ctx context.Context, ns protocols.NamespaceName, p Policies) error {
	n.nsMu.Lock()
	defer n.nsMu.Unlock()
	return n.createNamespaceLocked(ns, p)
}

func (n *Node) createNamespaceLocked(ns protocols.NamespaceName, p Policies) error {
	if _, ok, err := n.store.GetMeta(tenantMetaKey(ns.Tenant)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %s (create the tenant first)", ErrTenantNotFound, ns.Tenant)
	}
	if _, ok, err := n.store.GetMeta(nsMetaKey(ns)); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%w: %s", ErrNamespaceExists, ns)
	}
	if err := p.validate(); err != nil {
		return err
	}
	return n.putJSON(nsMetaKey(ns), p)
}

// Namespaces lists a tenant's namespaces as tenant/namespace.
func (n *Node) Namespaces(ctx context.Context, tenant string) ([]string, error) {
	var out []string
	prefix := "namespace/" + tenant + "/"
	err := n.store.ScanMeta(ctx, prefix, func(name string, _ []byte) error {
		out = append(out, tenant+"/"+strings.TrimPrefix(name, prefix))
		return nil
	})
	return out, err
}

// NamespacePolicies returns a namespace's policies, or
// protocols.ErrNamespaceNotFound.
func (n *Node) NamespacePolicies(ctx context.Context, ns protocols.NamespaceName) (Policies, error) {
	var p Policies
	ok, err := n.getJSON(nsMetaKey(ns), &p)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %s", protocols.ErrNamespaceNotFound, ns)
	}
	return p, err
}

// UpdateNamespacePolicies changes a namespace's policies with f, atomically
// with respect to other updates.
func (n *Node) UpdateNamespacePolicies(ctx context.Context, ns protocols.NamespaceName, f func(*Policies) error) error {
	n.nsMu.Lock()
	defer n.nsMu.Unlock()
	p, err := n.NamespacePolicies(ctx, ns)
	if err != nil {
		return err
	}
	if err := f(&p); err != nil {
		return err
	}
	if err := p.validate(); err != nil {
		return err
	}
	if err := n.putJSON(nsMetaKey(ns), p); err != nil {
		return err
	}
	n.invalidateTopics()
	return nil
}

// DeleteNamespace removes a namespace with no topics.
func (n *Node) DeleteNamespace(ctx context.Context, ns protocols.NamespaceName) error {
	n.nsMu.Lock()
	defer n.nsMu.Unlock()
	if _, err := n.NamespacePolicies(ctx, ns); err != nil {
		return err
	}
	if ts := n.store.Topics(ns.TopicPrefix()); len(ts) > 0 {
		return fmt.Errorf("%w: %s has %d topics; delete them first", ErrNamespaceNotEmpty, ns, len(ts))
	}
	return n.store.DeleteMeta(nsMetaKey(ns))
}

// ensureNamespace creates a tenant and namespace if missing (the default
// namespaces exist on every node).
func (n *Node) ensureNamespace(ns protocols.NamespaceName) error {
	n.nsMu.Lock()
	defer n.nsMu.Unlock()
	if _, ok, err := n.store.GetMeta(tenantMetaKey(ns.Tenant)); err != nil {
		return err
	} else if !ok {
		if err := n.putJSON(tenantMetaKey(ns.Tenant), TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{n.cfg.Node.Region}}); err != nil {
			return err
		}
	}
	if _, ok, err := n.store.GetMeta(nsMetaKey(ns)); err != nil || ok {
		return err
	}
	return n.putJSON(nsMetaKey(ns), Policies{})
}

func (p *Policies) validate() error {
	if p.Durability != "" && p.Durability != "sync" && p.Durability != "async" {
		return fmt.Errorf("%w: durability %q: want sync or async", protocols.ErrInvalidConfig, p.Durability)
	}
	if r := p.Retention; r != nil && (r.RetentionTimeInMinutes < -1 || r.RetentionSizeInMB < -1) {
		return fmt.Errorf("%w: retention %+v: use -1 for unbounded or a positive value", protocols.ErrInvalidConfig, *r)
	}
	for typ, q := range p.BacklogQuotas {
		if typ != "destination_storage" && typ != "message_age" {
			return fmt.Errorf("%w: backlog quota type %q: want destination_storage or message_age", protocols.ErrInvalidConfig, typ)
		}
		switch q.Policy {
		case "producer_request_hold", "producer_exception", "consumer_backlog_eviction":
		default:
			return fmt.Errorf("%w: backlog quota policy %q: want producer_request_hold, producer_exception or consumer_backlog_eviction", protocols.ErrInvalidConfig, q.Policy)
		}
	}
	if p.MessageTTLSeconds != nil && *p.MessageTTLSeconds < 0 {
		return fmt.Errorf("%w: message TTL %d: want 0 or more seconds", protocols.ErrInvalidConfig, *p.MessageTTLSeconds)
	}
	return nil
}

func (n *Node) putJSON(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return n.store.PutMeta(key, b)
}

func (n *Node) getJSON(key string, v any) (bool, error) {
	b, ok, err := n.store.GetMeta(key)
	if err != nil || !ok {
		return ok, err
	}
	return true, json.Unmarshal(b, v)
}
