package pulsar

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// BaseCommand keeps each command in the field whose number equals its type
// number. The tables below are built once from the generated descriptor, so
// that a new command in the .proto file needs no code here.
var (
	baseCommandFields = (&pb.BaseCommand{}).ProtoReflect().Descriptor().Fields()
	// commandFieldByMessage maps a command message (CommandSend, ...) to its
	// BaseCommand field.
	commandFieldByMessage = func() map[protoreflect.FullName]protoreflect.FieldDescriptor {
		m := make(map[protoreflect.FullName]protoreflect.FieldDescriptor)
		for i := 0; i < baseCommandFields.Len(); i++ {
			fd := baseCommandFields.Get(i)
			if fd.Kind() != protoreflect.MessageKind {
				continue
			}
			if _, dup := m[fd.Message().FullName()]; dup {
				panic("pulsar: BaseCommand holds " + string(fd.Message().FullName()) + " twice")
			}
			m[fd.Message().FullName()] = fd
		}
		return m
	}()
)

var (
	unmarshalPartial = proto.UnmarshalOptions{AllowPartial: true}
	marshalChecked   = proto.MarshalOptions{}
	marshalPartial   = proto.MarshalOptions{AllowPartial: true}
)

// DecodeCommand decodes an encoded BaseCommand into cmd and checks it: its
// type must be known, the command body for that type present, and every
// required field set. cmd is reset first, so one BaseCommand can be reused
// for every frame of a connection.
//
// A command of a type this package has no body for gives an
// *UnsupportedCommandError; anything malformed gives an error matching
// ErrCommand.
func DecodeCommand(b []byte, cmd *pb.BaseCommand) error {
	if err := unmarshalPartial.Unmarshal(b, cmd); err != nil {
		return fmt.Errorf("%w: %w", ErrCommand, err)
	}
	if cmd.Type == nil {
		return fmt.Errorf("%w: BaseCommand has no type", ErrCommand)
	}
	// Go's protobuf keeps enum numbers it does not know (proto2 enums are
	// open in Go), so a type outside BaseCommand_Type arrives here as is.
	t := cmd.GetType()
	fd := baseCommandFields.ByNumber(protoreflect.FieldNumber(t))
	if fd == nil || fd.Kind() != protoreflect.MessageKind {
		return &UnsupportedCommandError{Type: int32(t)}
	}
	m := cmd.ProtoReflect()
	if !m.Has(fd) {
		if t != pb.BaseCommand_PING && t != pb.BaseCommand_PONG {
			return fmt.Errorf("%w: %s command without its %q field", ErrCommand, t, fd.Name())
		}
		// PING and PONG have no content, so an absent body means the same
		// as an empty one.
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
	}
	if err := proto.CheckInitialized(cmd); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCommand, t, err)
	}
	return nil
}

// NewCommand wraps a command body (a *pb.CommandSend, *pb.CommandPong, ...) in
// a BaseCommand with the matching type. It panics when body is not a command
// BaseCommand can hold, which is a programming error.
func NewCommand(body proto.Message) *pb.BaseCommand {
	fd, ok := commandFieldByMessage[body.ProtoReflect().Descriptor().FullName()]
	if !ok {
		panic(fmt.Sprintf("pulsar: %T is not a command body", body))
	}
	t := pb.BaseCommand_Type(fd.Number())
	cmd := &pb.BaseCommand{Type: &t}
	cmd.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(body.ProtoReflect()))
	return cmd
}

// CommandBody returns the body of cmd that its type selects (the
// *pb.CommandSend of a SEND, ...), or nil if it has none. It serves generic
// code such as logging; handlers use the typed getters.
func CommandBody(cmd *pb.BaseCommand) proto.Message {
	fd := baseCommandFields.ByNumber(protoreflect.FieldNumber(cmd.GetType()))
	if fd == nil || fd.Kind() != protoreflect.MessageKind {
		return nil
	}
	m := cmd.ProtoReflect()
	if !m.Has(fd) {
		return nil
	}
	return m.Get(fd).Message().Interface()
}
