//! Subscription kinds, partitions, readers, seek, the Stream.

use super::*;

#[tokio::test]
async fn a_partitioned_topic_is_one_consumer_over_every_partition() {
    let topic = unique_topic("consume-partitioned");
    let Some(broker) = partitioned(&topic, 3).await else {
        return;
    };
    guard("partitioned", async {
        let client = client(&broker).await;
        let parsed: TopicName = topic.parse().expect("topic");
        let mut c = shared(&client, &topic, "s", 100).await;
        assert_eq!(c.topics().len(), 3);
        for p in 0..3 {
            let name = parsed.partition(p);
            let mut producer = RawProducer::create(&client, name.as_str()).await;
            producer.send(&format!("p{p}")).await;
        }
        let mut seen = BTreeSet::new();
        for m in take(&mut c, 3).await {
            let p = m.id().partition;
            assert_eq!(m.topic(), parsed.partition(p as u32).as_str());
            assert_eq!(text(&m), format!("p{p}"));
            seen.insert(p);
            c.ack(&m).await.expect("ack");
        }
        assert_eq!(seen, BTreeSet::from([0, 1, 2]));
        let err = c.last_message_id().await.expect_err("several partitions");
        assert!(
            matches!(err, ConsumerError::MultipleTopics { count: 3 }),
            "{err}"
        );
    })
    .await;
}

#[tokio::test]
async fn seek_rewinds_the_subscription() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("seek", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-seek");
        let mut producer = RawProducer::create(&client, &topic).await;
        let mut ids = Vec::new();
        for i in 0..5 {
            ids.push(producer.send(&format!("s{i}")).await);
        }
        let mut c = shared(&client, &topic, "s", 100).await;
        for m in take(&mut c, 5).await {
            c.ack(&m).await.expect("ack");
        }
        assert_eq!(
            c.last_message_id().await.expect("last").entry(),
            ids[4].entry()
        );
        c.seek(ids[2]).await.expect("seek");
        let m = c.receive().await.expect("after seek");
        assert_eq!(text(&m), "s3", "reading starts after the target");
    })
    .await;
}

#[tokio::test]
async fn failover_has_one_active_consumer() {
    if skip_on(
        BrokerKind::Lite,
        "pulsar-lite sends no ACTIVE_CONSUMER_CHANGE",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("failover", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-failover");
        let failover = || {
            client
                .consumer(&topic, "f")
                .subscription_type(SubscriptionType::Failover)
                .subscribe()
        };
        let mut first = failover().await.expect("first");
        let mut second = failover().await.expect("second");
        let a = match first.is_active() {
            Some(active) => active,
            None => first.active_changed().await.expect("first told"),
        };
        let b = match second.is_active() {
            Some(active) => active,
            None => second.active_changed().await.expect("second told"),
        };
        assert!(a ^ b, "exactly one active: first {a}, second {b}");
        let (mut standby, active) = if a { (second, first) } else { (first, second) };
        active.close().await.expect("close the active one");
        while standby.is_active() != Some(true) {
            standby.active_changed().await.expect("takes over");
        }
    })
    .await;
}

#[tokio::test]
async fn a_reader_starts_at_an_id_inclusive_or_not() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("reader", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-reader");
        let mut producer = RawProducer::create(&client, &topic).await;
        let mut ids = Vec::new();
        for i in 0..4 {
            ids.push(producer.send(&format!("r{i}")).await);
        }
        let batch = producer.send_batch(&["b0", "b1", "b2"]).await;
        let read_first = |start: MessageId, inclusive: bool| {
            let client = client.clone();
            let topic = topic.clone();
            async move {
                let mut reader = client
                    .reader(&topic)
                    .start_message_id(start)
                    .start_inclusive(inclusive)
                    .create()
                    .await
                    .expect("reader");
                let m = reader.read_next().await.expect("read");
                reader.close().await.expect("close");
                text(&m)
            }
        };
        assert_eq!(read_first(ids[1], true).await, "r1");
        assert_eq!(read_first(ids[1], false).await, "r2");
        assert_eq!(read_first(MessageId::EARLIEST, false).await, "r0");
        let member = batch.entry().with_batch_index(1);
        assert_eq!(read_first(member, true).await, "b1");
        assert_eq!(read_first(member, false).await, "b2");
    })
    .await;
}

#[tokio::test]
async fn stream_try_receive_and_ack_receipts() {
    use futures::StreamExt;
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("stream", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-stream");
        let mut c = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .ack_receipts(true)
            .subscribe()
            .await
            .expect("subscribe");
        assert!(
            c.try_receive().await.expect("open").is_none(),
            "nothing yet"
        );
        let mut producer = RawProducer::create(&client, &topic).await;
        for i in 0..3 {
            producer.send(&format!("t{i}")).await;
        }
        let first = c.next().await.expect("item").expect("message");
        assert_eq!(text(&first), "t0");
        c.ack(&first).await.expect("ack confirmed by the broker");
        let rest: Vec<_> = (&mut c).take(2).collect().await;
        let rest: Vec<String> = rest
            .into_iter()
            .map(|m| text(&m.expect("message")))
            .collect();
        assert_eq!(rest, ["t1", "t2"]);
        c.close().await.expect("close");
        assert!(c.next().await.is_none(), "the stream ends once closed");
    })
    .await;
}

#[tokio::test]
async fn key_shared_keeps_each_key_on_one_consumer_in_order() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("key_shared", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-key-shared");
        let key_shared = || {
            client
                .consumer(&topic, "k")
                .subscription_type(SubscriptionType::KeyShared)
                .initial_position(InitialPosition::Earliest)
                .subscribe()
        };
        let consumers = [
            key_shared().await.expect("first"),
            key_shared().await.expect("second"),
        ];
        let mut producer = RawProducer::create(&client, &topic).await;
        let total = 40;
        for i in 0..total {
            let metadata = proto::MessageMetadata {
                partition_key: Some(format!("key{}", i % 8)),
                ..proto::MessageMetadata::default()
            };
            let body = Bytes::from(format!("key{}/{i:03}", i % 8));
            producer.send_raw(metadata, body, 1).await;
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for (n, mut c) in consumers.into_iter().enumerate() {
            let tx = tx.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let m = c.receive().await.expect("receive");
                    c.ack(&m).await.expect("ack");
                    if tx.send((n, m)).is_err() {
                        return;
                    }
                }
            }));
        }
        let mut owner = std::collections::HashMap::new();
        let mut last = std::collections::HashMap::new();
        for _ in 0..total {
            let (n, m) = rx.recv().await.expect("a message");
            let key = m.key().expect("key").to_owned();
            assert_eq!(
                *owner.entry(key.clone()).or_insert(n),
                n,
                "{key} on one consumer"
            );
            let seq = text(&m);
            if let Some(prev) = last.insert(key.clone(), seq.clone()) {
                assert!(prev < seq, "{key}: {prev} then {seq}");
            }
        }
        for t in tasks {
            t.abort();
        }
    })
    .await;
}

#[tokio::test]
async fn a_list_of_topics_is_one_consumer_and_messages_name_their_topic() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("topic list", async {
        let client = client(&broker).await;
        let (first, second) = (unique_topic("consume-list"), unique_topic("consume-list"));
        let mut c = client
            .consumer(&first, "s")
            .topic(&second)
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("subscribe");
        assert_eq!(c.topics(), [first.clone(), second.clone()]);
        for topic in [&first, &second] {
            RawProducer::create(&client, topic).await.send(topic).await;
        }
        for m in take(&mut c, 2).await {
            assert_eq!(
                m.topic(),
                text(&m),
                "the payload is the topic it was sent to"
            );
            c.ack(&m).await.expect("ack");
        }
    })
    .await;
}
