package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ternmq/tern/protocols"
)

// The Pulsar admin REST API (v2) on the node's HTTP port: the paths, JSON
// shapes and status codes pulsar-admin, pulsarctl and the Go client's
// pulsaradmin package use, for what tern has:
//
//	/admin/v2/clusters                                   GET
//	/admin/v2/tenants[/{tenant}]                         GET PUT POST DELETE
//	/admin/v2/namespaces/{tenant}[/{ns}]                 GET PUT DELETE
//	/admin/v2/namespaces/{tenant}/{ns}/topics            GET
//	/admin/v2/namespaces/{tenant}/{ns}/{policy}          GET POST DELETE
//	    retention, messageTTL, deduplication, backlogQuota(Map)
//	/admin/v2/persistent/{tenant}/{ns}[/partitioned]     GET
//	/admin/v2/persistent/{tenant}/{ns}/{topic}           PUT DELETE
//	    /partitions                                      GET PUT POST DELETE
//	    /stats /partitioned-stats /internalStats          GET
//	    /lastMessageId                                   GET
//	    /subscriptions                                   GET
//	    /subscription/{sub}                              PUT DELETE
//	    /subscription/{sub}/skip/{n} /skip_all           POST
//	    /subscription/{sub}/resetcursor[/{timestamp}]     POST
//	/admin/v2/schemas/{tenant}/{ns}/{topic}/schema[/{v}]  GET POST DELETE
//	/lookup/v2/topic/persistent/{tenant}/{ns}/{topic}    GET
//
// Errors are Pulsar's {"reason": "..."} with its status codes: 404 for what
// does not exist, 409 for what exists or is not empty or conflicts, 412
// when consumers are attached, 400 for bad input.

// adminRoutes registers the admin REST API.
func (n *Node) adminRoutes() {
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request) error) {
		n.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := f(w, r); err != nil {
				writeAdminError(w, err)
			}
		}))
	}
	n.tenantRoutes(h)
	n.topicRoutes(h)
	n.subscriptionRoutes(h)
	n.schemaRoutes(h)
}

type routeFunc = func(pattern string, f func(w http.ResponseWriter, r *http.Request) error)

// httpError is an error with the status the admin API answers.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// adminStatus maps an error to its HTTP status.
func adminStatus(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.Is(err, ErrTenantNotFound), errors.Is(err, protocols.ErrNamespaceNotFound),
		errors.Is(err, protocols.ErrTopicNotFound), errors.Is(err, protocols.ErrPartitionNotFound),
		errors.Is(err, protocols.ErrSubscriptionNotFound), errors.Is(err, protocols.ErrSchemaNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrTenantExists), errors.Is(err, ErrNamespaceExists), errors.Is(err, protocols.ErrTopicExists),
		errors.Is(err, ErrTenantNotEmpty), errors.Is(err, ErrNamespaceNotEmpty),
		errors.Is(err, protocols.ErrIncompatibleSchema), errors.Is(err, protocols.ErrInvalidSchema):
		return http.StatusConflict
	case errors.Is(err, protocols.ErrConsumerBusy):
		return http.StatusPreconditionFailed
	case errors.Is(err, protocols.ErrInvalidTopicName), errors.Is(err, protocols.ErrInvalidConfig),
		errors.Is(err, protocols.ErrInvalidPartitions), errors.Is(err, protocols.ErrInvalidSubscription):
		return http.StatusBadRequest
	case errors.Is(err, protocols.ErrNotReady), errors.Is(err, protocols.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeAdminError(w http.ResponseWriter, err error) {
	writeJSON(w, adminStatus(err), map[string]string{"reason": err.Error()})
}

// noContent answers a successful change.
func noContent(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func okJSON(w http.ResponseWriter, v any) error {
	writeJSON(w, http.StatusOK, v)
	return nil
}

// readJSON decodes a request body into v; an empty body leaves v as is.
func readJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return badRequest("reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return badRequest("the request body is not valid JSON for this call: %v", err)
	}
	return nil
}

// pathNamespace reads {tenant}/{ns} from the path.
func pathNamespace(r *http.Request) (protocols.NamespaceName, error) {
	ns, err := protocols.ParseNamespace(r.PathValue("tenant") + "/" + r.PathValue("ns"))
	if err != nil {
		return ns, err
	}
	return ns, nil
}

// pathTopic reads {tenant}/{ns}/{topic} from the path (the topic part may
// be URL-encoded).
func pathTopic(r *http.Request) (protocols.TopicName, error) {
	local, err := url.PathUnescape(r.PathValue("topic"))
	if err != nil {
		return protocols.TopicName{}, badRequest("topic %q is not URL-encoded correctly", r.PathValue("topic"))
	}
	t := protocols.TopicName{Tenant: r.PathValue("tenant"), Namespace: r.PathValue("ns"), Local: local}
	return t, t.Validate()
}

// queryBool reads a boolean query parameter.
func queryBool(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}
