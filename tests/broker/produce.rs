//! The producer against a real broker: receipts and their order, batching
//! on and off, every codec read back, partitioned routing, the max message
//! size, flush and close, delayed delivery and exclusive access (Apache
//! only). Messages are read back with `raw_reader`.

use std::time::Duration;

use bytes::Bytes;
use pulsar_wire::MessageId;
use pulsar_wire::compression::Compression;
use pulsar_wire::producer::{AccessMode, HashingScheme, ProducerError, ProducerMessage};

use crate::common::broker::{BrokerKind, BrokerOptions, TestBroker, client, skip_unless};
use crate::common::{guard, unique_topic};
use crate::raw_reader::{Read, read};

const CODECS: [Compression; 4] = [
    Compression::Lz4,
    Compression::Zlib,
    Compression::Zstd,
    Compression::Snappy,
];

fn message(i: usize) -> ProducerMessage {
    ProducerMessage::new(format!("message {i} ").repeat(5))
        .key(format!("key-{}", i % 3))
        .property("index", i.to_string())
        .event_time(1_700_000_000_000 + i as u64)
}

fn expected(i: usize, id: MessageId) -> Read {
    Read {
        id,
        payload: Bytes::from(format!("message {i} ").repeat(5)),
        key: Some(format!("key-{}", i % 3)),
        properties: vec![("index".into(), i.to_string())],
        event_time: Some(1_700_000_000_000 + i as u64),
        deliver_at: None,
    }
}

/// Sends `count` messages pipelined, then awaits every receipt in order.
async fn send_all(producer: &pulsar_wire::producer::Producer, count: usize) -> Vec<MessageId> {
    let mut receipts = Vec::new();
    for i in 0..count {
        receipts.push(producer.send(message(i)).await.expect("queued"));
    }
    let mut ids = Vec::new();
    for receipt in receipts {
        ids.push(receipt.await.expect("receipt"));
    }
    ids
}

#[tokio::test]
async fn pipelined_receipts_resolve_in_order_batched_and_not() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("receipts", async {
        let client = client(&broker).await;
        for batching in [true, false] {
            let topic = unique_topic("receipts");
            let producer = client
                .producer(topic.clone())
                .batching(batching)
                .batching_max_messages(7)
                .create()
                .await
                .expect("producer");
            let ids = send_all(&producer, 50).await;
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");
            if batching {
                assert!(ids.iter().all(|id| id.batch_index >= 0));
                assert!(ids.iter().any(|id| id.batch_index == 6));
            } else {
                assert!(ids.iter().all(|id| id.batch_index == -1));
            }
            let want: Vec<Read> = ids
                .iter()
                .enumerate()
                .map(|(i, id)| expected(i, *id))
                .collect();
            assert_eq!(read(&client, &topic, 50).await, want, "batching {batching}");
            producer.close().await.expect("close");
        }
    })
    .await;
}

#[tokio::test]
async fn every_codec_is_read_back_intact_batched_and_not() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("codecs", async {
        let client = client(&broker).await;
        for codec in CODECS {
            for batching in [true, false] {
                let topic = unique_topic("codec");
                let producer = client
                    .producer(topic.clone())
                    .compression(codec)
                    .batching(batching)
                    .create()
                    .await
                    .expect("producer");
                let ids = send_all(&producer, 12).await;
                let want: Vec<Read> = ids
                    .iter()
                    .enumerate()
                    .map(|(i, id)| expected(i, *id))
                    .collect();
                assert_eq!(
                    read(&client, &topic, 12).await,
                    want,
                    "{codec:?} batching {batching}"
                );
                producer.close().await.expect("close");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn keys_choose_partitions_by_hash_and_the_rest_round_robin() {
    let topic = unique_topic("routed");
    let Some(broker) = TestBroker::start_with(BrokerOptions {
        partitioned_topics: vec![(topic.clone(), 4)],
        ..BrokerOptions::default()
    })
    .await
    else {
        return;
    };
    guard("routing", async {
        let client = client(&broker).await;
        for scheme in [
            HashingScheme::JavaStringHash,
            HashingScheme::Murmur3_32Hash,
            HashingScheme::BoostHash,
        ] {
            let producer = client
                .producer(topic.clone())
                .hashing_scheme(scheme)
                .batching(false)
                .create()
                .await
                .expect("producer");
            assert_eq!(producer.partitions(), 4);
            for i in 0..20 {
                let key = format!("user-{i}");
                let id = producer
                    .send(ProducerMessage::new("k").key(key.clone()))
                    .await
                    .expect("queued")
                    .await
                    .expect("receipt");
                assert_eq!(
                    id.partition as u32,
                    scheme.partition(&key, 4),
                    "{scheme:?} {key}"
                );
            }
            let mut seen = [0; 4];
            for _ in 0..8 {
                let id = producer
                    .send("no key")
                    .await
                    .expect("queued")
                    .await
                    .expect("receipt");
                seen[id.partition as usize] += 1;
            }
            assert_eq!(seen, [2, 2, 2, 2], "round-robin without batching");
            producer.close().await.expect("close");
        }
    })
    .await;
}

#[tokio::test]
async fn a_message_over_the_max_size_is_refused_before_sending() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("max size", async {
        let client = client(&broker).await;
        let topic = unique_topic("big");
        for batching in [true, false] {
            let producer = client
                .producer(topic.clone())
                .batching(batching)
                .create()
                .await
                .expect("producer");
            let max = pulsar_wire::wire::DEFAULT_MAX_MESSAGE_SIZE;
            let err = producer
                .send(vec![7u8; max + 1])
                .await
                .expect("queued")
                .await
                .expect_err("too large");
            assert!(
                matches!(err, ProducerError::MessageTooLarge { size, max: m } if size > m && m == max),
                "{err}"
            );
            // The producer goes on working.
            producer.send("small").await.expect("queued").await.expect("receipt");
            producer.close().await.expect("close");
        }
    })
    .await;
}

#[tokio::test]
async fn flush_sends_a_lingering_batch_and_close_refuses_later_sends() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("flush", async {
        let client = client(&broker).await;
        let producer = client
            .producer(unique_topic("flush"))
            .batching_max_delay(Duration::from_secs(3600))
            .create()
            .await
            .expect("producer");
        let receipt = producer.send("lingering").await.expect("queued");
        producer.flush().await.expect("flush");
        assert_eq!(receipt.await.expect("receipt").batch_index, 0);
        producer.close().await.expect("close");
        assert!(matches!(
            producer.send("late").await,
            Err(ProducerError::Closed)
        ));
    })
    .await;
}

#[tokio::test]
async fn delayed_messages_carry_their_delivery_time_and_arrive() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite delivers delayed messages at once",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("delayed", async {
        let client = client(&broker).await;
        let topic = unique_topic("delayed");
        let producer = client
            .producer(topic.clone())
            .create()
            .await
            .expect("producer");
        producer
            .send(ProducerMessage::new("later").deliver_after(Duration::from_secs(2)))
            .await
            .expect("queued")
            .await
            .expect("receipt");
        let got = read(&client, &topic, 1).await;
        assert_eq!(got[0].payload, Bytes::from_static(b"later"));
        assert!(got[0].deliver_at.is_some());
        assert_eq!(
            got[0].id.batch_index, -1,
            "a delayed message is never batched"
        );
    })
    .await;
}

#[tokio::test]
async fn a_full_producer_sends_its_batch_instead_of_lingering() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("full", async {
        let client = client(&broker).await;
        let producer = client
            .producer(unique_topic("full"))
            .batching_max_delay(Duration::from_secs(3600))
            .max_pending_messages(3)
            .create()
            .await
            .expect("producer");
        // The fourth send waits for room; room comes only if the batch of
        // three goes out without waiting an hour for its linger.
        let mut receipts = Vec::new();
        for i in 0..7 {
            receipts.push(producer.send(format!("m{i}")).await.expect("queued"));
        }
        producer.flush().await.expect("flush");
        for receipt in receipts {
            receipt.await.expect("receipt");
        }
    })
    .await;
}

#[tokio::test]
async fn a_second_exclusive_producer_is_refused() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite has no producer access modes",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("exclusive", async {
        let client = client(&broker).await;
        let topic = unique_topic("exclusive");
        let first = client
            .producer(topic.clone())
            .access_mode(AccessMode::Exclusive)
            .create()
            .await
            .expect("first exclusive producer");
        let second = client
            .producer(topic.clone())
            .access_mode(AccessMode::Exclusive)
            .create()
            .await;
        assert!(
            matches!(second, Err(ProducerError::Create { .. })),
            "{second:?}"
        );
        first.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn a_message_over_the_max_size_only_once_decompressed_is_consumed_whole() {
    // The broker's limit is on what goes over the wire: a compressed
    // message may be much larger once decompressed (as the Java client
    // sends and reads it).
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("decompressed size", async {
        let client = client(&broker).await;
        let max = pulsar_wire::wire::DEFAULT_MAX_MESSAGE_SIZE;
        let big: Vec<u8> = b"0123456789abcdef".repeat((max + max / 2) / 16);
        for codec in CODECS {
            let topic = unique_topic("decompressed");
            let mut consumer = client
                .consumer(topic.clone(), "s")
                .initial_position(pulsar_wire::consumer::InitialPosition::Earliest)
                .subscribe()
                .await
                .expect("subscribe");
            let producer = client
                .producer(topic.clone())
                .compression(codec)
                .create()
                .await
                .expect("producer");
            let id = producer
                .send(big.clone())
                .await
                .expect("queued")
                .await
                .expect("receipt");
            let got = consumer.receive().await.expect("receive");
            assert_eq!(got.id(), id, "{codec:?}");
            assert!(
                got.payload() == big.as_slice(),
                "{codec:?}: {} bytes",
                got.payload().len()
            );
            consumer.ack(&got).await.expect("ack");
            producer.close().await.expect("close");
            consumer.close().await.expect("close");
        }
    })
    .await;
}
