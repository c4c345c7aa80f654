package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func saramaCodec(name string) sarama.CompressionCodec {
	switch name {
	case "gzip":
		return sarama.CompressionGZIP
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}

// saramaHandler feeds a consumer group's records into a ledger.
type saramaHandler struct{ l *ledger }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.l.add(m.Partition, m.Offset, m.Value)
		s.MarkMessage(m, "")
	}
	return nil
}

// TestKafkaSaramaCodecs: a sarama sync producer writes with every codec
// and a sarama consumer group reads everything back.
func TestKafkaSaramaCodecs(t *testing.T) {
	node := startKafka(t)
	addr := node.KafkaAddr()
	n := recordsPerCase()
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			topic := "sarama-" + codec
			createTopic(t, addr, topic, 3, nil)
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V2_8_0_0
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Compression = saramaCodec(codec)
			cfg.Producer.Partitioner = sarama.NewHashPartitioner
			prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			// Send in batches of 50 so compression has something to work on.
			for i := 0; i < n; i += 50 {
				var msgs []*sarama.ProducerMessage
				for j := i; j < min(i+50, n); j++ {
					msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", j%7)), Value: sarama.ByteEncoder(payload(topic, j))})
				}
				if err := prod.SendMessages(msgs); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
			ccfg := sarama.NewConfig()
			ccfg.Version = sarama.V2_8_0_0
			ccfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			ccfg.Consumer.Group.Session.Timeout = 10 * time.Second
			group, err := sarama.NewConsumerGroup([]string{addr}, "g-"+topic, ccfg)
			if err != nil {
				t.Fatal(err)
			}
			defer group.Close()
			l := newLedger(topic, n)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				for ctx.Err() == nil {
					if err := group.Consume(ctx, []string{topic}, saramaHandler{l}); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for l.count() < n && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil && ctx.Err() == nil {
				t.Errorf("consume: %v", err)
			}
			l.check(t)
		})
	}
}
