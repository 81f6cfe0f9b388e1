//! Retry letters: `reconsume_later` publishes to `<topic>-<sub>-RETRY` with
//! `RECONSUMETIMES` counting up, `DELAY_TIME`, the first hop's
//! `REAL_TOPIC` / `ORIGIN_MESSAGE_ID` and custom properties, acks the
//! original, and sends the message to the dead-letter topic once
//! `RECONSUMETIMES` would pass the limit. The delay itself is checked on
//! Apache Pulsar only: pulsar-lite ignores `deliver_at_time`.

use std::collections::HashMap;
use std::time::Duration;

use pulsar_wire::consumer::DeadLetterPolicy;
use pulsar_wire::consumer::dead_letter::{
    DELAY_TIME, ORIGIN_MESSAGE_ID, REAL_TOPIC, RECONSUMETIMES,
};
use pulsar_wire::producer::ProducerMessage;

use super::dead_letter::{producer, send};
use super::*;

async fn retrying(client: &Client, topic: &str, max: u32) -> Consumer {
    client
        .consumer(topic, "s")
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .dead_letter_policy(DeadLetterPolicy {
            initial_subscription_name: Some("keep".into()),
            ..DeadLetterPolicy::after_redeliveries(max)
        })
        .enable_retry(true)
        .subscribe()
        .await
        .expect("subscribe")
}

fn props(m: &pulsar_wire::Message) -> HashMap<String, String> {
    m.properties().clone()
}

/// The first message left on subscription "s" of `topic`.
async fn first_left(client: &Client, topic: &str) -> String {
    let mut consumer = shared(client, topic, "s", 10).await;
    let m = consumer.receive().await.expect("receive");
    consumer.close().await.expect("close");
    text(&m)
}

#[tokio::test]
async fn retries_count_up_keep_the_origin_and_end_in_the_dead_letter_topic() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("retry letters", async {
        let client = client(&broker).await;
        let topic = unique_topic("retry");
        let retry_topic = format!("{topic}-s-RETRY");
        let mut consumer = retrying(&client, &topic, 2).await;
        assert!(
            consumer.topics().contains(&retry_topic),
            "{:?}",
            consumer.topics()
        );
        let producer = producer(&client, &topic).await;
        let id = send(
            &producer,
            ProducerMessage::new("again").key("k").property("p", "1"),
        )
        .await;

        let first = consumer.receive().await.expect("receive");
        assert_eq!((first.id(), first.topic()), (id, topic.as_str()));
        let why = [("why".to_owned(), "busy".to_owned())];
        consumer
            .reconsume_later_with_properties(&first, Duration::from_millis(50), why)
            .await
            .expect("reconsume 1");
        for n in 1..=2 {
            let m = consumer.receive().await.expect("retry letter");
            assert_eq!(m.topic(), retry_topic);
            assert_eq!((text(&m), m.key()), ("again".to_owned(), Some("k")));
            let p = props(&m);
            assert_eq!(p[RECONSUMETIMES], n.to_string());
            assert_eq!(p[DELAY_TIME], "50");
            assert_eq!(p[REAL_TOPIC], topic, "the first topic, kept");
            assert_eq!(p[ORIGIN_MESSAGE_ID], id.to_string(), "the first id, kept");
            assert_eq!((p["p"].as_str(), p["why"].as_str()), ("1", "busy"));
            consumer
                .reconsume_later(&m, Duration::from_millis(50))
                .await
                .expect("reconsume");
        }
        // The third reconsume would make RECONSUMETIMES 3 > 2: dead letter.
        let mut dlq = client
            .consumer(format!("{topic}-s-DLQ"), "keep")
            .subscription_type(SubscriptionType::Shared)
            .subscribe()
            .await
            .expect("DLQ");
        let copy = dlq.receive().await.expect("dead letter");
        let p = props(&copy);
        assert_eq!(text(&copy), "again");
        assert_eq!(p[RECONSUMETIMES], "3");
        assert!(!p.contains_key(DELAY_TIME), "{p:?}");
        assert_eq!(p[REAL_TOPIC], topic);
        assert_eq!(p[ORIGIN_MESSAGE_ID], id.to_string());
        assert_eq!(p["why"], "busy");

        // Every hop acked its original, on both topics.
        consumer.close().await.expect("close");
        send(&producer, ProducerMessage::new("after")).await;
        assert_eq!(first_left(&client, &topic).await, "after");
        let retry_producer = super::dead_letter::producer(&client, &retry_topic).await;
        send(&retry_producer, ProducerMessage::new("after-retry")).await;
        assert_eq!(first_left(&client, &retry_topic).await, "after-retry");
    })
    .await;
}

#[tokio::test]
async fn the_retry_delay_holds_a_message_back() {
    if skip_on(
        BrokerKind::Lite,
        "pulsar-lite ignores deliver_at_time and delivers delayed messages at once",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("retry delay", async {
        let client = client(&broker).await;
        let topic = unique_topic("retry-delay");
        let mut consumer = retrying(&client, &topic, 5).await;
        let producer = producer(&client, &topic).await;
        send(&producer, ProducerMessage::new("later")).await;
        send(&producer, ProducerMessage::new("sooner")).await;
        let mut got = take(&mut consumer, 2).await;
        got.sort_by_key(text);
        let (later, sooner) = (&got[0], &got[1]);
        // "later" is published to the retry topic first, held for 5 s;
        // "sooner" after it with no delay. A broker that honours the delay
        // hands "sooner" over first; one that ignores it, "later".
        consumer
            .reconsume_later(later, Duration::from_secs(5))
            .await
            .expect("reconsume later");
        consumer
            .reconsume_later(sooner, Duration::ZERO)
            .await
            .expect("reconsume sooner");
        let order: Vec<String> = take(&mut consumer, 2).await.iter().map(text).collect();
        assert_eq!(order, ["sooner", "later"]);
    })
    .await;
}

#[tokio::test]
async fn reconsume_later_needs_enable_retry() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("retry not enabled", async {
        let client = client(&broker).await;
        let topic = unique_topic("no-retry");
        let mut consumer = shared(&client, &topic, "s", 10).await;
        let producer = producer(&client, &topic).await;
        send(&producer, ProducerMessage::new("x")).await;
        let m = consumer.receive().await.expect("receive");
        let result = consumer.reconsume_later(&m, Duration::from_secs(1)).await;
        assert!(
            matches!(result, Err(ConsumerError::RetryNotEnabled)),
            "{result:?}"
        );
        // Nothing was acked: the message is still there for the next consumer.
        consumer.close().await.expect("close");
        assert_eq!(first_left(&client, &topic).await, "x");
    })
    .await;
}
