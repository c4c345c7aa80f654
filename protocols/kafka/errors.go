package kafka

import (
	"errors"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
)

// errCode maps a broker error to the Kafka error code clients act on.
func errCode(err error) int16 {
	var oor *protocols.OffsetOutOfRangeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &oor):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, protocols.ErrTopicNotFound), errors.Is(err, protocols.ErrPartitionNotFound),
		errors.Is(err, protocols.ErrNamespaceNotFound):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, protocols.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, protocols.ErrInvalidTopicName):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, protocols.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, protocols.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, protocols.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, protocols.ErrUnsupportedCodec):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, protocols.ErrCorruptBatch), errors.Is(err, protocols.ErrCorruptEntry):
		return kerr.CorruptMessage.Code
	case errors.Is(err, protocols.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, protocols.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, protocols.ErrUnknownProducer):
		return kerr.UnknownProducerID.Code
	case errors.Is(err, protocols.ErrNotReady), errors.Is(err, protocols.ErrClosed):
		// Retriable: clients refresh metadata and try again.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, protocols.ErrStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, protocols.ErrBacklogQuotaExceeded):
		// Kafka has no backlog quotas; a namespace's Pulsar quota refusing
		// a Kafka producer is a policy of the topic.
		return kerr.PolicyViolation.Code
	case errors.Is(err, errInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, errUnsupportedTxn):
		return kerr.InvalidTxnState.Code
	}
	return kerr.UnknownServerError.Code
}

// errMessage is the text sent in ErrorMessage fields, or nil for success.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

var (
	errInvalidRecord  = errors.New("kafka: invalid record batch")
	errUnsupportedTxn = errors.New("kafka: Kafka transactions are not supported yet; use an idempotent producer without a transactional.id")
)
