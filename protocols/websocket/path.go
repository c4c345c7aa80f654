package websocket

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ternmq/tern/protocols"
)

// The paths served, as Pulsar's WebSocket API v2 has them:
//
//	/ws/v2/producer/persistent/{tenant}/{namespace}/{topic}
//	/ws/v2/consumer/persistent/{tenant}/{namespace}/{topic}/{subscription}
//	/ws/v2/reader/persistent/{tenant}/{namespace}/{topic}
//	/ws/v2/pingpong and /ws/pingpong
//
// Each segment is URL-decoded on its own, so an escaped "/" stays inside its
// segment (and then fails the topic name check, since tern's names have
// none). The topic may name one partition of a partitioned topic
// (orders-partition-3). v1 paths, which carry a cluster in the namespace,
// the non-persistent domain and the v3 multi-topic consumer are refused
// with 400 and a reason; any other path under /ws/ is 404.

// endpoint is what a path asks for.
type endpoint int8

const (
	epProducer endpoint = iota
	epConsumer
	epReader
	epPingPong
)

func (e endpoint) String() string {
	switch e {
	case epProducer:
		return "producer"
	case epConsumer:
		return "consumer"
	case epReader:
		return "reader"
	}
	return "pingpong"
}

// target is a parsed path.
type target struct {
	kind         endpoint
	topic        protocols.TopicName
	subscription string
}

// maxSubscriptionName bounds a subscription name from a path.
const maxSubscriptionName = 1024

// parsePath parses an escaped request path.
func parsePath(escaped string) (target, error) {
	raw := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		v, err := url.PathUnescape(s)
		if err != nil {
			return target{}, &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf("Invalid topic name format: path segment %q is not URL-encoded correctly", s)}
		}
		segs[i] = v
	}
	if len(segs) < 2 || segs[0] != "ws" {
		return target{}, notFound(escaped)
	}
	if segs[1] == "pingpong" && len(segs) == 2 || segs[1] == "v2" && len(segs) == 3 && segs[2] == "pingpong" {
		return target{kind: epPingPong}, nil
	}
	switch segs[1] {
	case "v2":
	case "producer", "consumer", "reader":
		return target{}, &httpError{status: http.StatusBadRequest,
			msg: "Invalid topic name format: v1 paths (/ws/" + segs[1] + "/persistent/tenant/cluster/namespace/...) name a cluster, which tern namespaces do not have; use /ws/v2/" + segs[1] + "/persistent/tenant/namespace/topic"}
	case "v3":
		return target{}, &httpError{status: http.StatusBadRequest,
			msg: "multi-topic consumers (/ws/v3/consumer) are not supported; open one /ws/v2/consumer session per topic"}
	default:
		return target{}, notFound(escaped)
	}
	if len(segs) < 3 {
		return target{}, notFound(escaped)
	}
	var t target
	want := 7
	switch segs[2] {
	case "producer":
		t.kind = epProducer
	case "reader":
		t.kind = epReader
	case "consumer":
		t.kind = epConsumer
		want = 8
	default:
		return target{}, notFound(escaped)
	}
	form := "/ws/v2/" + segs[2] + "/persistent/{tenant}/{namespace}/{topic}"
	if t.kind == epConsumer {
		form += "/{subscription}"
	}
	if len(segs) != want {
		return target{}, &httpError{status: http.StatusBadRequest,
			msg: fmt.Sprintf("Invalid topic name format: %s has %d segments; want %s", escaped, len(segs)-1, form)}
	}
	switch segs[3] {
	case protocols.DomainPersistent:
	case "non-persistent":
		return target{}, &httpError{status: http.StatusBadRequest,
			msg: "non-persistent topics are not served: every tern topic is a durable log; use " + form}
	default:
		return target{}, &httpError{status: http.StatusBadRequest,
			msg: fmt.Sprintf("Invalid topic name format: domain %q; want %s", segs[3], form)}
	}
	t.topic = protocols.TopicName{Tenant: segs[4], Namespace: segs[5], Local: segs[6]}
	if err := t.topic.Validate(); err != nil {
		return target{}, &httpError{status: http.StatusBadRequest, msg: "Invalid topic name format: " + err.Error()}
	}
	if t.kind == epConsumer {
		t.subscription = segs[7]
		switch {
		case t.subscription == "":
			return target{}, &httpError{status: http.StatusBadRequest, msg: "Invalid topic name format: empty subscription name; want " + form}
		case len(t.subscription) > maxSubscriptionName:
			return target{}, &httpError{status: http.StatusBadRequest,
				msg: fmt.Sprintf("the subscription name is %d bytes; the limit is %d", len(t.subscription), maxSubscriptionName)}
		}
	}
	return t, nil
}

func notFound(p string) error {
	return &httpError{status: http.StatusNotFound,
		msg: fmt.Sprintf("no WebSocket endpoint at %s; the endpoints are /ws/v2/producer/persistent/{tenant}/{namespace}/{topic}, "+
			"/ws/v2/consumer/persistent/{tenant}/{namespace}/{topic}/{subscription}, /ws/v2/reader/persistent/{tenant}/{namespace}/{topic} and /ws/v2/pingpong",
			clip(p, 100))}
}

// clip shortens s for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
