//! A raw reader for the real-broker tests: subscribes through
//! `wire::commands` and unpacks compression and batches with the crate's own
//! codec functions, so what a producer wrote can be compared exactly.

use bytes::Bytes;
use pulsar_wire::compression::Compression;
use pulsar_wire::connection::{Connection, ConsumerEvent};
use pulsar_wire::ids::ConsumerId;
use pulsar_wire::proto::{self, command_subscribe};
use pulsar_wire::wire::{batch, commands};
use pulsar_wire::{Client, MessageId, TopicName};
use tokio::sync::mpsc;

/// Subscribes to `topic` as the Shared `subscription` from the earliest
/// message with raw frames and grants `permits`; returns the connection,
/// the consumer id and its mailbox.
pub(crate) async fn subscribe_raw(
    client: &Client,
    topic: &str,
    subscription: &str,
    permits: u32,
) -> (
    Connection,
    ConsumerId,
    mpsc::UnboundedReceiver<ConsumerEvent>,
) {
    let name: TopicName = topic.parse().expect("topic");
    let conn = client.lookup(&name).await.expect("lookup");
    let id = conn.next_consumer_id();
    let (mailbox, events) = mpsc::unbounded_channel();
    conn.register_consumer(id, mailbox).await.expect("register");
    conn.request("SUBSCRIBE", |request| {
        commands::subscribe(proto::CommandSubscribe {
            topic: topic.to_owned(),
            subscription: subscription.into(),
            sub_type: command_subscribe::SubType::Shared as i32,
            consumer_id: id.0,
            request_id: request.0,
            initial_position: Some(command_subscribe::InitialPosition::Earliest as i32),
            ..proto::CommandSubscribe::default()
        })
    })
    .await
    .expect("subscribe");
    conn.send_control(commands::flow(id, permits))
        .await
        .expect("flow");
    (conn, id, events)
}

/// One message as a consumer sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Read {
    pub(crate) id: MessageId,
    pub(crate) payload: Bytes,
    pub(crate) key: Option<String>,
    pub(crate) properties: Vec<(String, String)>,
    pub(crate) event_time: Option<u64>,
    pub(crate) deliver_at: Option<i64>,
}

/// Subscribes (Shared, from the earliest) and reads `n` messages, unpacking
/// compression and batches with the crate's own codec functions.
pub(crate) async fn read(client: &Client, topic: &str, n: usize) -> Vec<Read> {
    let (_conn, _id, mut events) = subscribe_raw(client, topic, "reader", 10_000).await;
    let mut out = Vec::new();
    while out.len() < n {
        let Some(ConsumerEvent::Message {
            message_id,
            payload,
            ..
        }) = events.recv().await
        else {
            panic!("consumer mailbox ended before {n} messages");
        };
        let meta = payload.metadata;
        let codec = Compression::from_proto(meta.compression.unwrap_or(0)).expect("codec");
        let raw = codec
            .decompress(payload.data, meta.uncompressed_size.unwrap_or(0), 8 << 20)
            .expect("decompress");
        match meta.num_messages_in_batch {
            Some(count) => {
                for member in batch::members(raw, count) {
                    let m = member.expect("member");
                    out.push(Read {
                        id: message_id.with_batch_index(m.index),
                        payload: m.payload,
                        key: m.metadata.partition_key,
                        properties: m
                            .metadata
                            .properties
                            .into_iter()
                            .map(|kv| (kv.key, kv.value))
                            .collect(),
                        event_time: m.metadata.event_time,
                        deliver_at: meta.deliver_at_time,
                    });
                }
            }
            None => out.push(Read {
                id: message_id,
                payload: raw,
                key: meta.partition_key,
                properties: meta
                    .properties
                    .into_iter()
                    .map(|kv| (kv.key, kv.value))
                    .collect(),
                event_time: meta.event_time,
                deliver_at: meta.deliver_at_time,
            }),
        }
    }
    out
}
