//! OpenTelemetry metrics (cargo feature `otel`), under the Java client's
//! names (`pulsar.client.*`, its `ProducerMetrics` and `ConsumerMetrics`),
//! units and attributes (`pulsar.tenant`, `pulsar.namespace`,
//! `pulsar.topic`, `pulsar.partition`, `pulsar.subscription`), from the
//! meter `org.apache.pulsar.client`.
//!
//! Synchronous instruments, as in Java: each event adds to them where the
//! recorders count it, and the SDK aggregates by attributes. With no meter
//! set, nothing here exists and the recorders skip it with one branch.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};

use crate::client::TopicName;

/// The meter's name, as the Java client's.
pub(crate) const METER_NAME: &str = "org.apache.pulsar.client";

/// The Java client's latency buckets, in seconds.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// The attributes of `topic` (a partition names its partitioned topic and
/// its index), then `extra`.
fn topic_attributes(topic: &str, extra: &[KeyValue]) -> Vec<KeyValue> {
    let mut attrs = Vec::with_capacity(4 + extra.len());
    match TopicName::parse(topic) {
        Ok(name) => {
            let full = name.as_str();
            let (base, partition) = match full.rsplit_once("-partition-") {
                Some((base, n)) => (base, n.parse::<i64>().ok()),
                None => (full, None),
            };
            if let Some(n) = partition {
                attrs.push(KeyValue::new("pulsar.partition", n));
            }
            attrs.push(KeyValue::new("pulsar.topic", base.to_owned()));
            // persistent://tenant/namespace/local
            let path = base.split_once("://").map_or(base, |(_, p)| p);
            let mut parts = path.splitn(3, '/');
            if let (Some(tenant), Some(ns)) = (parts.next(), parts.next()) {
                attrs.push(KeyValue::new("pulsar.namespace", format!("{tenant}/{ns}")));
                attrs.push(KeyValue::new("pulsar.tenant", tenant.to_owned()));
            }
        }
        Err(_) => attrs.push(KeyValue::new("pulsar.topic", topic.to_owned())),
    }
    attrs.extend_from_slice(extra);
    attrs
}

fn with(attrs: &[KeyValue], more: KeyValue) -> Vec<KeyValue> {
    let mut all = attrs.to_vec();
    all.push(more);
    all
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A producer's instruments and attributes.
#[derive(Debug)]
pub(crate) struct ProducerInstruments {
    attrs: Vec<KeyValue>,
    succeeded: Vec<KeyValue>,
    failed: Vec<KeyValue>,
    send_duration: Histogram<f64>,
    send_size: Counter<u64>,
    pending_count: UpDownCounter<i64>,
    pending_size: UpDownCounter<i64>,
    closed: Counter<u64>,
}

impl ProducerInstruments {
    /// The instruments of a producer of `topic`, counted as opened.
    pub(crate) fn new(meter: &Meter, topic: &str) -> Self {
        let attrs = topic_attributes(topic, &[]);
        let opened = meter
            .u64_counter("pulsar.client.producer.opened")
            .with_unit("{session}")
            .with_description("The number of producer sessions opened")
            .build();
        opened.add(1, &attrs);
        Self {
            succeeded: with(&attrs, KeyValue::new("success", true)),
            failed: with(&attrs, KeyValue::new("success", false)),
            send_duration: meter
                .f64_histogram("pulsar.client.producer.message.send.duration")
                .with_unit("s")
                .with_description(
                    "Publish latency experienced by the application, includes client batching time",
                )
                .with_boundaries(LATENCY_BUCKETS.to_vec())
                .build(),
            send_size: meter
                .u64_counter("pulsar.client.producer.message.send.size")
                .with_unit("By")
                .with_description("The number of bytes published")
                .build(),
            pending_count: meter
                .i64_up_down_counter("pulsar.client.producer.message.pending.count")
                .with_unit("{message}")
                .with_description(
                    "The number of messages in the producer internal send queue, waiting to be sent",
                )
                .build(),
            pending_size: meter
                .i64_up_down_counter("pulsar.client.producer.message.pending.size")
                .with_unit("By")
                .with_description(
                    "The size of the messages in the producer internal queue, waiting to sent",
                )
                .build(),
            closed: meter
                .u64_counter("pulsar.client.producer.closed")
                .with_unit("{session}")
                .with_description("The number of producer sessions closed")
                .build(),
            attrs,
        }
    }

    /// A send of `bytes` was queued.
    pub(crate) fn queued(&self, bytes: u64) {
        self.pending_count.add(1, &self.attrs);
        self.pending_size
            .add(i64::try_from(bytes).unwrap_or(i64::MAX), &self.attrs);
    }

    /// A send of `bytes` was answered after `latency`: stored or failed.
    pub(crate) fn answered(&self, latency: Duration, bytes: u64, stored: bool) {
        self.pending_count.add(-1, &self.attrs);
        let size = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.pending_size.add(-size, &self.attrs);
        let attrs = if stored {
            &self.succeeded
        } else {
            &self.failed
        };
        self.send_duration.record(seconds(latency), attrs);
        if stored {
            self.send_size.add(bytes, &self.attrs);
        }
    }
}

impl Drop for ProducerInstruments {
    fn drop(&mut self) {
        self.closed.add(1, &self.attrs);
    }
}

/// A consumer's instruments and attributes.
#[derive(Debug)]
pub(crate) struct ConsumerInstruments {
    attrs: Vec<KeyValue>,
    received_count: Counter<u64>,
    received_size: Counter<u64>,
    ack: Counter<u64>,
    nack: Counter<u64>,
    dlq: Counter<u64>,
    closed: Counter<u64>,
}

impl ConsumerInstruments {
    /// The instruments of a consumer of `topic` on `subscription`, counted
    /// as opened.
    pub(crate) fn new(meter: &Meter, topic: &str, subscription: &str) -> Self {
        let sub = KeyValue::new("pulsar.subscription", subscription.to_owned());
        let attrs = topic_attributes(topic, &[sub]);
        let counter = |name: &'static str, unit: &'static str, what: &'static str| {
            meter
                .u64_counter(name)
                .with_unit(unit)
                .with_description(what)
                .build()
        };
        counter(
            "pulsar.client.consumer.opened",
            "{session}",
            "The number of consumer sessions opened",
        )
        .add(1, &attrs);
        Self {
            received_count: counter(
                "pulsar.client.consumer.message.received.count",
                "{message}",
                "The number of messages explicitly received by the consumer application",
            ),
            received_size: counter(
                "pulsar.client.consumer.message.received.size",
                "By",
                "The number of bytes explicitly received by the consumer application",
            ),
            ack: counter(
                "pulsar.client.consumer.message.ack",
                "{message}",
                "The number of acknowledged messages",
            ),
            nack: counter(
                "pulsar.client.consumer.message.nack",
                "{message}",
                "The number of negatively acknowledged messages",
            ),
            dlq: counter(
                "pulsar.client.consumer.message.dlq",
                "{message}",
                "The number of messages sent to DLQ",
            ),
            closed: counter(
                "pulsar.client.consumer.closed",
                "{session}",
                "The number of consumer sessions closed",
            ),
            attrs,
        }
    }

    pub(crate) fn received(&self, bytes: u64) {
        self.received_count.add(1, &self.attrs);
        self.received_size.add(bytes, &self.attrs);
    }

    pub(crate) fn acked(&self) {
        self.ack.add(1, &self.attrs);
    }

    pub(crate) fn nacked(&self) {
        self.nack.add(1, &self.attrs);
    }

    pub(crate) fn dead_lettered(&self) {
        self.dlq.add(1, &self.attrs);
    }
}

impl Drop for ConsumerInstruments {
    fn drop(&mut self) {
        self.closed.add(1, &self.attrs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_names_its_topic_namespace_tenant_and_index() {
        let attrs = topic_attributes("persistent://acme/orders/in-partition-3", &[]);
        let get = |k: &str| {
            attrs
                .iter()
                .find(|kv| kv.key.as_str() == k)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(get("pulsar.partition").as_deref(), Some("3"));
        assert_eq!(
            get("pulsar.topic").as_deref(),
            Some("persistent://acme/orders/in")
        );
        assert_eq!(get("pulsar.namespace").as_deref(), Some("acme/orders"));
        assert_eq!(get("pulsar.tenant").as_deref(), Some("acme"));
        let short = topic_attributes("t", &[]);
        assert!(short.iter().all(|kv| kv.key.as_str() != "pulsar.partition"));
    }
}
