package main

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/ternmq/tern/protocols"
)

// defaultNamespace is where a bare topic name lands, as a Kafka topic does.
const defaultNamespace = "public/default"

// parseTopic reads a topic argument: persistent://tenant/ns/name, tenant/ns/name, or a bare
// name in public/default. A malformed name is a usage error saying which part is wrong.
func parseTopic(s string) (protocols.TopicName, error) {
	t, err := protocols.ParseTopicName(strings.TrimSpace(s), defaultNamespace)
	if err != nil {
		return t, usagef("topic %q: %s", s, nameProblem(s, err))
	}
	return t, nil
}

// parseNamespace reads a tenant/namespace argument.
func parseNamespace(s string) (protocols.NamespaceName, error) {
	ns, err := protocols.ParseNamespace(strings.TrimSpace(s))
	if err != nil {
		return ns, usagef("namespace %q: %s", s, nameProblem(s, err))
	}
	return ns, nil
}

// nameProblem is what is wrong with a name, without the sentinel's wording and without
// repeating the name the message already quotes.
func nameProblem(s string, err error) string {
	msg := strings.TrimPrefix(plainMessage(err.Error()), "invalid topic name: ")
	msg = strings.TrimPrefix(msg, strconv.Quote(s)+": ")
	msg = strings.TrimPrefix(msg, "namespace "+strconv.Quote(s)+": ")
	return msg
}

// target is what a replication policy applies to: a namespace or a topic.
type target struct {
	ns    protocols.NamespaceName
	topic protocols.TopicName
	isNS  bool
}

// parseTarget reads a policy target: tenant/namespace (one slash) is a namespace; anything
// else is a topic (persistent://t/ns/x, t/ns/x, or a bare name in public/default).
func parseTarget(s string) (target, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") && strings.Count(s, "/") == 1 {
		ns, err := parseNamespace(s)
		return target{ns: ns, isNS: true}, err
	}
	t, err := parseTopic(s)
	if err != nil {
		return target{}, err
	}
	if base, i := t.PartitionIndex(); i >= 0 {
		return target{}, usagef("%s is partition %d of %s: a policy applies to a whole topic, so name %s", t, i, base, base)
	}
	return target{topic: t, ns: t.NamespaceName()}, nil
}

// String names the target the way the output shows it.
func (t target) String() string {
	if t.isNS {
		return "namespace " + t.ns.String()
	}
	return "topic " + t.topic.String()
}

// query is the target as the policy API's query parameters.
func (t target) query() string {
	if t.isNS {
		return "namespace=" + url.QueryEscape(t.ns.String())
	}
	return "topic=" + url.QueryEscape(t.topic.String())
}

// body adds the target to a policy request body.
func (t target) body(m map[string]any) map[string]any {
	if t.isNS {
		m["namespace"] = t.ns.String()
	} else {
		m["topic"] = t.topic.String()
	}
	return m
}

// covers reports whether a full topic name falls under the target.
func (t target) covers(topic string) bool {
	if t.isNS {
		return strings.HasPrefix(topic, t.ns.TopicPrefix())
	}
	return topic == t.topic.String()
}

// topicPath is a topic's path under /api/v1/topics.
func topicPath(t protocols.TopicName) string {
	return "/api/v1/topics/" + url.PathEscape(t.Tenant) + "/" + url.PathEscape(t.Namespace) + "/" + url.PathEscape(t.Local)
}

// nsPath is a namespace's Pulsar admin path.
func nsPath(ns protocols.NamespaceName) string {
	return "/admin/v2/namespaces/" + url.PathEscape(ns.Tenant) + "/" + url.PathEscape(ns.Namespace)
}

// short drops the persistent:// prefix for tables, where every topic has it.
func short(topic string) string { return strings.TrimPrefix(topic, protocols.DomainPersistent+"://") }
