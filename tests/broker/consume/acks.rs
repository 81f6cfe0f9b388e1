//! Acks: what remains after closing and reopening.

use super::*;

#[tokio::test]
async fn shared_spreads_and_acked_messages_do_not_come_back() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("shared", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-shared");
        let mut a = shared(&client, &topic, "s", 4).await;
        let mut b = shared(&client, &topic, "s", 4).await;
        let mut producer = RawProducer::create(&client, &topic).await;
        let all: BTreeSet<String> = (0..20).map(|i| format!("m{i:02}")).collect();
        for t in &all {
            producer.send(t).await;
        }
        // `a` takes 14 and stops: with a queue of 4 the broker can have
        // sent it at most 18, so `b` must get the other messages.
        let from_a = take(&mut a, 14).await;
        let from_b = take(&mut b, 2).await;
        let mut seen = BTreeSet::new();
        for m in from_a.iter().chain(&from_b) {
            assert!(seen.insert(text(m)), "{} delivered twice", text(m));
            assert_eq!(m.key(), Some(&*text(m)));
            assert_eq!(m.properties()["text"], text(m));
            assert_eq!(m.topic(), topic);
            assert_eq!(m.redelivery_count(), 0);
        }
        for m in &from_a {
            a.ack(m).await.expect("ack");
        }
        for m in &from_b {
            b.ack(m).await.expect("ack");
        }
        a.close().await.expect("close");
        b.close().await.expect("close");
        assert!(matches!(a.receive().await, Err(ConsumerError::Closed)));

        // Reopen: exactly the 4 unacked come back, then a new message.
        let mut c = shared(&client, &topic, "s", 1000).await;
        producer.send("sentinel").await;
        let mut rest = BTreeSet::new();
        loop {
            let m = c.receive().await.expect("receive");
            if text(&m) == "sentinel" {
                break;
            }
            assert!(rest.insert(text(&m)), "{} twice", text(&m));
        }
        let expected: BTreeSet<String> = all.difference(&seen).cloned().collect();
        assert_eq!(rest, expected, "what remains after acking 16 of 20");
    })
    .await;
}

#[tokio::test]
async fn acking_one_batch_member_keeps_its_siblings() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("batch member ack", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-batch");
        let mut producer = RawProducer::create(&client, &topic).await;
        let entry = producer.send_batch(&["b0", "b1", "b2"]).await;
        let mut c = shared(&client, &topic, "s", 1000).await;
        let members = take(&mut c, 3).await;
        for (i, m) in members.iter().enumerate() {
            assert_eq!(m.id().entry(), entry.entry());
            assert_eq!(m.id().batch_index, i as i32);
            assert_eq!(text(m), format!("b{i}"));
            assert_eq!(m.key(), Some(&*format!("b{i}")));
        }
        c.ack(&members[1]).await.expect("ack");
        c.close().await.expect("close");

        // The siblings are still there (b1 may come again with them).
        let mut c = shared(&client, &topic, "s", 1000).await;
        producer.send("sentinel").await;
        let mut again = BTreeSet::new();
        let mut back = Vec::new();
        loop {
            let m = c.receive().await.expect("receive");
            if text(&m) == "sentinel" {
                c.ack(&m).await.expect("ack");
                break;
            }
            again.insert(text(&m));
            back.push(m);
        }
        assert!(again.contains("b0") && again.contains("b2"), "{again:?}");
        for m in &back {
            c.ack(m).await.expect("ack");
        }
        c.close().await.expect("close");

        // Now every member is acked: nothing comes before a new message.
        let mut c = shared(&client, &topic, "s", 1000).await;
        producer.send("last").await;
        let m = c.receive().await.expect("receive");
        assert_eq!(text(&m), "last");
    })
    .await;
}

#[tokio::test]
async fn cumulative_ack_covers_everything_up_to_the_message() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("cumulative", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-cumulative");
        let mut producer = RawProducer::create(&client, &topic).await;
        // Produced before anyone subscribes, one at a time: pulsar-lite's
        // duplicate dispatch on Exclusive needs sends in flight while a
        // consumer tails the topic.
        for i in 0..10 {
            producer.send(&format!("c{i}")).await;
        }
        let exclusive = |client: &Client| {
            client
                .consumer(&topic, "x")
                .initial_position(InitialPosition::Earliest)
                .subscribe()
        };
        let mut c = exclusive(&client).await.expect("subscribe");
        let mut got = Vec::new();
        while got.len() < 7 {
            let m = c.receive().await.expect("receive");
            // Tolerate a duplicate delivery (pulsar-lite), never a gap.
            if got.iter().all(|g: &pulsar_wire::Message| g.id() != m.id()) {
                got.push(m);
            }
        }
        let texts: Vec<String> = got.iter().map(text).collect();
        assert_eq!(texts, (0..7).map(|i| format!("c{i}")).collect::<Vec<_>>());
        c.ack_cumulative(&got[5]).await.expect("cumulative ack");
        c.close().await.expect("close");

        let mut c = exclusive(&client).await.expect("subscribe again");
        let m = c.receive().await.expect("receive");
        assert_eq!(text(&m), "c6", "everything up to c5 is acked");
    })
    .await;
}

#[tokio::test]
async fn cumulative_ack_on_shared_is_caller_misuse() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("cumulative on shared", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-misuse");
        let mut producer = RawProducer::create(&client, &topic).await;
        producer.send("x").await;
        let mut c = shared(&client, &topic, "s", 10).await;
        let m = c.receive().await.expect("receive");
        let err = c.ack_cumulative(&m).await.expect_err("refused");
        assert!(
            matches!(
                err,
                ConsumerError::CumulativeAckNotAllowed {
                    subscription: SubscriptionType::Shared
                }
            ),
            "{err}"
        );
        assert!(err.is_misuse());
        c.ack(&m).await.expect("individual ack works");
    })
    .await;
}

#[tokio::test]
async fn bad_settings_are_typed_errors_before_any_io() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("settings", async {
        let client = client(&broker).await;
        let err = client
            .consumer("t", "")
            .subscribe()
            .await
            .expect_err("empty");
        assert!(matches!(err, ConsumerError::EmptySubscription), "{err}");
        let err = client
            .consumer("t", "s")
            .topic("u")
            .receiver_queue_size(0)
            .subscribe()
            .await
            .expect_err("zero queue on two topics");
        assert!(
            matches!(err, ConsumerError::ZeroQueueNeedsOneTopic { topics: 2 }),
            "{err}"
        );
        let err = client
            .consumer("a/b", "s")
            .subscribe()
            .await
            .expect_err("bad topic");
        assert!(matches!(err, ConsumerError::InvalidTopic(_)), "{err}");
    })
    .await;
}

#[tokio::test]
async fn unsubscribe_deletes_the_subscription_and_last_message_id_names_the_tail() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("unsubscribe", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-unsubscribe");
        let mut producer = RawProducer::create(&client, &topic).await;
        let c = shared(&client, &topic, "gone", 10).await;
        let old = producer.send("old").await;
        assert_eq!(
            c.last_message_id().await.expect("last id").entry(),
            old.entry()
        );
        c.unsubscribe().await.expect("unsubscribe");
        c.close()
            .await
            .expect("closing after unsubscribe does nothing");

        // A new subscription of that name starts at the latest message: the
        // unacked "old" went with the deleted one.
        let mut c = client
            .consumer(&topic, "gone")
            .subscription_type(SubscriptionType::Shared)
            .subscribe()
            .await
            .expect("subscribe again");
        producer.send("new").await;
        assert_eq!(text(&c.receive().await.expect("receive")), "new");
    })
    .await;
}

/// A backlog many times the receiver queue is consumed to its end: permits
/// are refilled as the application takes messages, so the broker never
/// runs dry while messages remain.
#[tokio::test]
async fn a_backlog_many_times_the_queue_is_consumed_to_the_end() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("backlog", async {
        let client = client(&broker).await;
        let topic = unique_topic("backlog");
        let producer = client
            .producer(topic.clone())
            .batching(false)
            .create()
            .await
            .expect("producer");
        let mut receipts = Vec::new();
        for i in 0..5000 {
            receipts.push(
                producer
                    .send(format!("m{i:05}{}", "x".repeat(1000)))
                    .await
                    .expect("send"),
            );
        }
        for r in receipts {
            r.await.expect("receipt");
        }
        let mut consumer = shared(&client, &topic, "s", 100).await;
        let mut seen = BTreeSet::new();
        while seen.len() < 5000 {
            let m = consumer.receive().await.expect("receive");
            seen.insert(text(&m));
            consumer.ack(&m).await.expect("ack");
        }
        assert_eq!(seen.len(), 5000);
    })
    .await;
}

/// Issue 5 on a real broker: members acked with batch index ack (here by a
/// raw consumer, as another client would) are left out when the entry is
/// redelivered, with an `ack_set`; acking the members that do come must
/// ack the entry, so nothing is left.
#[tokio::test]
async fn a_batch_redelivered_with_an_ack_set_is_done_once_the_rest_is_acked() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite acks the whole entry on a batch index ack, so it never redelivers with an ack_set",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("redelivery with an ack_set", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-ack-set");
        let mut producer = RawProducer::create(&client, &topic).await;
        let entry = producer.send_batch(&["b0", "b1", "b2", "b3"]).await;
        ack_members_raw(&client, &topic, entry.entry(), 0b1010).await;

        let mut c = shared(&client, &topic, "s", 1000).await;
        let rest = take(&mut c, 2).await;
        let texts: Vec<String> = rest.iter().map(text).collect();
        assert_eq!(texts, ["b1", "b3"], "members 0 and 2 were acked");
        for m in &rest {
            c.ack(m).await.expect("ack");
        }
        c.close().await.expect("close");

        let mut c = shared(&client, &topic, "s", 1000).await;
        producer.send("last").await;
        let m = c.receive().await.expect("receive");
        assert_eq!(text(&m), "last", "the entry was acked as a whole");
    })
    .await;
}

/// Subscribes to `topic` as subscription "s" with raw frames, waits for
/// `entry`, acks it with `ack_set` (bit set = member still unacked) and
/// closes the consumer.
async fn ack_members_raw(client: &Client, topic: &str, entry: MessageId, ack_set: i64) {
    use pulsar_wire::connection::ConsumerEvent;
    use pulsar_wire::proto::command_ack::AckType;

    let (conn, id, mut events) = crate::raw_reader::subscribe_raw(client, topic, "s", 100).await;
    loop {
        match events.recv().await {
            Some(ConsumerEvent::Message { message_id, .. }) if message_id.entry() == entry => break,
            Some(_) => {}
            None => panic!("mailbox ended before the batch arrived"),
        }
    }
    let mut acked = entry.to_proto();
    acked.ack_set = vec![ack_set];
    conn.send_control(commands::ack(id, [acked], AckType::Individual, None))
        .await
        .expect("ack");
    conn.request("CLOSE_CONSUMER", |request| {
        commands::close_consumer(id, request)
    })
    .await
    .expect("close consumer");
    conn.unregister_consumer(id).await;
}

#[tokio::test]
async fn acks_with_receipts_after_a_topic_unload_are_not_lost() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite has no topic unload (no broker-initiated close)",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("acks after an unload", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-unload");
        let mut producer = RawProducer::create(&client, &topic).await;
        let texts: Vec<String> = (0..50).map(|i| format!("u{i:02}")).collect();
        for t in &texts {
            producer.send(t).await;
        }
        let mut consumer = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .ack_receipts(true)
            .subscribe()
            .await
            .expect("subscribe");
        let first = take(&mut consumer, 50).await;
        // The broker closes the consumer; it subscribes again and the broker
        // dispatches the 50 unacked messages to the new consumer.
        broker.unload(&topic).await;
        for m in &first {
            consumer.ack(m).await.expect("ack confirmed by the broker");
        }
        // The unload closed the raw producer too: a fresh one for the end.
        let mut producer = RawProducer::create(&client, &topic).await;
        producer.send("sentinel").await;
        loop {
            let m = consumer.receive().await.expect("receive");
            let t = text(&m);
            assert!(!texts.contains(&t), "{t} came back although it was acked");
            if t == "sentinel" {
                break;
            }
        }
        consumer.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn a_chunked_message_acked_after_its_topic_was_unloaded_leaves_no_chunk_behind() {
    if skip_unless(BrokerKind::Apache, "pulsar-lite cannot unload a topic") {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("chunked ack across an unload", async {
        let client = client(&broker).await;
        let topic = unique_topic("chunked-unload");
        let mut consumer = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Shared)
            .ack_receipts(true)
            .subscribe()
            .await
            .expect("subscribe");
        let producer = client
            .producer(&topic)
            .chunking(true)
            .create()
            .await
            .expect("producer");
        // Over the broker's 5 MiB message size: three chunks.
        let payload: Vec<u8> = (0..12 << 20).map(|i| i as u8).collect();
        let sent = producer.send(payload.clone()).await.expect("queued");
        sent.await.expect("stored");
        let m = consumer.receive().await.expect("receive");
        assert!(m.payload()[..] == payload[..], "the whole message");
        // The subscription moves to a new consumer before the ack.
        broker.unload(&topic).await;
        consumer.ack(&m).await.expect("ack confirmed");
        let admin = std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL");
        let left = crate::common::admin::subscription_backlog(&admin, &topic, "s").await;
        assert_eq!(left, 0, "chunks left unacked");
        consumer.close().await.expect("close");
        producer.close().await.expect("close");
    })
    .await;
}

/// The metadata of chunk `chunk_id` of a message "x" in two chunks of two
/// bytes each.
fn chunk_of_x(chunk_id: i32) -> proto::MessageMetadata {
    proto::MessageMetadata {
        uuid: Some("x".into()),
        chunk_id: Some(chunk_id),
        num_chunks_from_msg: Some(2),
        total_chunk_msg_size: Some(4),
        ..proto::MessageMetadata::default()
    }
}

// Two producers, one chunking, on an Exclusive subscription with
// cumulative acks: a cumulative ack of a message stored between a chunked
// message's chunks leaves it to come whole, as the Java client delivers it
// (at its last chunk's position).
#[tokio::test]
async fn a_cumulative_ack_between_the_chunks_of_a_message_leaves_it_to_come_whole() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("cumulative ack between chunks", async {
        let client = client(&broker).await;
        let topic = unique_topic("cumulative-between-chunks");
        let mut consumer = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Exclusive)
            .subscribe()
            .await
            .expect("subscribe");
        let mut chunking = RawProducer::create(&client, &topic).await;
        let mut other = RawProducer::create(&client, &topic).await;
        let first = chunking
            .send_raw(chunk_of_x(0), Bytes::from_static(b"x0"), 1)
            .await;
        other.send("m").await;
        let m = consumer.receive().await.expect("m");
        assert_eq!(text(&m), "m");
        consumer.ack_cumulative(&m).await.expect("ack m");
        let last = chunking
            .send_raw(chunk_of_x(1), Bytes::from_static(b"x1"), 1)
            .await;
        let x = consumer.receive().await.expect("x, whole");
        assert_eq!(&x.payload()[..], b"x0x1");
        // Known by its last chunk, its first beside it: after m.
        assert_eq!((x.id(), x.id().first_chunk()), (last, Some(first)));
        assert!(m.id() < x.id(), "ids handed out rise");
        consumer.ack_cumulative(&x).await.expect("ack x");
        consumer.close().await.expect("close");

        // A reader started at x, inclusive, reads it whole: the broker
        // starts at its first chunk.
        let mut reader = client
            .reader(&topic)
            .start_message_id(x.id())
            .start_inclusive(true)
            .create()
            .await
            .expect("reader");
        let read = reader.read_next().await.expect("x again");
        assert_eq!((read.id(), &read.payload()[..]), (x.id(), &b"x0x1"[..]));
        reader.close().await.expect("close");

        // Everything is acked: a new consumer finds nothing, whatever
        // comes after.
        let mut again = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Exclusive)
            .subscribe()
            .await
            .expect("subscribe again");
        let after = other.send("after").await;
        assert!(after > last);
        let next = again.receive().await.expect("the next message");
        assert_eq!(text(&next), "after");
    })
    .await;
}

/// An Exclusive consumer of `topic` on subscription "s".
async fn exclusive_consumer(client: &Client, topic: &str) -> Consumer {
    client
        .consumer(topic, "s")
        .subscription_type(SubscriptionType::Exclusive)
        .subscribe()
        .await
        .expect("subscribe")
}

/// Stores the first chunk of "x", then "m" from a producer of its own;
/// returns the chunking producer, for the last chunk.
async fn first_chunk_of_x_then_m(client: &Client, topic: &str) -> RawProducer {
    let mut chunking = RawProducer::create(client, topic).await;
    let mut other = RawProducer::create(client, topic).await;
    chunking
        .send_raw(chunk_of_x(0), Bytes::from_static(b"x0"), 1)
        .await;
    other.send("m").await;
    chunking
}

// Beyond the Java client: a cumulative ack of a message stored between a
// chunked message's chunks stops short of the first chunk until the
// message is handed out. A consumer closed before the last chunk came
// leaves the whole message to the next one (which gets the acked message
// again too: a duplicate, never a loss). The Java client acks past the
// first chunk, and the next consumer gets the last chunk alone.
#[tokio::test]
async fn a_consumer_closed_between_a_cumulative_ack_and_a_last_chunk_leaves_the_message_whole() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("cumulative ack, close, last chunk", async {
        let client = client(&broker).await;
        let topic = unique_topic("cumulative-close-chunks");
        let exclusive = || exclusive_consumer(&client, &topic);
        let mut consumer = exclusive().await;
        let mut chunking = first_chunk_of_x_then_m(&client, &topic).await;
        let m = consumer.receive().await.expect("m");
        assert_eq!(text(&m), "m");
        consumer.ack_cumulative(&m).await.expect("ack m");
        consumer.close().await.expect("close");
        chunking
            .send_raw(chunk_of_x(1), Bytes::from_static(b"x1"), 1)
            .await;

        let mut again = exclusive().await;
        let m_again = again.receive().await.expect("m again");
        assert_eq!(text(&m_again), "m");
        let x = again.receive().await.expect("x, whole");
        assert_eq!(&x.payload()[..], b"x0x1");
        again.ack_cumulative(&x).await.expect("ack x");
        again.close().await.expect("close");
    })
    .await;
}

// Beyond the Java client: a chunked message handed out but not acked yet
// keeps a cumulative ack of a message stored between its chunks short of
// its first chunk. The application acks `m` (it has not finished with
// `x`) and the consumer closes: the next consumer gets `x` whole (and `m`
// again: a duplicate, never a loss). The Java client acks past the first
// chunk, and the next consumer gets the last chunk alone.
#[tokio::test]
async fn a_consumer_closed_holding_a_chunked_message_after_an_ack_between_its_chunks_leaves_it_whole()
 {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("cumulative ack between chunks, message held", async {
        let client = client(&broker).await;
        let topic = unique_topic("cumulative-held-chunks");
        let exclusive = || exclusive_consumer(&client, &topic);
        let mut consumer = exclusive().await;
        let mut chunking = first_chunk_of_x_then_m(&client, &topic).await;
        chunking
            .send_raw(chunk_of_x(1), Bytes::from_static(b"x1"), 1)
            .await;
        let m = consumer.receive().await.expect("m");
        assert_eq!(text(&m), "m");
        let x = consumer.receive().await.expect("x, whole");
        assert_eq!(&x.payload()[..], b"x0x1");
        consumer.ack_cumulative(&m).await.expect("ack m");
        consumer.close().await.expect("close");

        let mut again = exclusive().await;
        let m_again = again.receive().await.expect("m again");
        assert_eq!(text(&m_again), "m");
        let x_again = again.receive().await.expect("x, whole again");
        assert_eq!(&x_again.payload()[..], b"x0x1");
        again.ack_cumulative(&x_again).await.expect("ack x");
        again.close().await.expect("close");
    })
    .await;
}
