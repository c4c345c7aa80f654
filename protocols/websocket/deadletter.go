package websocket

import (
	"context"
	"sync"

	"github.com/ternmq/tern/protocols"
)

// deadLetter is a consumer's dead-letter policy: messages redelivered more
// than max times go to topic.
type deadLetter struct {
	max   int32
	topic protocols.TopicName

	once  sync.Once
	parts []protocols.Partition
	route *router
	err   error
	comp  protocols.Compressor
}

// Properties Pulsar's clients add to a dead-lettered message.
const (
	propRealTopic       = "REAL_TOPIC"
	propOriginMessageID = "ORIGIN_MESSAGE_ID"
)

// deadLetter writes a message to the dead-letter topic and acknowledges
// it. If the write fails the message goes back for redelivery, as a
// Pulsar client's does.
func (cs *consumerSession) deadLetter(ss *session, it *item, pc *partConsumer) {
	cons := cs.currentConsumer(pc)
	if cons == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ss.ctx, cs.s.cfg.SetupTimeout)
	defer cancel()
	if err := cs.writeDeadLetter(ctx, it); err != nil {
		ss.log.Warn("writing to the dead-letter topic failed; the message goes back for redelivery", "dead_letter_topic", cs.dlq.topic.String(), "err", err)
		_ = cons.Redeliver(ctx, []int64{it.entry})
		return
	}
	cs.s.m.deadLettered.Add(1)
	if err := cons.Ack(ctx, []protocols.AckPosition{{Offset: it.entry, BatchIndex: int32(it.index)}}, false); err != nil {
		ss.log.Debug("ack of a dead-lettered message refused", "err", err)
	}
}

func (cs *consumerSession) writeDeadLetter(ctx context.Context, it *item) error {
	d := cs.dlq
	d.once.Do(func() {
		d.parts, d.err = cs.s.resolve(ctx, d.topic)
		d.route = newRouter(len(d.parts), "RoundRobinPartition", "JavaStringHash")
	})
	if d.err != nil {
		return d.err
	}
	sl := &cs.slots[it.key.slot]
	m := it.msg
	m.Headers = append(append([]protocols.Header(nil), m.Headers...),
		protocols.Header{Key: propRealTopic, Value: []byte(sl.part.Name().String())},
		protocols.Header{Key: propOriginMessageID, Value: []byte(originID(sl, it.entry, it.index, it.size))})
	if m.Value == nil {
		m.Value = []byte{}
	}
	var env protocols.Envelope
	protocols.SetMessageExtras(&env, []protocols.MessageExtras{it.extra})
	batch, err := protocols.AppendBatch(nil, protocols.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []protocols.Message{m}, &d.comp)
	if err != nil {
		return err
	}
	_, err = cs.s.b.Produce(ctx, d.parts[d.route.pick(m.Key)], protocols.ProduceRequest{Envelope: env, Batch: batch})
	return err
}
