package pulsar

import (
	"strings"
	"testing"

	// The Pulsar Go client registers its protocol definition
	// (PulsarApi.proto) in the global registry; the test compares ours
	// against it field by field.
	_ "github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// upstreamOmitted lists the BaseCommand fields (by type) this package leaves
// out on purpose. Anything else missing is a mistake.
var upstreamOmitted = map[string]bool{
	"consumerStats": true, "consumerStatsResponse": true, "reachedEndOfTopic": true,
	"endTxnOnPartition": true, "endTxnOnPartitionResponse": true,
	"endTxnOnSubscription": true, "endTxnOnSubscriptionResponse": true,
	"watchTopicList": true, "watchTopicListSuccess": true, "watchTopicUpdate": true,
	"watchTopicListClose": true, "topicMigrated": true,
}

// TestProtoMatchesClient checks that every message, field and enum value of
// our .proto file has the number, name, type, label and default that the
// Pulsar Go client's copy of the protocol has, so both sides encode the same
// bytes.
func TestProtoMatchesClient(t *testing.T) {
	theirs, err := protoregistry.GlobalFiles.FindFileByPath("PulsarApi.proto")
	if err != nil {
		t.Fatalf("the Go client's protocol definition is not registered: %v", err)
	}
	// The batch message's metadata has a file of its own (generated with
	// the Opaque API), in the same proto package.
	files := []protoreflect.FileDescriptor{pb.File_protocols_pulsar_proto_pulsar_proto, pb.File_protocols_pulsar_proto_batch_proto}
	ourPkg, theirPkg := string(files[0].Package())+".", string(theirs.Package())+"."
	rel := func(n protoreflect.FullName) string { return strings.TrimPrefix(string(n), ourPkg) }
	theirName := func(n protoreflect.FullName) protoreflect.FullName {
		return protoreflect.FullName(theirPkg + rel(n))
	}
	lookupMsg := func(n protoreflect.FullName) protoreflect.MessageDescriptor {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(theirName(n))
		if err != nil {
			return nil
		}
		md, _ := d.(protoreflect.MessageDescriptor)
		return md
	}

	var checkEnum func(e protoreflect.EnumDescriptor)
	checkEnum = func(e protoreflect.EnumDescriptor) {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(theirName(e.FullName()))
		if err != nil {
			t.Errorf("enum %s: not in the client's protocol", rel(e.FullName()))
			return
		}
		te := d.(protoreflect.EnumDescriptor)
		if te.Values().Len() != e.Values().Len() {
			t.Errorf("enum %s: %d values, client has %d", rel(e.FullName()), e.Values().Len(), te.Values().Len())
		}
		for i := 0; i < te.Values().Len(); i++ {
			tv := te.Values().Get(i)
			ov := e.Values().ByName(tv.Name())
			if ov == nil || ov.Number() != tv.Number() {
				t.Errorf("enum %s: value %s = %d missing or renumbered", rel(e.FullName()), tv.Name(), tv.Number())
			}
		}
	}

	var checkMsg func(m protoreflect.MessageDescriptor)
	checkMsg = func(m protoreflect.MessageDescriptor) {
		name := rel(m.FullName())
		tm := lookupMsg(m.FullName())
		if tm == nil {
			t.Errorf("message %s: not in the client's protocol", name)
			return
		}
		for i := 0; i < m.Fields().Len(); i++ {
			f := m.Fields().Get(i)
			tf := tm.Fields().ByNumber(f.Number())
			where := name + "." + string(f.Name())
			switch {
			case tf == nil:
				t.Errorf("%s: field %d not in the client's protocol", where, f.Number())
				continue
			case tf.Name() != f.Name():
				t.Errorf("%s: client calls field %d %s", where, f.Number(), tf.Name())
			case tf.Kind() != f.Kind():
				t.Errorf("%s: kind %s, client has %s", where, f.Kind(), tf.Kind())
			case tf.Cardinality() != f.Cardinality():
				t.Errorf("%s: %s, client has %s", where, f.Cardinality(), tf.Cardinality())
			case tf.IsPacked() != f.IsPacked():
				t.Errorf("%s: packed %v, client has %v", where, f.IsPacked(), tf.IsPacked())
			case tf.HasDefault() != f.HasDefault() ||
				(f.HasDefault() && tf.Default().Interface() != f.Default().Interface() &&
					!(f.Kind() == protoreflect.BytesKind)):
				t.Errorf("%s: default %v, client has %v", where, f.Default(), tf.Default())
			}
			if f.Message() != nil && rel(f.Message().FullName()) != strings.TrimPrefix(string(tf.Message().FullName()), theirPkg) {
				t.Errorf("%s: type %s, client has %s", where, f.Message().FullName(), tf.Message().FullName())
			}
			if f.Enum() != nil && rel(f.Enum().FullName()) != strings.TrimPrefix(string(tf.Enum().FullName()), theirPkg) {
				t.Errorf("%s: enum %s, client has %s", where, f.Enum().FullName(), tf.Enum().FullName())
			}
		}
		// Every field the client knows must be here too, except the
		// commands left out on purpose.
		for i := 0; i < tm.Fields().Len(); i++ {
			tf := tm.Fields().Get(i)
			if m.Fields().ByNumber(tf.Number()) != nil {
				continue
			}
			if name == "BaseCommand" && upstreamOmitted[string(tf.Name())] {
				continue
			}
			t.Errorf("%s: client field %s = %d missing", name, tf.Name(), tf.Number())
		}
		for i := 0; i < m.Enums().Len(); i++ {
			checkEnum(m.Enums().Get(i))
		}
		for i := 0; i < m.Messages().Len(); i++ {
			checkMsg(m.Messages().Get(i))
		}
	}

	msgs, enums := 0, 0
	for _, ours := range files {
		if ours.Package() != files[0].Package() {
			t.Fatalf("%s: package %s, want %s", ours.Path(), ours.Package(), files[0].Package())
		}
		for i := 0; i < ours.Messages().Len(); i++ {
			checkMsg(ours.Messages().Get(i))
		}
		for i := 0; i < ours.Enums().Len(); i++ {
			checkEnum(ours.Enums().Get(i))
		}
		msgs, enums = msgs+ours.Messages().Len(), enums+ours.Enums().Len()
	}
	if msgs < 60 {
		t.Fatalf("only %d messages in our protocol files", msgs)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d messages and %d enums match the client's protocol", msgs, enums)
}

// TestBaseCommandFieldsMatchTypes checks the convention the codec relies on:
// each command field's number is its type number.
func TestBaseCommandFieldsMatchTypes(t *testing.T) {
	fields := (&pb.BaseCommand{}).ProtoReflect().Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		if f.Number() == 1 {
			continue
		}
		if _, ok := pb.BaseCommand_Type_name[int32(f.Number())]; !ok {
			t.Errorf("field %s = %d has no type of that number", f.Name(), f.Number())
		}
	}
}
