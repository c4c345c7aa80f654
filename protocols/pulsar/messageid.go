package pulsar

import (
	"encoding/base64"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// Message ids travel as MessageIdData. Two positions are sentinels rather
// than messages: the earliest one, before any message, is (-1, -1) as signed
// 64-bit numbers, i.e. all ones on the wire; the latest one, after every
// message, is (MaxInt64, MaxInt64). Clients send them in SUBSCRIBE and SEEK.

// EarliestMessageID returns the id that stands for "before the first
// message".
func EarliestMessageID() *pb.MessageIdData {
	return &pb.MessageIdData{LedgerId: proto.Uint64(math.MaxUint64), EntryId: proto.Uint64(math.MaxUint64)}
}

// LatestMessageID returns the id that stands for "after the last message".
func LatestMessageID() *pb.MessageIdData {
	return &pb.MessageIdData{LedgerId: proto.Uint64(math.MaxInt64), EntryId: proto.Uint64(math.MaxInt64)}
}

// IsEarliestMessageID reports whether id is the earliest sentinel, whatever
// its partition and batch fields say.
func IsEarliestMessageID(id *pb.MessageIdData) bool {
	return id.GetLedgerId() == math.MaxUint64 && id.GetEntryId() == math.MaxUint64
}

// IsLatestMessageID reports whether id is the latest sentinel.
func IsLatestMessageID(id *pb.MessageIdData) bool {
	return id.GetLedgerId() == math.MaxInt64 && id.GetEntryId() == math.MaxInt64
}

// MaxMessageIDText bounds the base64 text ParseMessageID accepts. A message
// id with a full ack set for a large batch stays far below it.
const MaxMessageIDText = 16 << 10

// FormatMessageID returns the form the WebSocket API uses for a message id:
// standard base64, with padding, of the encoded MessageIdData. For example
// ledgerId 0, entryId 3 is "CAAQAw==".
func FormatMessageID(id *pb.MessageIdData) (string, error) {
	b, err := marshalChecked.Marshal(id)
	if err != nil {
		return "", fmt.Errorf("%w: message id: %w", ErrEncode, err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// ParseMessageID decodes the WebSocket API's base64 message id. Besides
// standard base64 it accepts the URL-safe alphabet and missing padding, and
// reads spaces as '+', since ids often pass through URL query strings where a
// '+' decodes to a space.
func ParseMessageID(s string) (*pb.MessageIdData, error) {
	if len(s) == 0 {
		return nil, fmt.Errorf("%w: empty string", ErrMessageID)
	}
	if len(s) > MaxMessageIDText {
		return nil, fmt.Errorf("%w: %d characters exceed the limit of %d", ErrMessageID, len(s), MaxMessageIDText)
	}
	t := strings.TrimRight(s, "=")
	t = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-':
			return '+'
		case '_':
			return '/'
		}
		return r
	}, t)
	b, err := base64.RawStdEncoding.DecodeString(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not base64: %w", ErrMessageID, clip(s), err)
	}
	id := &pb.MessageIdData{}
	if err := proto.Unmarshal(b, id); err != nil {
		return nil, fmt.Errorf("%w: %q does not hold a message id: %w", ErrMessageID, clip(s), err)
	}
	return id, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}
