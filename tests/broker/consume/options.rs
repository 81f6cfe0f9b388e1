//! Consumer options the Java client has: batch index ack, a zero receiver
//! queue, batch receive, out-of-order Key_Shared delivery, and the
//! client's memory limit over the receiver queues.

use super::*;
use pulsar_wire::consumer::BatchReceivePolicy;

/// Batch index ack: members acked one by one stay acked across a restart
/// of the consumer, while the entry as a whole is not acked.
#[tokio::test]
async fn with_batch_index_ack_acked_members_do_not_come_back_after_a_restart() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite acks the whole entry on a batch index ack, so it cannot show members left unacked",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("batch index ack", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-batch-index-ack");
        let mut producer = RawProducer::create(&client, &topic).await;
        let subscribe = || {
            client
                .consumer(&topic, "s")
                .subscription_type(SubscriptionType::Shared)
                .initial_position(InitialPosition::Earliest)
                .batch_index_ack(true)
                .ack_receipts(true)
                .subscribe()
        };
        let mut c = subscribe().await.expect("subscribe");
        producer.send_batch(&["b0", "b1", "b2", "b3"]).await;
        let members = take(&mut c, 4).await;
        for m in [&members[0], &members[2]] {
            c.ack(m).await.expect("member ack confirmed");
        }
        c.close().await.expect("close");

        let mut c = subscribe().await.expect("subscribe again");
        let rest = take(&mut c, 2).await;
        let texts: Vec<String> = rest.iter().map(text).collect();
        assert_eq!(texts, ["b1", "b3"], "members 0 and 2 stayed acked");
        c.ack_all(&rest).await.expect("ack the rest");
        c.close().await.expect("close");

        let mut c = subscribe().await.expect("subscribe a third time");
        producer.send("last").await;
        let m = c.receive().await.expect("receive");
        assert_eq!(text(&m), "last", "the whole entry is acked");
    })
    .await;
}

/// `allow_out_of_order_delivery` reaches the broker: Apache Pulsar shows
/// it in the subscription's stats.
#[tokio::test]
async fn out_of_order_key_shared_delivery_reaches_the_broker() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite has no admin API to show a subscription's Key_Shared settings",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("allow out of order", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-out-of-order");
        let admin = std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL");
        let url = format!(
            "{admin}/admin/v2/{}/stats",
            crate::common::admin::rest_path(&topic)
        );
        for (sub, allow) in [("in-order", false), ("out-of-order", true)] {
            let c = client
                .consumer(&topic, sub)
                .subscription_type(SubscriptionType::KeyShared)
                .allow_out_of_order_delivery(allow)
                .subscribe()
                .await
                .expect("subscribe");
            let stats = crate::common::admin::call("GET", &url, None)
                .await
                .ok("topic stats")
                .json();
            assert_eq!(
                stats["subscriptions"][sub]["allowOutOfOrderDelivery"].as_bool(),
                Some(allow),
                "{stats}"
            );
            c.close().await.expect("close");
        }
    })
    .await;
}

/// A zero receiver queue prefetches nothing: while it handles one message
/// the other consumer of a Shared subscription gets all the rest.
#[tokio::test]
async fn a_zero_queue_consumer_holds_only_the_message_it_asked_for() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("zero queue", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-zero-queue");
        let mut zero = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Shared)
            .receiver_queue_size(0)
            .subscribe()
            .await
            .expect("subscribe");
        let mut producer = RawProducer::create(&client, &topic).await;
        let all: BTreeSet<String> = (0..10).map(|i| format!("m{i}")).collect();
        for t in &all {
            producer.send(t).await;
        }
        let first = zero.receive().await.expect("receive");
        // The zero-queue consumer holds one message; the rest go to `other`.
        let mut other = shared(&client, &topic, "s", 1000).await;
        let rest = take(&mut other, 9).await;
        let mut seen: BTreeSet<String> = rest.iter().map(text).collect();
        assert!(seen.insert(text(&first)), "{} twice", text(&first));
        assert_eq!(seen, all);
        zero.ack(&first).await.expect("ack");
        // And it goes on receiving, one permit per receive.
        producer.send("next").await;
        let next = tokio::select! {
            m = zero.receive() => m.expect("receive"),
            m = other.receive() => m.expect("receive"),
        };
        assert_eq!(text(&next), "next");
    })
    .await;
}

/// A batch reaching a zero-queue consumer closes it with a typed error;
/// the batch stays in the subscription.
#[tokio::test]
async fn a_batch_at_a_zero_queue_consumer_is_a_typed_error_and_is_not_lost() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("zero queue batch", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-zero-queue-batch");
        let mut zero = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Shared)
            .receiver_queue_size(0)
            .subscribe()
            .await
            .expect("subscribe");
        let mut producer = RawProducer::create(&client, &topic).await;
        producer.send_batch(&["b0", "b1"]).await;
        for _ in 0..2 {
            let err = zero.receive().await.expect_err("a batch");
            assert!(
                matches!(err, ConsumerError::BatchOnZeroQueue { .. }),
                "{err}"
            );
            assert!(err.is_closed());
        }
        zero.close().await.expect("close");
        let mut c = shared(&client, &topic, "s", 1000).await;
        let members = take(&mut c, 2).await;
        let texts: Vec<String> = members.iter().map(text).collect();
        assert_eq!(texts, ["b0", "b1"]);
    })
    .await;
}

/// A batch receive returns the messages queued up to its bound, and one
/// `ack_all` acks them all.
#[tokio::test]
async fn a_batch_receive_is_acked_with_one_call() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("batch receive", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-batch-receive");
        // Without a timeout: each batch waits for its count.
        let subscribe = |max| {
            client
                .consumer(&topic, "s")
                .subscription_type(SubscriptionType::Shared)
                .initial_position(InitialPosition::Earliest)
                .batch_receive_policy(BatchReceivePolicy {
                    max_messages: Some(max),
                    max_bytes: None,
                    timeout: None,
                })
                .subscribe()
        };
        let mut c = subscribe(5).await.expect("subscribe");
        let mut producer = RawProducer::create(&client, &topic).await;
        for i in 0..7 {
            producer.send(&format!("m{i}")).await;
        }
        let batch = c.receive_batch().await.expect("batch");
        let texts: Vec<String> = batch.iter().map(text).collect();
        assert_eq!(texts, ["m0", "m1", "m2", "m3", "m4"]);
        c.ack_all(&batch).await.expect("ack all");
        c.close().await.expect("close");

        let mut c = subscribe(3).await.expect("subscribe again");
        producer.send("m7").await;
        let rest = c.receive_batch().await.expect("batch");
        let texts: Vec<String> = rest.iter().map(text).collect();
        assert_eq!(texts, ["m5", "m6", "m7"], "the acked five are gone");
    })
    .await;
}

/// pulsar-lite 0.2.0 ends a dispatch round to a consumer at the first
/// message its connection's write buffer (64 KiB high mark) refuses, and
/// only a FLOW, a publish or a redelivery request starts the next: a
/// consumer whose queue holds a backlog within one FLOW's permits, on a
/// connection the client reads slowly under load, waits for ever (seen
/// with 16 KiB and with 1 KiB messages). The memory-limit tests read such
/// backlogs; they run on Apache Pulsar and the test kit.
const LITE_STALLS_DISPATCH: &str = "pulsar-lite stops dispatching a backlog for good when \
     its write buffer is full at the start of a round, until the next FLOW";

/// With a memory limit far below what the receiver queue could hold, a
/// consumer of big messages still receives every one of them.
#[tokio::test]
async fn big_messages_under_a_small_memory_limit_all_arrive() {
    if skip_on(BrokerKind::Lite, LITE_STALLS_DISPATCH) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let progress = Progress::default();
    guard_progress("memory limit", &progress, async {
        let client = client_builder(&broker)
            .memory_limit(256 * 1024)
            .build()
            .await
            .expect("client");
        let topic = unique_topic("consume-memory-limit");
        let mut c = shared(&client, &topic, "s", 10).await;
        let mut producer = RawProducer::create(&client, &topic).await;
        let big = Bytes::from(vec![7_u8; 100 * 1024]);
        for _ in 0..20 {
            producer
                .send_raw(proto::MessageMetadata::default(), big.clone(), 1)
                .await;
            progress.tick();
        }
        for _ in 0..20 {
            let m = c.receive().await.expect("receive");
            progress.tick();
            assert_eq!(m.payload().len(), big.len());
            c.ack(&m).await.expect("ack");
        }
    })
    .await;
}

/// A consume → produce relay on one client under a small memory limit:
/// the receiver queue may not hold the whole limit while the relay's
/// producer waits for memory (receive, send, await the receipt, ack), so
/// every message gets through.
#[tokio::test]
async fn a_relay_under_a_small_memory_limit_relays_every_message() {
    if skip_on(BrokerKind::Lite, LITE_STALLS_DISPATCH) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let progress = Progress::default();
    guard_progress("relay under the memory limit", &progress, async {
        let feeder = client(&broker).await;
        let (from, to) = (unique_topic("relay-from"), unique_topic("relay-to"));
        let mut producer = RawProducer::create(&feeder, &from).await;
        let body = |i: u32| {
            let mut b = vec![0_u8; 1024];
            b[..4].copy_from_slice(&i.to_be_bytes());
            Bytes::from(b)
        };
        for i in 0..300 {
            producer
                .send_raw(proto::MessageMetadata::default(), body(i), 1)
                .await;
            progress.tick();
        }
        let relay = client_builder(&broker)
            .memory_limit(64 * 1024)
            .build()
            .await
            .expect("client");
        let mut c = shared(&relay, &from, "relay", 1000).await;
        let mut out = shared(&feeder, &to, "check", 1000).await;
        let forward = relay
            .producer(&to)
            .batching(false)
            .create()
            .await
            .expect("producer");
        for _ in 0..300 {
            let m = c.receive().await.expect("receive");
            let receipt = forward.send(m.payload().clone()).await.expect("queued");
            receipt.await.expect("relayed");
            progress.tick();
            c.ack(&m).await.expect("ack");
        }
        for i in 0..300 {
            let m = out.receive().await.expect("receive relayed");
            progress.tick();
            assert_eq!(m.payload()[..], body(i)[..], "relayed in order, whole");
        }
    })
    .await;
}
