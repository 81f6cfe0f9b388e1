//! The client and connection layer against a real broker: connect, lookup,
//! partition metadata, many producers and consumers on one connection,
//! 1000 concurrent requests, and the pool's sharing. Real time only.

use bytes::Bytes;
use futures::future::join_all;
use pulsar_wire::connection::{Connection, ConsumerEvent, ProducerEvent, Response};
use pulsar_wire::ids::SequenceId;
use pulsar_wire::proto::{self, command_subscribe};
use pulsar_wire::wire::{Checksum, Frame, Payload, commands};
use pulsar_wire::{Client, ClientError, TopicName};
use tokio::sync::mpsc;

use crate::common::broker::{BrokerOptions, TestBroker, client};
use crate::common::{guard, init_tracing, unique_topic};

fn topic(name: &str) -> TopicName {
    name.parse().expect("valid topic")
}

#[tokio::test]
async fn connects_looks_up_and_reads_partition_metadata() {
    let partitioned = unique_topic("partitioned");
    let Some(broker) = TestBroker::start_with(BrokerOptions {
        partitioned_topics: vec![(partitioned.clone(), 4)],
        ..BrokerOptions::default()
    })
    .await
    else {
        return;
    };
    guard("client", async {
        let client = client(&broker).await;
        assert_eq!(client.service_url(), broker.service_url());

        let plain = topic(&unique_topic("plain"));
        assert_eq!(
            client
                .partitioned_topic_metadata(&topic(&partitioned))
                .await
                .expect("metadata"),
            4
        );
        assert_eq!(
            client
                .partitioned_topic_metadata(&plain)
                .await
                .expect("metadata"),
            0
        );

        let conn = client.lookup(&plain).await.expect("lookup");
        assert_eq!(
            conn.peer(),
            broker.addr().to_string(),
            "pulsar-lite owns every topic itself"
        );
        assert!(!conn.is_closed());
        // The partitions of a partitioned topic are topics of their own.
        client
            .lookup(&topic(&partitioned).partition(3))
            .await
            .expect("lookup partition");

        client.close().await;
        assert!(conn.is_closed());
        assert!(matches!(
            client.lookup(&plain).await,
            Err(ClientError::Closed)
        ));
    })
    .await;
}

/// One topic's producer and consumer, created with raw requests on `conn`.
pub(crate) struct Pair {
    pub(crate) topic: String,
    pub(crate) receipts: mpsc::UnboundedReceiver<ProducerEvent>,
    pub(crate) messages: mpsc::UnboundedReceiver<ConsumerEvent>,
}

pub(crate) async fn producer_and_consumer(conn: &Connection, topic: String) -> Pair {
    let (ctx, messages) = mpsc::unbounded_channel();
    let consumer = conn.next_consumer_id();
    conn.register_consumer(consumer, ctx)
        .await
        .expect("register consumer");
    let subscribed = conn
        .request("SUBSCRIBE", |id| {
            commands::subscribe(proto::CommandSubscribe {
                topic: topic.clone(),
                subscription: "s".into(),
                sub_type: command_subscribe::SubType::Shared as i32,
                consumer_id: consumer.0,
                request_id: id.0,
                initial_position: Some(command_subscribe::InitialPosition::Earliest as i32),
                ..proto::CommandSubscribe::default()
            })
        })
        .await;
    assert!(
        matches!(subscribed, Ok(Response::Success(_))),
        "{subscribed:?}"
    );
    conn.send_control(commands::flow(consumer, 10))
        .await
        .expect("flow");

    let (ptx, receipts) = mpsc::unbounded_channel();
    let producer = conn.next_producer_id();
    conn.register_producer(producer, ptx)
        .await
        .expect("register producer");
    let created = conn
        .request("PRODUCER", |id| {
            commands::producer(proto::CommandProducer {
                topic: topic.clone(),
                producer_id: producer.0,
                request_id: id.0,
                ..proto::CommandProducer::default()
            })
        })
        .await;
    let name = match created {
        Ok(Response::ProducerSuccess(p)) => p.producer_name,
        other => panic!("PRODUCER: {other:?}"),
    };
    let frame = Frame {
        command: commands::send(producer, SequenceId(0), 1),
        payload: Some(Box::new(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata: proto::MessageMetadata {
                producer_name: name,
                sequence_id: 0,
                publish_time: 1_700_000_000_000,
                ..proto::MessageMetadata::default()
            },
            data: Bytes::from(topic.clone()),
        })),
    };
    conn.send_payload(frame).await.expect("send");
    Pair {
        topic,
        receipts,
        messages,
    }
}

#[tokio::test]
async fn many_producers_and_consumers_share_one_connection() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("many", async {
        let client = client(&broker).await;
        let conn = client
            .lookup(&topic(&unique_topic("many")))
            .await
            .expect("lookup");
        let topics: Vec<String> = (0..25).map(|_| unique_topic("many")).collect();
        let pairs = join_all(topics.into_iter().map(|t| producer_and_consumer(&conn, t))).await;
        for mut pair in pairs {
            match pair.receipts.recv().await {
                Some(ProducerEvent::Receipt {
                    sequence_id,
                    message_id,
                    ..
                }) => {
                    assert_eq!(sequence_id, SequenceId(0), "{}", pair.topic);
                    assert!(message_id.is_some());
                }
                other => panic!("{}: {other:?}", pair.topic),
            }
            match pair.messages.recv().await {
                // Each consumer gets the message of its own topic, nobody else's.
                Some(ConsumerEvent::Message { payload, .. }) => {
                    assert_eq!(payload.data, Bytes::from(pair.topic.clone()));
                }
                other => panic!("{}: {other:?}", pair.topic),
            }
        }
        assert!(!conn.is_closed());
    })
    .await;
}

#[tokio::test]
async fn a_thousand_concurrent_requests_on_one_connection_are_each_answered_correctly() {
    const N: usize = 1000;
    // Distinct topics with distinct partition counts: an answer matched to the
    // wrong request would show the wrong count.
    let topics: Vec<(String, u32)> = (0..N)
        .map(|i| (unique_topic("thousand"), (i % 9) as u32))
        .collect();
    let partitioned = topics.iter().filter(|(_, n)| *n > 0).cloned().collect();
    let Some(broker) = TestBroker::start_with(BrokerOptions {
        partitioned_topics: partitioned,
        ..BrokerOptions::default()
    })
    .await
    else {
        return;
    };
    guard("thousand", async {
        let client = client(&broker).await;
        let conn = client.lookup(&topic(&topics[0].0)).await.expect("lookup");
        let answers = join_all(topics.iter().map(|(name, _)| {
            conn.request("PARTITIONED_METADATA", |id| {
                commands::partitioned_metadata(name, id)
            })
        }))
        .await;
        for ((name, expected), answer) in topics.iter().zip(answers) {
            match answer {
                Ok(Response::PartitionedMetadataResponse(r)) => {
                    assert_eq!(r.partitions(), *expected, "{name}");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        assert_eq!(
            client
                .lookup(&topic(&topics[1].0))
                .await
                .expect("lookup")
                .id(),
            conn.id()
        );
    })
    .await;
}

#[tokio::test]
async fn concurrent_lookups_share_one_pooled_connection() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("pool", async {
        let client = client(&broker).await;
        let names: Vec<TopicName> = (0..50).map(|_| topic(&unique_topic("pool"))).collect();
        let conns = join_all(names.iter().map(|t| client.lookup(t))).await;
        let mut ids: Vec<_> = conns.into_iter().map(|c| c.expect("lookup").id()).collect();
        ids.dedup();
        assert_eq!(ids.len(), 1, "one connection per broker: {ids:?}");
    })
    .await;
}

#[tokio::test]
async fn connections_per_broker_spreads_lookups_over_that_many_connections() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("per broker", async {
        init_tracing();
        let client = Client::builder()
            .service_url(broker.service_url())
            .connections_per_broker(3)
            .build()
            .await
            .expect("client");
        let names: Vec<TopicName> = (0..30).map(|_| topic(&unique_topic("spread"))).collect();
        let conns = join_all(names.iter().map(|t| client.lookup(t))).await;
        let mut ids: Vec<_> = conns.into_iter().map(|c| c.expect("lookup").id()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 3, "{ids:?}");
    })
    .await;
}
