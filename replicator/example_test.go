package replicator_test

import (
	"context"
	"errors"
	"io"

	"github.com/ternmq/tern/replicator"
)

// The sending side of one (partition, destination region): open a stream from the durable
// cursor, send what the log holds, and advance the cursor as ACKs arrive. On any stream error
// the caller reopens from its cursor (the receiver's dedup drops what it already has).
func ExampleTransport_OpenPartitionStream() {
	var (
		t       *replicator.Transport // from replicator.New
		cursor  int64                 // the durable replication cursor for (partition, region)
		readLog func(from int64) []replicator.Entry
		save    func(cursor int64)
	)
	ctx := context.Background()
	s, err := t.OpenPartitionStream(ctx, "node-eu-1", replicator.OpenRequest{
		Topic: "persistent://public/default/orders", Partition: 3, PartitionCount: 8,
		DestRegion: "eu", StartOffset: cursor,
	})
	var le *replicator.LinkError
	if errors.As(err, &le) && le.Code == replicator.CodePartitionCountMismatch {
		return // report le.Message to the operator; retry after the policy changes
	}
	if err != nil {
		return // link down or refused: retry later
	}
	defer s.Close()
	if acked, ok := s.Acked(); ok && acked > cursor {
		cursor = acked // the receiver already holds more (another path, or an earlier run)
	}
	go func() {
		for {
			acked, err := s.NextAck(ctx)
			if err != nil {
				return
			}
			save(acked)
		}
	}()
	next := cursor
	for {
		entries := readLog(next)
		if _, err := s.Send(ctx, entries); err != nil {
			return // reopen from the saved cursor
		}
		next = entries[len(entries)-1].End()
	}
}

// The receiving side: report the durable high-water mark first, then append each batch with
// dedup and acknowledge it once durable, handing its credit back.
func ExampleHandler() {
	var (
		durableNext func(replicator.OpenRequest) int64
		appendBatch func(context.Context, replicator.Batch) error // dedup + durable append
		partitions  func(topic string) int32
	)
	h := replicator.HandlerFunc(func(ctx context.Context, s *replicator.RecvStream) error {
		req := s.Request()
		if n := partitions(req.Topic); n != req.PartitionCount {
			return &replicator.LinkError{Code: replicator.CodePartitionCountMismatch,
				Message: "make the partition counts equal in both regions"}
		}
		if err := s.Ack(durableNext(req)); err != nil {
			return err
		}
		for {
			b, err := s.Recv(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := appendBatch(ctx, b); err != nil {
				return err
			}
			if err := s.AckAndGrant(b.End(), b.Credit()); err != nil {
				return err
			}
		}
	})
	_ = h
}
