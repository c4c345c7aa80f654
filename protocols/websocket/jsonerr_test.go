package websocket

import (
	"strings"
	"testing"
	"time"
)

// TestProducerMessageErrors pins what a producer is told for each kind of
// bad JSON: where it broke and what to change, without Go type names.
func TestProducerMessageErrors(t *testing.T) {
	cases := []struct{ raw, want string }{
		{``, "invalid JSON: empty message"},
		{`   `, "invalid JSON: empty message"},
		{`{"payload": "aGk=", `, "invalid JSON: the message ends inside a value"},
		{`not json`, "invalid JSON at byte 1: invalid character 'o'"},
		{`{"payload": "aGk=",}`, "invalid JSON at byte 18: invalid character ','"},
		{`[1,2]`, "want a JSON object, got JSON ["},
		{`"text"`, "want a JSON object, got JSON string"},
		{`{"payload": 5}`, `field "payload" has the wrong type (JSON number)`},
		{`{"properties": {"a": 1}, "payload": "aGk="}`, `field "a" has the wrong type (JSON number)`},
		{`{"payload": "aGk="}{"payload": "aGk="}`, "data after the JSON object; send one message per WebSocket message"},
		{`{"payload": "aGk="} x`, "data after the JSON object"},
	}
	for _, tc := range cases {
		_, code, err := decodeProducerMessage([]byte(tc.raw), 1<<20, time.Now())
		if err == nil || code != CloseFailedToDeserializeFromJSON {
			t.Errorf("%q: code %d, err %v; want code %d", tc.raw, code, err, CloseFailedToDeserializeFromJSON)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "websocket.") {
			t.Errorf("%q: %v; want %q and no Go type names", tc.raw, err, tc.want)
		}
	}
	// The decoding stays as lenient as encoding/json's: names in any
	// case, the last of repeated names, a number for the context.
	m, _, err := decodeProducerMessage([]byte(`{"PAYLOAD": "eA==", "payload": "aGk=", "Context": 7}`), 1<<20, time.Now())
	if err != nil || string(m.payload) != "hi" || m.context == nil || *m.context != "7" {
		t.Fatalf("lenient decoding: %+v, %v", m, err)
	}
}
