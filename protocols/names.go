package protocols

import (
	"fmt"
	"strconv"
	"strings"
)

// DomainPersistent is the only topic domain tern serves: every topic is a
// durable log.
const DomainPersistent = "persistent"

// partitionSuffix joins a partitioned topic's name and a partition index,
// as in Pulsar: orders-partition-3.
const partitionSuffix = "-partition-"

// MaxNameLength bounds each part of a topic name. Kafka allows 249 bytes for
// a topic; the same bound keeps pebble keys short.
const MaxNameLength = 249

// TopicName is a fully qualified topic: persistent://tenant/namespace/local.
// Local may name a partition of a partitioned topic (local-partition-N).
type TopicName struct {
	Tenant    string
	Namespace string
	Local     string
}

// ParseTopicName accepts the forms users type: a full name
// (persistent://t/ns/x), a tenant-qualified name (t/ns/x), or a bare local
// name (x), which is placed in defaultNamespace ("tenant/namespace"), the
// way a Kafka topic lands in the configured Kafka namespace.
func ParseTopicName(s, defaultNamespace string) (TopicName, error) {
	rest := s
	if i := strings.Index(s, "://"); i >= 0 {
		if s[:i] != DomainPersistent {
			return TopicName{}, fmt.Errorf("%w: %q: only the persistent:// domain is served", ErrInvalidTopicName, s)
		}
		rest = s[i+3:]
	}
	parts := strings.Split(rest, "/")
	var t TopicName
	switch len(parts) {
	case 1:
		if strings.Contains(s, "://") {
			return TopicName{}, fmt.Errorf("%w: %q: want persistent://tenant/namespace/topic", ErrInvalidTopicName, s)
		}
		ns, err := ParseNamespace(defaultNamespace)
		if err != nil {
			return TopicName{}, err
		}
		t = TopicName{Tenant: ns.Tenant, Namespace: ns.Namespace, Local: parts[0]}
	case 3:
		t = TopicName{Tenant: parts[0], Namespace: parts[1], Local: parts[2]}
	default:
		return TopicName{}, fmt.Errorf("%w: %q: want persistent://tenant/namespace/topic, tenant/namespace/topic or topic", ErrInvalidTopicName, s)
	}
	if err := t.Validate(); err != nil {
		return TopicName{}, err
	}
	return t, nil
}

// Validate checks every part of the name and says which part is wrong.
func (t TopicName) Validate() error {
	if err := validName("tenant", t.Tenant); err != nil {
		return err
	}
	if err := validName("namespace", t.Namespace); err != nil {
		return err
	}
	return validName("topic", t.Local)
}

// validName allows letters, digits and - . _ = : @, which covers Kafka's
// legal topic names and the names Pulsar users write.
func validName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: the %s name is empty", ErrInvalidTopicName, what)
	}
	if len(s) > MaxNameLength {
		return fmt.Errorf("%w: the %s name %.20q... is %d bytes; the limit is %d", ErrInvalidTopicName, what, s, len(s), MaxNameLength)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '=' || c == ':' || c == '@'
		if !ok {
			return fmt.Errorf("%w: the %s name %q has %q; use letters, digits and - . _ = : @", ErrInvalidTopicName, what, s, c)
		}
	}
	return nil
}

// String is the full name, persistent://tenant/namespace/local.
func (t TopicName) String() string {
	var b [96]byte
	return string(t.Append(b[:0]))
}

// Append appends t's String to b: persistent://tenant/namespace/local.
func (t TopicName) Append(b []byte) []byte {
	b = append(b, DomainPersistent+"://"...)
	b = append(b, t.Tenant...)
	b = append(b, '/')
	b = append(b, t.Namespace...)
	b = append(b, '/')
	return append(b, t.Local...)
}

// NamespaceName is the topic's namespace.
func (t TopicName) NamespaceName() NamespaceName {
	return NamespaceName{Tenant: t.Tenant, Namespace: t.Namespace}
}

// PartitionIndex splits a partition's name into its topic and index. For a
// name without the -partition-N suffix it returns the name itself and -1.
func (t TopicName) PartitionIndex() (TopicName, int) {
	i := strings.LastIndex(t.Local, partitionSuffix)
	if i <= 0 {
		return t, -1
	}
	n, err := strconv.Atoi(t.Local[i+len(partitionSuffix):])
	if err != nil || n < 0 || strconv.Itoa(n) != t.Local[i+len(partitionSuffix):] {
		return t, -1
	}
	base := t
	base.Local = t.Local[:i]
	return base, n
}

// Partition names partition i of this (partitioned) topic.
func (t TopicName) Partition(i int) TopicName {
	p := t
	p.Local = t.Local + partitionSuffix + strconv.Itoa(i)
	return p
}

// NamespaceName is tenant/namespace.
type NamespaceName struct {
	Tenant    string
	Namespace string
}

// ParseNamespace parses "tenant/namespace".
func ParseNamespace(s string) (NamespaceName, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 2 {
		return NamespaceName{}, fmt.Errorf("%w: namespace %q: want tenant/namespace", ErrInvalidTopicName, s)
	}
	ns := NamespaceName{Tenant: parts[0], Namespace: parts[1]}
	if err := validName("tenant", ns.Tenant); err != nil {
		return NamespaceName{}, err
	}
	if err := validName("namespace", ns.Namespace); err != nil {
		return NamespaceName{}, err
	}
	return ns, nil
}

// String is "tenant/namespace".
func (n NamespaceName) String() string { return n.Tenant + "/" + n.Namespace }

// TopicPrefix is the prefix every full topic name in this namespace has.
func (n NamespaceName) TopicPrefix() string {
	return DomainPersistent + "://" + n.Tenant + "/" + n.Namespace + "/"
}
