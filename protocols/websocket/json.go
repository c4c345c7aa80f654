package websocket

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ternmq/tern/protocols"
)

// The JSON messages of Pulsar's WebSocket API v2, field for field.

// producerMessage is a message a producer session receives.
type producerMessage struct {
	Payload    b64Payload        `json:"payload"`
	Properties map[string]string `json:"properties"`
	Context    *flexString       `json:"context"`
	Key        *string           `json:"key"`
	// ReplicationClusters and DisableReplication are accepted and
	// ignored: which regions a topic lives in is a policy of the mesh.
	ReplicationClusters []string `json:"replicationClusters"`
	DisableReplication  bool     `json:"disableReplication"`
	EventTime           *string  `json:"eventTime"`
	SequenceID          *int64   `json:"sequenceId"`
	DeliverAt           int64    `json:"deliverAt"`
	DeliverAfterMs      int64    `json:"deliverAfterMs"`
	// The schema fields are accepted and ignored: payloads are stored as
	// sent.
	SchemaVersion int64           `json:"schemaVersion"`
	KeySchema     json.RawMessage `json:"keySchema"`
	ValueSchema   json.RawMessage `json:"valueSchema"`
}

// flexString takes a JSON string or number, as Jackson's coercion of a
// String field does: clients send "context": 1 as often as "1". A number
// is kept as written.
type flexString string

func (f *flexString) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case '"':
		b, err := jsonString(v, true)
		*f = flexString(b)
		return err
	case '0':
		*f = flexString(v)
		return nil
	}
	return &jsonv2.SemanticError{JSONKind: v.Kind()}
}

// b64Payload is a producer message's payload, decoded from base64 as the
// message is read: from the JSON input itself when the string has no
// escapes (base64 needs none), so no string is made of it. A payload that
// is not base64 is kept as err, not returned, so that the message still
// decodes and the answer reports it with its own code and the context.
type b64Payload struct {
	set   bool // false: absent or null
	bytes []byte
	err   error
}

func (p *b64Payload) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		*p = b64Payload{}
		return nil
	case '"':
		s, err := jsonString(v, false)
		if err != nil {
			return err
		}
		b, err := decodeBase64(s)
		*p = b64Payload{set: true, bytes: b, err: err}
		return nil
	}
	return &jsonv2.SemanticError{JSONKind: v.Kind()}
}

// jsonString returns the text of the JSON string v: the bytes between its
// quotes, which alias v, when it has no escapes (and, if checkUTF8, is
// valid UTF-8), or else a copy unquoted as leniently as the rest of the
// message (an unpaired surrogate or invalid UTF-8 becomes the replacement
// character). A payload skips the UTF-8 check: a byte that is not ASCII is
// not base64 either way.
func jsonString(v jsontext.Value, checkUTF8 bool) ([]byte, error) {
	if s := v[1 : len(v)-1]; bytes.IndexByte(s, '\\') < 0 && (!checkUTF8 || utf8.Valid(s)) {
		return s, nil
	}
	var s string
	err := unmarshal(v, &s)
	return []byte(s), err
}

// producerAck answers one producer message.
type producerAck struct {
	Result        string  `json:"result"`
	ErrorMsg      string  `json:"errorMsg,omitempty"`
	MessageID     string  `json:"messageId,omitempty"`
	Context       *string `json:"context,omitempty"`
	ErrorCode     int     `json:"errorCode"`
	SchemaVersion int64   `json:"schemaVersion"`
}

// consumerCommand is what a consumer or reader session receives: an ack
// (no type, or a type not listed), a negative ack, permits, an unsubscribe
// or an end-of-topic check.
type consumerCommand struct {
	Type           string  `json:"type"`
	MessageID      *string `json:"messageId"`
	PermitMessages *int64  `json:"permitMessages"`
}

// consumerMessage is a message pushed to a consumer or reader. The payload
// is written in base64 (encodeOpts' default for bytes).
type consumerMessage struct {
	MessageID       string            `json:"messageId"`
	Payload         []byte            `json:"payload"`
	Properties      map[string]string `json:"properties"`
	PublishTime     string            `json:"publishTime"`
	RedeliveryCount int32             `json:"redeliveryCount"`
	EventTime       string            `json:"eventTime,omitempty"`
	Key             *string           `json:"key,omitempty"`
}

// endOfTopic answers isEndOfTopic.
type endOfTopic struct {
	EndOfTopic bool `json:"endOfTopic"`
}

// formatTime writes a Unix ms time as Pulsar's WebSocket API does: ISO
// 8601 with milliseconds and offset (UTC here).
func formatTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// parseTime reads an ISO 8601 date-time with an offset.
func parseTime(s string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("eventTime %q: want an ISO 8601 date-time with an offset, like 2024-05-01T12:00:00.000Z", clip(s, 40))
	}
	return t.UnixMilli(), nil
}

// message is a producer message decoded and checked, ready to become an
// entry.
type message struct {
	context   *string
	payload   []byte
	key       []byte // nil: no key
	headers   []protocols.Header
	eventTime int64 // 0: none given
	seq       *int64
	deliverAt int64 // Unix ms, 0: none
}

// decodeProducerMessage decodes one producer message. On failure it
// returns the Pulsar error the ack reports (3 for JSON that does not
// decode, 7 for a payload or time that does not), the context if it was
// read, and a message saying what to change.
func decodeProducerMessage(b []byte, maxPayload int, now time.Time) (message, CloseCode, error) {
	var pm producerMessage
	if err := unmarshal(b, &pm); err != nil {
		return message{}, CloseFailedToDeserializeFromJSON, fmt.Errorf("not a producer message: %v", jsonError(b, err))
	}
	var m message
	if pm.Context != nil {
		c := string(*pm.Context)
		m.context = &c
	}
	if !pm.Payload.set {
		return m, ClosePayloadEncodingError, errors.New(`the message has no "payload"; send its bytes in base64`)
	}
	if err := pm.Payload.err; err != nil {
		return m, ClosePayloadEncodingError, fmt.Errorf("Invalid Base64 message-payload error=%v", err)
	}
	m.payload = pm.Payload.bytes
	if len(m.payload) > maxPayload {
		return m, ClosePayloadEncodingError, fmt.Errorf("the payload of %d bytes exceeds the limit of %d bytes", len(m.payload), maxPayload)
	}
	if pm.Key != nil {
		m.key = []byte(*pm.Key)
	}
	if len(pm.Properties) > 0 {
		keys := make([]string, 0, len(pm.Properties))
		for k := range pm.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		m.headers = make([]protocols.Header, len(keys))
		for i, k := range keys {
			m.headers[i] = protocols.Header{Key: k, Value: []byte(pm.Properties[k])}
		}
	}
	if pm.EventTime != nil && *pm.EventTime != "" {
		var err error
		if m.eventTime, err = parseTime(*pm.EventTime); err != nil {
			return m, ClosePayloadEncodingError, err
		}
		if m.eventTime <= 0 {
			return m, ClosePayloadEncodingError, fmt.Errorf("eventTime %q is not after 1970", *pm.EventTime)
		}
	}
	if pm.SequenceID != nil {
		if *pm.SequenceID < 0 {
			return m, CloseFailedToDeserializeFromJSON, fmt.Errorf("sequenceId %d: want a number >= 0", *pm.SequenceID)
		}
		m.seq = pm.SequenceID
	}
	switch {
	case pm.DeliverAt > 0:
		m.deliverAt = pm.DeliverAt
	case pm.DeliverAfterMs > 0:
		m.deliverAt = now.UnixMilli() + pm.DeliverAfterMs
	}
	return m, 0, nil
}

// decodeBase64 reads standard base64 with or without padding, as Java's
// basic decoder does.
func decodeBase64(s []byte) ([]byte, error) {
	s = bytes.TrimRight(s, "=")
	b := make([]byte, base64.RawStdEncoding.DecodedLen(len(s)))
	n, err := base64.RawStdEncoding.Decode(b, s)
	return b[:n], err
}

// decodeOpts read JSON as leniently as encoding/json does (member names
// in any case, the last of repeated names, invalid UTF-8 replaced), with
// the decoder of encoding/json's successor, which reads a value in one
// pass: 2.2 us for a 1 KiB producer message against encoding/json's 7.6.
var decodeOpts = jsonv2.JoinOptions(
	jsonv2.MatchCaseInsensitiveNames(true),
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
)

// unmarshal decodes one client message into v.
func unmarshal(b []byte, v any) error { return jsonv2.Unmarshal(b, v, decodeOpts) }

// encodeOpts write a pushed message as encoding/json did (invalid UTF-8
// replaced, map keys sorted, <, > and & escaped), with its successor's
// encoder, which writes the payload's base64 straight into the output:
// 3.0 us and 1.8 KB for a 1 KiB message against encoding/json's 5.2 us and
// 4.5 KB with the base64 made first. The one difference: the replacement
// character is written as itself, not as \ufffd; both are the same JSON.
var encodeOpts = jsonv2.JoinOptions(
	jsontext.AllowInvalidUTF8(true),
	jsontext.EscapeForHTML(true),
	jsonv2.Deterministic(true),
)

// marshalTo encodes one message to a client into buf, which it empties
// first, and returns the encoding (buf's bytes): a session sending a batch
// encodes each message into the same buffer. (Marshal allocated a copy of
// each, an eighth of what a WebSocket consumer's node allocated.)
func marshalTo(buf *bytes.Buffer, v any) ([]byte, error) {
	buf.Reset()
	if err := jsonv2.MarshalWrite(buf, v, encodeOpts); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// jsonError rephrases a decoding error of b without Go type names.
func jsonError(b []byte, err error) string {
	var se *jsontext.SyntacticError
	var te *jsonv2.SemanticError
	switch {
	case len(bytes.TrimSpace(b)) == 0:
		return "invalid JSON: empty message"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "invalid JSON: the message ends inside a value"
	case errors.As(err, &se) && strings.Contains(se.Err.Error(), "after top-level value"):
		return "data after the JSON object; send one message per WebSocket message"
	case errors.As(err, &se):
		return "invalid JSON at byte " + strconv.FormatInt(se.ByteOffset, 10) + ": " + se.Err.Error()
	case errors.As(err, &te):
		got := "JSON " + te.JSONKind.String()
		if te.JSONPointer == "" {
			return "want a JSON object, got " + got
		}
		return "field " + strconv.Quote(te.JSONPointer.LastToken()) + " has the wrong type (" + got + ")"
	}
	return err.Error()
}
