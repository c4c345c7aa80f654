// Package pulsar speaks the Pulsar binary protocol to Pulsar clients.
//
// It owns the wire: frames, commands, the checksummed payload section,
// batch payloads, payload compression and message ids. Command handlers (one
// file per command, cmd_*.go) build on the codec in this package and talk to
// the node through the protocols.Broker interface. The package must not touch
// storage directly and must not know how the node lays out its log.
//
// # Frames
//
// Every frame starts with its size, then the size of a protobuf BaseCommand
// and the command itself:
//
//	[totalSize u32][commandSize u32][BaseCommand]
//
// SEND and MESSAGE carry a payload section after the command:
//
//	[0x0e02][size u32][BrokerEntryMetadata]     optional, broker to client only
//	[0x0e01][crc32c u32][metadataSize u32][MessageMetadata][payload]
//
// The CRC-32C (Castagnoli) covers metadataSize to the end of the frame. All
// integers are big-endian. FrameReader reads frames with a size limit that is
// checked before anything is allocated; ParsePayload splits and verifies the
// payload section. A checksum failure is a *ChecksumError, kept apart from
// framing errors because a broker answers it with SEND_ERROR(ChecksumError)
// and keeps the connection, while a framing error closes it.
//
// Writing appends to a caller-owned buffer (AppendCommand,
// AppendPayloadCommand and friends), so a connection's writer reuses one
// buffer for every frame. A payload section received in a SEND can be sent
// back unchanged in a MESSAGE (AppendChecksummedPayloadCommand) without
// decoding or re-checksumming it.
//
// # Payloads
//
// A payload is either one message or, when MessageMetadata has
// num_messages_in_batch, a batch of [size u32][SingleMessageMetadata][bytes]
// items (BatchReader, AppendBatchMessage). Batch or single payload, it may be
// compressed as a whole with LZ4 (raw block), ZLIB (with zlib header), ZSTD
// (frame) or SNAPPY (raw block); Codec does both directions with pooled
// state and refuses to inflate past uncompressed_size or its configured
// maximum.
//
// # Generated code
//
// The protocol messages are generated from proto/pulsar.proto into the pb
// package, and the generated files are committed so that a build needs
// neither protoc nor its Go plugin. SingleMessageMetadata, which the broker
// decodes for every message a producer batches and encodes for every message
// it delivers, has a file of its own, proto/batch.proto, generated with
// protobuf-go's Opaque API: its optional scalars live in the struct behind
// presence bits instead of each on the heap, so decoding one allocates
// nothing (BenchmarkDecodeSend/NONE-bare). After editing a .proto file,
// regenerate with protoc (3.21 or later) and protoc-gen-go v1.36.12 on the
// PATH:
//
//	go generate ./protocols/pulsar
//
//go:generate protoc --proto_path=../.. --go_out=../.. --go_opt=module=github.com/ternmq/tern --go_opt=apilevelMprotocols/pulsar/proto/batch.proto=API_OPAQUE protocols/pulsar/proto/pulsar.proto protocols/pulsar/proto/batch.proto
package pulsar
