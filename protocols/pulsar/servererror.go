package pulsar

import (
	"errors"

	"github.com/ternmq/tern/protocols"
	"github.com/ternmq/tern/protocols/pulsar/pb"
)

// serverError maps a broker error to the ServerError Pulsar clients react
// to, with the error's text as the message.
func serverError(err error) (pb.ServerError, string) {
	code := pb.ServerError_UnknownError
	switch {
	case errors.Is(err, protocols.ErrTopicNotFound), errors.Is(err, protocols.ErrPartitionNotFound),
		errors.Is(err, protocols.ErrNamespaceNotFound):
		code = pb.ServerError_TopicNotFound
	case errors.Is(err, protocols.ErrInvalidTopicName):
		code = pb.ServerError_InvalidTopicName
	case errors.Is(err, protocols.ErrConsumerBusy):
		code = pb.ServerError_ConsumerBusy
	case errors.Is(err, protocols.ErrConsumerAssign):
		code = pb.ServerError_ConsumerAssignError
	case errors.Is(err, protocols.ErrProducerBusy):
		code = pb.ServerError_ProducerBusy
	case errors.Is(err, protocols.ErrProducerFenced):
		code = pb.ServerError_ProducerFenced
	case errors.Is(err, protocols.ErrIncompatibleSchema), errors.Is(err, protocols.ErrInvalidSchema):
		code = pb.ServerError_IncompatibleSchema
	case errors.Is(err, protocols.ErrSubscriptionNotFound):
		code = pb.ServerError_SubscriptionNotFound
	case errors.Is(err, protocols.ErrConsumerClosed):
		code = pb.ServerError_ConsumerNotFound
	case errors.Is(err, protocols.ErrNotReady), errors.Is(err, protocols.ErrClosed):
		code = pb.ServerError_ServiceNotReady
	case errors.Is(err, protocols.ErrStorage):
		code = pb.ServerError_PersistenceError
	case errors.Is(err, protocols.ErrInvalidSubscription), errors.Is(err, protocols.ErrInvalidAck),
		errors.Is(err, protocols.ErrInvalidConfig), errors.Is(err, protocols.ErrMessageTooLarge):
		code = pb.ServerError_NotAllowedError
	}
	return code, err.Error()
}

// sendErrorFor maps a failed append to the SEND_ERROR code the Go client
// treats right: a message that can never be stored fails the producer
// (NotAllowedError); anything that a retry may cure closes the connection
// on the client side, which reconnects and resends (PersistenceError and
// the rest).
func sendErrorFor(err error) (pb.ServerError, string) {
	switch {
	case errors.Is(err, protocols.ErrMessageTooLarge), errors.Is(err, protocols.ErrCorruptBatch),
		errors.Is(err, protocols.ErrCorruptEntry), errors.Is(err, protocols.ErrInvalidConfig):
		return pb.ServerError_NotAllowedError, err.Error()
	case errors.Is(err, protocols.ErrTopicNotFound), errors.Is(err, protocols.ErrPartitionNotFound):
		return pb.ServerError_TopicNotFound, err.Error()
	case errors.Is(err, protocols.ErrNotReady), errors.Is(err, protocols.ErrClosed):
		return pb.ServerError_ServiceNotReady, err.Error()
	}
	return pb.ServerError_PersistenceError, err.Error()
}
