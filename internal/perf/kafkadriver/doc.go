// Package kafkadriver is the perf.Driver for the Kafka protocol, over
// franz-go's kgo client: the client `tern bench --protocol kafka` uses
// against tern, and the comparison runner uses against every Kafka peer.
//
// It must stay a thin adapter: producer and consumer settings are the
// client's defaults except where a setting is named in Config, so figures
// reflect what an application with that configuration sees.
package kafkadriver
