package websocket

import (
	"net/http"
	"strings"

	"github.com/ternmq/tern/protocols"
)

// AuthFunc decides whether a session may open. token is the bearer token
// the client brought, from the Authorization header ("Bearer <token>") or
// the token query parameter (browsers cannot set headers on a WebSocket),
// empty if none. It returns nil to let the session in, an error wrapping
// ErrUnauthenticated (HTTP 401) or ErrForbidden (HTTP 403) to refuse it;
// any other error refuses it with 500.
type AuthFunc func(r *http.Request, token string, a Access) error

// Access is what a session asks to do.
type Access struct {
	// Action is "produce", "consume" or "read".
	Action string
	// Topic is the topic the session names.
	Topic protocols.TopicName
	// Subscription is the consumer's subscription, empty otherwise.
	Subscription string
}

// requestToken finds the client's token as Pulsar's WebSocket service does:
// the token query parameter wins (with or without a "Bearer " prefix), then
// an Authorization: Bearer header.
func requestToken(r *http.Request) string {
	if t := r.URL.Query().Get("token"); t != "" {
		return strings.TrimPrefix(t, "Bearer ")
	}
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// loggedURL is the request URL without its token, for logs.
func loggedURL(r *http.Request) string {
	u := *r.URL
	if q := u.Query(); q.Has("token") {
		q.Set("token", "redacted")
		u.RawQuery = q.Encode()
	}
	return u.RequestURI()
}
