//! The consumer against a real broker: Shared spreading, ack semantics
//! (checked by closing, reopening and seeing what remains), batch member
//! acks, cumulative ack, subscription kinds, readers. Messages are produced
//! with raw frames through a `Connection` (the producer is another layer's
//! work).

mod acks;
mod close;
mod dead_letter;
mod delivery;
mod kinds;
mod options;
mod outcomes;
mod random_run;
mod reader;
mod receipts;
mod redelivery;
mod redrive;
mod retry;
mod rewind;
mod seek;

use std::collections::BTreeSet;

use bytes::{Bytes, BytesMut};
use pulsar_wire::connection::{Connection, ProducerEvent, Response};
use pulsar_wire::consumer::{Consumer, InitialPosition, SubscriptionType};
use pulsar_wire::ids::{ProducerId, SequenceId};
use pulsar_wire::proto::{self, KeyValue, SingleMessageMetadata};
use pulsar_wire::wire::{Checksum, Frame, Payload, batch, commands};
use pulsar_wire::{Client, ConsumerError, MessageId, TopicName};
use tokio::sync::mpsc;

pub(super) use crate::common::broker::client;
use crate::common::broker::{
    BrokerKind, BrokerOptions, TestBroker, client_builder, skip_on, skip_unless,
};
use crate::common::{Progress, guard, guard_progress, unique_topic};

/// A producer made of raw frames: each send waits for its receipt.
pub(super) struct RawProducer {
    conn: Connection,
    id: ProducerId,
    name: String,
    sequence: u64,
    receipts: mpsc::UnboundedReceiver<ProducerEvent>,
}

impl RawProducer {
    pub(super) async fn create(client: &Client, topic: &str) -> Self {
        let parsed: TopicName = topic.parse().expect("topic");
        let conn = client.lookup(&parsed).await.expect("lookup");
        let (tx, receipts) = mpsc::unbounded_channel();
        let id = conn.next_producer_id();
        conn.register_producer(id, tx).await.expect("register");
        let answer = conn
            .request("PRODUCER", |request| {
                commands::producer(proto::CommandProducer {
                    topic: topic.to_owned(),
                    producer_id: id.0,
                    request_id: request.0,
                    ..proto::CommandProducer::default()
                })
            })
            .await;
        let name = match answer {
            Ok(Response::ProducerSuccess(p)) => p.producer_name,
            other => panic!("PRODUCER: {other:?}"),
        };
        Self {
            conn,
            id,
            name,
            sequence: 0,
            receipts,
        }
    }

    pub(super) async fn send_raw(
        &mut self,
        metadata: proto::MessageMetadata,
        data: Bytes,
        n: i32,
    ) -> MessageId {
        let sequence = SequenceId(self.sequence);
        self.sequence += n as u64;
        let frame = Frame {
            command: commands::send(self.id, sequence, n),
            payload: Some(Box::new(Payload {
                broker_entry_metadata: None,
                checksum: Checksum::Valid,
                metadata: proto::MessageMetadata {
                    producer_name: self.name.clone(),
                    sequence_id: sequence.0,
                    publish_time: 1_700_000_000_000,
                    ..metadata
                },
                data,
            })),
        };
        self.conn.send_payload(frame).await.expect("send");
        match self.receipts.recv().await {
            Some(ProducerEvent::Receipt {
                message_id: Some(id),
                ..
            }) => id,
            other => panic!("receipt: {other:?}"),
        }
    }

    /// One plain message with `text` as payload and key.
    pub(super) async fn send(&mut self, text: &str) -> MessageId {
        let metadata = proto::MessageMetadata {
            partition_key: Some(text.to_owned()),
            properties: vec![KeyValue {
                key: "text".into(),
                value: text.into(),
            }],
            ..proto::MessageMetadata::default()
        };
        self.send_raw(metadata, Bytes::from(text.to_owned()), 1)
            .await
    }

    /// One batch whose members carry `texts`.
    pub(super) async fn send_batch(&mut self, texts: &[&str]) -> MessageId {
        let mut data = BytesMut::new();
        for text in texts {
            let meta = SingleMessageMetadata {
                payload_size: text.len() as i32,
                partition_key: Some((*text).to_owned()),
                ..SingleMessageMetadata::default()
            };
            batch::write_member(&meta, text.as_bytes(), &mut data);
        }
        let n = texts.len() as i32;
        let metadata = proto::MessageMetadata {
            num_messages_in_batch: Some(n),
            ..proto::MessageMetadata::default()
        };
        self.send_raw(metadata, data.freeze(), n).await
    }
}

/// A broker on which `topic` has `partitions` partitions; `None` when the
/// test is skipped for want of one (see [`TestBroker::start`]).
pub(super) async fn partitioned(topic: &str, partitions: u32) -> Option<TestBroker> {
    TestBroker::start_with(BrokerOptions {
        partitioned_topics: vec![(topic.to_owned(), partitions)],
        ..BrokerOptions::default()
    })
    .await
}

pub(super) async fn shared(client: &Client, topic: &str, sub: &str, queue: u32) -> Consumer {
    client
        .consumer(topic, sub)
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .receiver_queue_size(queue)
        .subscribe()
        .await
        .expect("subscribe")
}

pub(super) fn text(m: &pulsar_wire::Message) -> String {
    String::from_utf8(m.payload().to_vec()).expect("utf-8")
}

/// Receives `n` messages and returns their texts (acking none).
pub(super) async fn take(consumer: &mut Consumer, n: usize) -> Vec<pulsar_wire::Message> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(consumer.receive().await.expect("receive"));
    }
    out
}
