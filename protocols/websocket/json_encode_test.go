package websocket

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestPushedMessageJSONAsBefore: a pushed message encodes to the same JSON
// as encoding/json made of it with the payload in base64 first: invalid
// UTF-8 replaced, properties sorted, <, > and & escaped, a missing
// payload "". Only the replacement character is written as itself rather
// than as \ufffd, which JSON readers do not see.
func TestPushedMessageJSONAsBefore(t *testing.T) {
	key := "k\xfe<&>"
	var buf bytes.Buffer // one buffer for both, as a session encodes a batch
	for _, cm := range []consumerMessage{
		{MessageID: "CAAQAw==", Payload: []byte("hello \x00\xff world"), Properties: map[string]string{"b": "<&>", "a": "\xff", "c": ""},
			PublishTime: formatTime(1_700_000_000_000), RedeliveryCount: 2, EventTime: formatTime(1_600_000_000_000), Key: &key},
		{MessageID: "CAAQBA==", Payload: nil, Properties: map[string]string{}, PublishTime: formatTime(1)},
	} {
		got, err := marshalTo(&buf, cm)
		if err != nil {
			t.Fatal(err)
		}
		want, err := encodeAsBefore(cm)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("encoded\n%s\nwant the same JSON as\n%s", got, want)
		}
		// The same bytes once encoding/json's escaped replacement
		// characters are written as themselves.
		unescaped := strings.ReplaceAll(string(want), `\ufffd`, "\ufffd")
		if string(got) != unescaped {
			t.Errorf("encoded\n%s\nwant\n%s", got, unescaped)
		}
	}
}

// encodeAsBefore encodes a pushed message as the session did before:
// encoding/json, with the payload made into base64 first.
func encodeAsBefore(cm consumerMessage) ([]byte, error) {
	return json.Marshal(struct {
		MessageID       string            `json:"messageId"`
		Payload         string            `json:"payload"`
		Properties      map[string]string `json:"properties"`
		PublishTime     string            `json:"publishTime"`
		RedeliveryCount int32             `json:"redeliveryCount"`
		EventTime       string            `json:"eventTime,omitempty"`
		Key             *string           `json:"key,omitempty"`
	}{cm.MessageID, base64.StdEncoding.EncodeToString(cm.Payload), cm.Properties, cm.PublishTime, cm.RedeliveryCount, cm.EventTime, cm.Key})
}
