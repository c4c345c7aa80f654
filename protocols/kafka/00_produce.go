package kafka

// Produce, versions 0-11 advertised. Only RecordBatch v2 (magic 2) is
// stored, so v0-2 (message sets v0/v1) are answered with
// UNSUPPORTED_FOR_MESSAGE_FORMAT per partition; they are advertised because
// librdkafka before 2.11.1 disables compression when Produce v0 is missing
// (as Apache Kafka 4.0 does). v12+ (KIP-890 transactions v2) is not
// advertised.
//
// Differences from Apache Kafka:
//   - every batch is validated in full (CRC, then decompressed and every
//     record walked) and stored byte for byte; the partition leader epoch is
//     stamped -1, since tern has no leader epochs;
//   - transactional batches and transactional ids are refused with
//     INVALID_TXN_STATE until transactions land;
//   - an unknown topic is created when the node auto-creates topics;
//   - LogAppendTime topics do not exist: LogAppendTime is always -1.
//
// Requests are pipelined: the handler validates and starts every
// partition's append (offsets assigned, write submitted) in the reader, and
// the reply waits for the fsyncs in the writer, so consecutive requests on
// one connection share fsyncs.

import (
	"context"
	"fmt"

	"github.com/ternmq/tern/protocols"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.Produce, 0, 11, handleProduce) }

func handleProduce(c *conn, kr kmsg.Request, r *reply) error {
	req := kr.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	type started struct {
		rp      *kmsg.ProduceResponseTopicPartition
		pp      protocols.PendingProduce
		records int32
	}
	var waits []started
	var reqErr error
	switch {
	case req.Version < 3:
		reqErr = fmt.Errorf("%w: Produce v%d carries message sets v0/v1; tern stores RecordBatch v2 only (Produce v3+)", errInvalidRecord, req.Version)
	case req.TransactionID != nil:
		reqErr = errUnsupportedTxn
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = fmt.Errorf("acks=%d: want -1 (all), 0 or 1", req.Acks)
	}
	failed := false
	tc := c.s.newTopicCache(true)
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := &resp.Topics[ti]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi := range rt.Partitions {
			p := &rt.Partitions[pi]
			rp := &st.Partitions[pi]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			err := reqErr
			var part protocols.Partition
			var h protocols.BatchHeader
			if err == nil {
				part, err = tc.partition(c.ctx, rt.Topic, p.Partition)
			}
			if err == nil {
				h, err = c.validateBatch(p.Records, req.Version)
			}
			var pp protocols.PendingProduce
			if err == nil {
				protocols.SetBatchLeaderEpoch(p.Records, -1)
				pp, err = c.s.b.StartProduce(c.ctx, part, protocols.ProduceRequest{Batch: p.Records, Header: &h})
			}
			if err != nil {
				failed = true
				rp.ErrorCode = produceErrCode(err, req)
				rp.ErrorMessage = errMessage(err)
				continue
			}
			waits = append(waits, started{rp, pp, h.NumRecords})
		}
	}
	acks := req.Acks
	stats := &c.s.stats
	r.closeAfter = acks == 0 && failed
	r.ready = func() bool {
		for _, w := range waits {
			if rp, ok := w.pp.(protocols.ReadyProduce); !ok || !rp.Ready() {
				return false
			}
		}
		return true
	}
	r.wait = func(context.Context) kmsg.Response {
		for _, w := range waits {
			res, err := w.pp.Wait()
			if err != nil {
				w.rp.ErrorCode = errCode(err)
				w.rp.ErrorMessage = errMessage(err)
				continue
			}
			w.rp.BaseOffset = res.BaseOffset
			w.rp.LogStartOffset = res.LogStartOffset
			if !res.Duplicate {
				stats.batches.Add(1)
				stats.records.Add(int64(w.records))
			}
		}
		if acks == 0 {
			return nil
		}
		return resp
	}
	return nil
}

func produceErrCode(err error, req *kmsg.ProduceRequest) int16 {
	switch {
	case req.Version < 3:
		return kerr.UnsupportedForMessageFormat.Code
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		return kerr.InvalidRequiredAcks.Code
	}
	return errCode(err)
}
