//! Topics that change under producers and consumers: a partitioned topic
//! grown through the admin API while producing and consuming (every
//! message of the new partitions is consumed), and a pattern consumer that
//! joins a topic created after it subscribed (Apache Pulsar's topic-list
//! watcher tells it). pulsar-lite can neither grow a topic nor list a
//! namespace: there a pattern consumer fails with a typed timeout.

use std::collections::BTreeSet;
use std::time::Duration;

use pulsar_wire::consumer::Message;
use pulsar_wire::consumer::{Consumer, InitialPosition, SubscriptionType};
use pulsar_wire::{Client, MessageId};

use crate::common::broker::{BrokerKind, TestBroker, client, skip_unless};
use crate::common::{
    FIRING_TIMEOUT, admin, assert_listing_timed_out, guard, guard_for, init_tracing, unique_topic,
};

/// Short so the test sees the change soon; the defaults are 60 s.
const CHECK: Duration = Duration::from_millis(500);

fn admin_url() -> String {
    std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL")
}

#[tokio::test]
async fn a_topic_grown_from_two_to_four_partitions_is_produced_to_and_consumed_whole() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite cannot add partitions to a topic (no admin API)",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard_for("partitions added", Duration::from_secs(120), async {
        init_tracing();
        let client = client(&broker).await;
        let topic = unique_topic("grow");
        admin::create_partitioned_topic(&admin_url(), &topic, 2).await;
        let mut consumer = client
            .consumer(&topic, "grow")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .auto_update_partitions_interval(CHECK)
            .subscribe()
            .await
            .expect("subscribe");
        let producer = client
            .producer(&topic)
            .batching(false)
            .auto_update_partitions_interval(CHECK)
            .create()
            .await
            .expect("producer");
        assert_eq!(producer.partitions(), 2);
        // Each message is consumed as it comes, while producing goes on:
        // every one exactly once.
        let mut sent = BTreeSet::new();
        let mut received: BTreeSet<MessageId> = BTreeSet::new();
        let mut i = 0;
        loop {
            let receipt = producer.send(format!("m{i}")).await.expect("queued");
            sent.insert(receipt.await.expect("stored"));
            i += 1;
            while let Some(msg) = consumer.try_receive().await.expect("receive") {
                once(&mut received, &msg);
                consumer.ack(&msg).await.expect("ack");
            }
            if i == 20 {
                admin::update_partitioned_topic(&admin_url(), &topic, 4).await;
            }
            // Producing goes on until the producer noticed the new
            // partitions and 20 messages went to them.
            if producer.partitions() == 4
                && sent.iter().filter(|id| id.partition >= 2).count() >= 20
            {
                break;
            }
        }
        while received.len() < sent.len() {
            let msg = consumer.receive().await.expect("message");
            once(&mut received, &msg);
            consumer.ack(&msg).await.expect("ack");
        }
        assert_eq!(received, sent);
        assert_eq!(consumer.topics().len(), 4, "{:?}", consumer.topics());
        consumer.close().await.expect("close");
        producer.close().await.expect("close producer");
    })
    .await;
}

#[tokio::test]
async fn a_pattern_consumer_receives_from_a_topic_created_after_it_subscribed() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite does not answer GET_TOPICS_OF_NAMESPACE",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("pattern", async {
        init_tracing();
        let client = client(&broker).await;
        let prefix = unique_topic("pat");
        let first = format!("{prefix}-first");
        let later = format!("{prefix}-later");
        let unrelated = format!("{prefix}x-other");
        // Exists before the consumer subscribes.
        send_one(&client, &first, "before").await;
        let pattern = format!("{}-.*", regex_escape(&prefix));
        let mut consumer = watching_consumer(&client, &pattern).await;
        assert_eq!(consumer.topics(), std::slice::from_ref(&first));
        let msg = consumer.receive().await.expect("first");
        assert_eq!(msg.topic(), first);
        consumer.ack(&msg).await.expect("ack");
        // Created after subscribing: joined from its first message.
        send_one(&client, &later, "after").await;
        send_one(&client, &unrelated, "not mine").await;
        let msg = consumer.receive().await.expect("later");
        assert_eq!(msg.topic(), later);
        assert_eq!(msg.payload().as_ref(), b"after");
        consumer.ack(&msg).await.expect("ack");
        let topics: BTreeSet<String> = consumer.topics().into_iter().collect();
        assert_eq!(topics, BTreeSet::from([first, later]));
        consumer.close().await.expect("close");
    })
    .await;
}

/// A Shared pattern consumer of `pattern` from the earliest message, whose
/// listing is due after the hang guard: only the broker's topic-list
/// watcher can tell it of topics created or deleted in time.
async fn watching_consumer(client: &Client, pattern: &str) -> Consumer {
    client
        .consumer_pattern(pattern, "pat")
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .pattern_auto_discovery_period(Duration::from_secs(600))
        .subscribe()
        .await
        .expect("subscribe")
}

/// Sends `payload` to `topic` and waits until it is stored.
async fn send_one(client: &Client, topic: &str, payload: &str) {
    let producer = client.producer(topic).create().await.expect("producer");
    let receipt = producer.send(payload.to_owned()).await.expect("queued");
    receipt.await.expect("stored");
}

/// Records `msg` as received, failing if it came before.
fn once(received: &mut BTreeSet<MessageId>, msg: &Message) {
    assert!(received.insert(msg.id()), "{} came twice", msg.id());
}

/// `name` with the regex metacharacters a topic name can hold escaped.
fn regex_escape(name: &str) -> String {
    name.replace('.', "\\.")
}

#[tokio::test]
async fn a_pattern_consumer_on_a_broker_that_never_lists_topics_fails_with_a_typed_timeout() {
    if skip_unless(
        BrokerKind::Lite,
        "Apache Pulsar answers GET_TOPICS_OF_NAMESPACE (see the test above)",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("pattern on lite", async {
        init_tracing();
        let client = Client::builder()
            .service_url(broker.service_url())
            .operation_timeout(FIRING_TIMEOUT)
            .build()
            .await
            .expect("client");
        let pattern = "persistent://public/default/orders-.*";
        let result = client.consumer_pattern(pattern, "sub").subscribe().await;
        assert_listing_timed_out(result, pattern);
        // The connection is still good for everything else.
        let p = client
            .producer("after-pattern")
            .create()
            .await
            .expect("producer");
        p.send("ok").await.expect("queued").await.expect("stored");
    })
    .await;
}

#[tokio::test]
async fn a_pattern_consumer_leaves_a_deleted_topic_and_joins_a_new_one() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite does not answer GET_TOPICS_OF_NAMESPACE and has no admin API to delete a topic",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("pattern deletion", async {
        init_tracing();
        let admin = admin_url();
        // A namespace of its own, where a deleted topic stays deleted (no
        // creation on lookup when the consumer's subscription is closed).
        let unique = unique_topic("ns");
        let local = unique.rsplit('/').next().expect("local name");
        let namespace = format!("public/{local}");
        admin::create_namespace(&admin, &namespace, 1).await;
        admin::disable_auto_topic_creation(&admin, &namespace).await;
        let topic = |name: &str| format!("persistent://{namespace}/{name}");
        let (kept, deleted, created) = (topic("kept"), topic("deleted"), topic("created"));
        admin::create_topic(&admin, &kept).await;
        admin::create_topic(&admin, &deleted).await;
        let client = client(&broker).await;
        let pattern = format!("persistent://{namespace}/.*");
        let mut consumer = watching_consumer(&client, &pattern).await;
        let read: BTreeSet<String> = consumer.topics().into_iter().collect();
        assert_eq!(read, BTreeSet::from([kept.clone(), deleted.clone()]));
        admin::delete_topic(&admin, &deleted).await;
        // The watcher reports the deletion before this creation.
        admin::create_topic(&admin, &created).await;
        send_one(&client, &created, "after").await;
        let msg = consumer.receive().await.expect("message of the new topic");
        assert_eq!(msg.topic(), created);
        consumer.ack(&msg).await.expect("ack");
        let read: BTreeSet<String> = consumer.topics().into_iter().collect();
        assert_eq!(read, BTreeSet::from([kept, created]));
        consumer.close().await.expect("close");
    })
    .await;
}
