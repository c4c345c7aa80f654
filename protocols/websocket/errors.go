package websocket

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/coder/websocket"

	"github.com/ternmq/tern/protocols"
)

// Errors an AuthFunc returns to refuse a session.
var (
	// ErrUnauthenticated refuses a session whose token is missing or
	// invalid: HTTP 401.
	ErrUnauthenticated = errors.New("websocket: authentication failed")
	// ErrForbidden refuses a session the token does not allow: HTTP 403.
	ErrForbidden = errors.New("websocket: not authorized")
	// ErrClosed is what a session ends with when the server shuts down.
	ErrClosed = errors.New("websocket: server closed")
)

// CloseCode is one of Pulsar's WebSocket error codes as tern sends it in a
// close frame.
//
// Pulsar numbers its errors 1 to 8. RFC 6455 reserves close codes below
// 1000: no endpoint may send them, Pulsar's own Jetty server refuses to
// (its close then fails and the client sees an abnormal closure), and
// browsers and Go's WebSocket libraries reject a frame carrying one. tern
// therefore sends Pulsar's code n as 4000+n, in the range RFC 6455 leaves to
// applications, with Pulsar's description and the cause as the reason:
// code 4003 "Failed to de-serialize from JSON: ..." is Pulsar's error 3. A
// client recovers Pulsar's number as code-4000 (PulsarCode).
type CloseCode = websocket.StatusCode

// closeBase is added to Pulsar's error numbers.
const closeBase = 4000

// Pulsar's WebSocket errors, as sent.
const (
	CloseFailedToCreateProducer      CloseCode = closeBase + 1
	CloseFailedToSubscribe           CloseCode = closeBase + 2
	CloseFailedToDeserializeFromJSON CloseCode = closeBase + 3
	CloseFailedToSerializeToJSON     CloseCode = closeBase + 4
	CloseAuthenticationError         CloseCode = closeBase + 5
	CloseNotAuthorized               CloseCode = closeBase + 6
	ClosePayloadEncodingError        CloseCode = closeBase + 7
	CloseUnknownError                CloseCode = closeBase + 8
)

// PulsarCode is the Pulsar error number (1 to 8) a close code carries, or
// 0 for a standard WebSocket code.
func PulsarCode(c CloseCode) int {
	if c > closeBase && c <= CloseUnknownError {
		return int(c - closeBase)
	}
	return 0
}

// errorDescriptions are Pulsar's texts for its error numbers.
var errorDescriptions = [...]string{
	1: "Failed to create producer",
	2: "Failed to subscribe",
	3: "Failed to de-serialize from JSON",
	4: "Failed to serialize to JSON",
	5: "Failed to authenticate client",
	6: "Client is not authorized",
	7: "Invalid payload encoding",
	8: "Unknown error",
}

// Describe is Pulsar's text for a close code or send-error number.
func Describe(c CloseCode) string {
	if n := PulsarCode(c); n > 0 {
		return errorDescriptions[n]
	}
	return c.String()
}

// closeReason builds a close reason: Pulsar's description and the cause,
// cut to the 123 bytes a close frame can carry.
func closeReason(c CloseCode, cause string) string {
	r := Describe(c)
	if cause != "" {
		r += ": " + cause
	}
	return clipReason(r)
}

// clipReason cuts a reason to a close frame's 123 bytes without splitting
// a UTF-8 sequence.
func clipReason(r string) string {
	const max = 123
	if len(r) <= max {
		return r
	}
	cut := max - 3
	for cut > 0 && r[cut]&0xC0 == 0x80 {
		cut--
	}
	return r[:cut] + "..."
}

// sendError is the "result" of a failed produce: "send-error:<n>".
func sendError(c CloseCode) string { return "send-error:" + strconv.Itoa(PulsarCode(c)) }

// httpError is a refusal at upgrade time: the status and a message saying
// what to change.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, msg: "Invalid query params: " + fmt.Sprintf(format, args...)}
}

// upgradeStatus maps a failure to set a session up to the HTTP status
// Pulsar's WebSocket service answers with, and the message.
func upgradeStatus(err error, what string) (int, string) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status, he.msg
	}
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized, "Failed to authenticate: " + err.Error()
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden, "Not authorized: " + err.Error()
	case errors.Is(err, protocols.ErrInvalidTopicName), errors.Is(err, protocols.ErrInvalidSubscription),
		errors.Is(err, protocols.ErrInvalidConfig):
		return http.StatusBadRequest, "Invalid query params: " + err.Error()
	case errors.Is(err, protocols.ErrTopicNotFound), errors.Is(err, protocols.ErrPartitionNotFound),
		errors.Is(err, protocols.ErrNamespaceNotFound):
		status = http.StatusNotFound
	case errors.Is(err, protocols.ErrProducerBusy), errors.Is(err, protocols.ErrProducerFenced),
		errors.Is(err, protocols.ErrConsumerBusy), errors.Is(err, protocols.ErrConsumerAssign),
		errors.Is(err, protocols.ErrIncompatibleSchema):
		status = http.StatusConflict
	case errors.Is(err, protocols.ErrNotReady), errors.Is(err, protocols.ErrClosed), errors.Is(err, ErrClosed),
		errors.Is(err, protocols.ErrBacklogQuotaExceeded):
		// Pulsar answers a producer blocked by a backlog quota with 503 too.
		status = http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		status = http.StatusGatewayTimeout
	}
	return status, what + ": " + err.Error()
}
