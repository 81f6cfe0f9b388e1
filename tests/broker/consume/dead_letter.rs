//! Dead-letter forwarding end to end: with a maximum of 3 the application
//! sees deliveries 0, 1 and 2, the fourth is published to the dead-letter
//! topic (where `initial_subscription_name` keeps it) with `REAL_TOPIC` and
//! `ORIGIN_MESSAGE_ID`, and the original is acked. Key_Shared runs on
//! Apache Pulsar only (pulsar-lite stalls a key after a nack).

use std::collections::HashMap;

use pulsar_wire::consumer::dead_letter::{
    DLQ_DELIVERY_COUNT, DLQ_FIRST_DELIVERY_TIME, DLQ_LAST_DELIVERY_TIME, DLQ_SUBSCRIPTION,
    ORIGIN_MESSAGE_ID, REAL_TOPIC,
};
use pulsar_wire::consumer::{ConfigError, DeadLetterCutoff, DeadLetterPolicy};
use pulsar_wire::producer::{Producer, ProducerMessage};

use super::*;

pub(super) async fn producer(client: &Client, topic: &str) -> Producer {
    client
        .producer(topic)
        .batching(false)
        .create()
        .await
        .expect("producer")
}

pub(super) async fn send(producer: &Producer, msg: ProducerMessage) -> MessageId {
    producer
        .send(msg)
        .await
        .expect("queued")
        .await
        .expect("stored")
}

/// A consumer of `kind` with a dead-letter policy of `max`, keeping copies
/// in the DLQ subscription "keep".
async fn with_policy(
    client: &Client,
    topic: &str,
    kind: SubscriptionType,
    policy: DeadLetterPolicy,
) -> Consumer {
    client
        .consumer(topic, "s")
        .subscription_type(kind)
        .initial_position(InitialPosition::Earliest)
        .dead_letter_policy(DeadLetterPolicy {
            initial_subscription_name: Some("keep".into()),
            ..policy
        })
        .subscribe()
        .await
        .expect("subscribe")
}

/// The DLQ's "keep" subscription, at its default position (latest): what it
/// holds was kept because the subscription existed before the forward.
async fn dead_letters(client: &Client, topic: &str) -> Consumer {
    client
        .consumer(format!("{topic}-s-DLQ"), "keep")
        .subscription_type(SubscriptionType::Shared)
        .subscribe()
        .await
        .expect("subscribe to the DLQ")
}

/// The first message on subscription "s" of `topic`, for a consumer without
/// any policy: shows what the subscription still holds.
async fn first_left(client: &Client, topic: &str, kind: SubscriptionType) -> String {
    let mut consumer = client
        .consumer(topic, "s")
        .subscription_type(kind)
        .subscribe()
        .await
        .expect("reopen");
    let m = consumer.receive().await.expect("receive");
    consumer.close().await.expect("close");
    text(&m)
}

async fn forwarded_after_three(kind: SubscriptionType) {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("dead letter", async {
        let client = client(&broker).await;
        let topic = unique_topic("dlq");
        let policy = DeadLetterPolicy::after_redeliveries(3);
        let mut consumer = with_policy(&client, &topic, kind, policy).await;
        let producer = producer(&client, &topic).await;
        let sent = ProducerMessage::new("doomed")
            .key("doomed")
            .ordering_key(&b"order"[..])
            .property("text", "doomed")
            .event_time(1_700_000_000_123);
        let id = send(&producer, sent).await;

        let mut counts = Vec::new();
        for _ in 0..3 {
            let m = consumer.receive().await.expect("receive");
            assert_eq!((m.id(), text(&m)), (id, "doomed".to_owned()));
            counts.push(m.redelivery_count());
            consumer.nack(&m).expect("nack");
        }
        assert_eq!(counts, [0, 1, 2], "the application sees deliveries 0, 1, 2");

        let mut dlq = dead_letters(&client, &topic).await;
        let copy = dlq.receive().await.expect("the copy");
        dlq.ack(&copy).await.expect("ack copy");
        assert_eq!(text(&copy), "doomed");
        assert_eq!(copy.key(), Some("doomed"));
        assert_eq!(copy.ordering_key().map(|k| &k[..]), Some(&b"order"[..]));
        assert_eq!(copy.event_time(), Some(1_700_000_000_123));
        let mut props: HashMap<&str, &str> = copy
            .properties()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        // Hand-out times: this consumer's wall clock, the first no later
        // than the last.
        let mut time = |name| -> u64 { props.remove(name).expect(name).parse().expect("ms") };
        let first = time(DLQ_FIRST_DELIVERY_TIME);
        let last = time(DLQ_LAST_DELIVERY_TIME);
        assert!(first <= last && first > 1_700_000_000_000, "{first} {last}");
        let origin = id.to_string();
        assert_eq!(
            props,
            HashMap::from([
                ("text", "doomed"),
                (REAL_TOPIC, topic.as_str()),
                (ORIGIN_MESSAGE_ID, origin.as_str()),
                (DLQ_SUBSCRIPTION, "s"),
                (DLQ_DELIVERY_COUNT, "3"),
            ]),
            "no DLQ_LAST_ERROR: the application nacked, no handler failed"
        );
        // Closing waits for forwards in flight; the original was acked
        // after the copy's receipt, so what comes next is newer.
        consumer.close().await.expect("close");
        send(&producer, ProducerMessage::new("after")).await;
        assert_eq!(first_left(&client, &topic, kind).await, "after");
    })
    .await;
}

#[tokio::test]
async fn shared_the_fourth_delivery_goes_to_the_dead_letter_topic() {
    forwarded_after_three(SubscriptionType::Shared).await;
}

#[tokio::test]
async fn key_shared_the_fourth_delivery_goes_to_the_dead_letter_topic() {
    if skip_on(
        BrokerKind::Lite,
        "pulsar-lite stalls a Key_Shared key after a nack (one message comes back, then nothing)",
    ) {
        return;
    }
    forwarded_after_three(SubscriptionType::KeyShared).await;
}

#[tokio::test]
async fn java_style_shows_the_last_delivery_and_forwards_at_its_nack() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("java-style cutoff", async {
        let client = client(&broker).await;
        let topic = unique_topic("dlq-java");
        let policy = DeadLetterPolicy {
            cutoff: DeadLetterCutoff::JavaStyle,
            ..DeadLetterPolicy::after_redeliveries(2)
        };
        let mut consumer = with_policy(&client, &topic, SubscriptionType::Shared, policy).await;
        let producer = producer(&client, &topic).await;
        let id = send(&producer, ProducerMessage::new("last-chance")).await;
        let mut counts = Vec::new();
        for _ in 0..3 {
            let m = consumer.receive().await.expect("receive");
            counts.push(m.redelivery_count());
            consumer.nack(&m).expect("nack");
        }
        assert_eq!(counts, [0, 1, 2], "Java's cut-off shows count == max once");
        let mut dlq = dead_letters(&client, &topic).await;
        let copy = dlq.receive().await.expect("the copy");
        assert_eq!(text(&copy), "last-chance");
        assert_eq!(copy.properties()[ORIGIN_MESSAGE_ID], id.to_string());
    })
    .await;
}

#[tokio::test]
async fn a_batch_member_is_forwarded_alone_and_its_acked_sibling_stays_acked() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("dead letter batch member", async {
        let client = client(&broker).await;
        let topic = unique_topic("dlq-batch");
        let policy = DeadLetterPolicy::after_redeliveries(1);
        let mut consumer = with_policy(&client, &topic, SubscriptionType::Shared, policy).await;
        let mut raw = RawProducer::create(&client, &topic).await;
        let entry = raw.send_batch(&["good", "bad"]).await;

        let first = take(&mut consumer, 2).await;
        assert_eq!(first.iter().map(text).collect::<Vec<_>>(), ["good", "bad"]);
        consumer.ack(&first[0]).await.expect("ack good");
        consumer.nack(&first[1]).expect("nack bad");

        let mut dlq = dead_letters(&client, &topic).await;
        let copy = dlq.receive().await.expect("the copy");
        assert_eq!(text(&copy), "bad");
        let origin = MessageId::new(entry.ledger_id, entry.entry_id).with_batch_index(1);
        assert_eq!(copy.properties()[ORIGIN_MESSAGE_ID], origin.to_string());
        assert_eq!(
            copy.properties()[ORIGIN_MESSAGE_ID],
            format!("{}:{}:-1:1", entry.ledger_id, entry.entry_id)
        );
        // Both members are settled: the entry was acked.
        consumer.close().await.expect("close");
        raw.send("after").await;
        assert_eq!(
            first_left(&client, &topic, SubscriptionType::Shared).await,
            "after"
        );
    })
    .await;
}

#[tokio::test]
async fn a_dead_letter_policy_needs_a_shared_subscription() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let client = client(&broker).await;
    for kind in [SubscriptionType::Exclusive, SubscriptionType::Failover] {
        let result = client
            .consumer(unique_topic("dlq-exclusive"), "s")
            .subscription_type(kind)
            .dead_letter_policy(DeadLetterPolicy::after_redeliveries(3))
            .subscribe()
            .await;
        assert!(
            matches!(
                result,
                Err(ConsumerError::Config(
                    ConfigError::DeadLetterNeedsSharedSubscription { subscription }
                )) if subscription == kind
            ),
            "{kind:?}: {result:?}"
        );
    }
    let zero = client
        .consumer(unique_topic("dlq-zero"), "s")
        .subscription_type(SubscriptionType::Shared)
        .dead_letter_policy(DeadLetterPolicy::after_redeliveries(0))
        .subscribe()
        .await;
    assert!(
        matches!(
            zero,
            Err(ConsumerError::Config(ConfigError::ZeroMaxRedeliverCount))
        ),
        "{zero:?}"
    );
}

#[tokio::test]
async fn a_partitions_dead_letters_go_to_the_partitioned_topics_dlq() {
    let topic = unique_topic("dlq-partitioned");
    let Some(broker) = partitioned(&topic, 2).await else {
        return;
    };
    guard("dead letter of a partition", async {
        let client = client(&broker).await;
        let parsed: TopicName = topic.parse().expect("topic");
        let policy = DeadLetterPolicy::after_redeliveries(1);
        let mut consumer = with_policy(&client, &topic, SubscriptionType::Shared, policy).await;
        assert_eq!(consumer.topics().len(), 2);
        let mut origins = HashMap::new();
        for p in 0..2 {
            let partition = parsed.partition(p);
            let mut raw = RawProducer::create(&client, partition.as_str()).await;
            let id = raw.send(&format!("p{p}")).await.with_partition(p as i32);
            origins.insert(format!("p{p}"), (partition.as_str().to_owned(), id));
        }
        for m in take(&mut consumer, 2).await {
            consumer.nack(&m).expect("nack");
        }
        // One DLQ for the partitioned topic (as Java), each copy naming
        // its partition and its id with the partition in it.
        let mut dlq = dead_letters(&client, &topic).await;
        for copy in take(&mut dlq, 2).await {
            let (partition, id) = &origins[&text(&copy)];
            assert_eq!(copy.properties()[REAL_TOPIC], *partition);
            assert_eq!(copy.properties()[ORIGIN_MESSAGE_ID], id.to_string());
            assert!(id.to_string().ends_with(&format!(":{}", id.partition)));
        }
    })
    .await;
}
