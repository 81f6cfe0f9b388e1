//! Settings at the edge of their type (`Duration::MAX` timeouts, delays
//! and backoffs) mean "never" or "as long as can be": the consumer's task
//! goes on working, it never panics on them. A task that panics all the
//! same leaves nothing registered on the broker. A MESSAGE without a
//! payload gives its permit back.

use std::time::Duration;

use pulsar_wire::consumer::{NackPolicy, RedeliveryBackoff};
use pulsar_wire::interceptor::ConsumerInterceptor;

use super::*;
use crate::chunks::chunk;

#[tokio::test(start_paused = true)]
async fn duration_max_everywhere_keeps_the_consumer_working() {
    let net = FakeNetwork::new();
    guard("huge durations", async {
        let backoff = RedeliveryBackoff {
            min: Duration::MAX,
            max: Duration::MAX,
            multiplier: f64::MAX,
        };
        let client = |b: ClientBuilder| b.operation_timeout(Duration::MAX);
        let (_client, mut consumer, mut broker, id) = subscribed_through(&net, client, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_timeout(Duration::MAX)
                .ack_timeout_tick(Duration::MAX)
                .ack_timeout_backoff(backoff)
                .ack_group_time(Duration::MAX)
                .nack_policy(NackPolicy::FixedDelay(Duration::MAX))
                .expire_time_of_incomplete_chunked_message(Duration::MAX)
        })
        .await;
        // The first chunk of a message whose rest never comes: its expiry
        // is the loop's deadline from now on.
        broker.send_frame(chunk(id, 10, "u", 0, 2)).await;
        for entry in 1..=3 {
            broker
                .send_frame(message(id, entry, "m", Checksum::Valid))
                .await;
        }
        let first = consumer.receive().await.expect("receive");
        consumer.ack(&first).await.expect("ack");
        let second = consumer.receive().await.expect("receive");
        consumer.nack(&second).expect("nack");
        tokio::time::advance(Duration::from_secs(30)).await;
        let third = consumer.receive().await.expect("the task still serves");
        assert_eq!(third.id().entry_id, 3);
        // The chunk's permit went back to the broker.
        let flow = broker.expect(Type::Flow).await;
        let permits = flow.command.flow.as_ref().map(|f| f.message_permits);
        assert_eq!(permits, Some(1));
        // Closing flushes the grouped ack: the task is alive to do it.
        let closing = tokio::spawn(async move { consumer.close().await });
        let ack = broker.expect(Type::Ack).await;
        let acked = ack.command.ack.as_ref().expect("body").message_id[0].entry_id;
        assert_eq!(acked, 1);
        let close = broker.expect(Type::CloseConsumer).await;
        let request = close
            .command
            .close_consumer
            .as_ref()
            .expect("body")
            .request_id;
        broker.send(answer::success(request)).await;
        closing.await.expect("task").expect("closed cleanly");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_mailbox_that_ends_without_a_word_is_a_lost_connection() {
    let net = FakeNetwork::new();
    guard("mailbox gone", async {
        let (client, mut consumer, mut broker, id) =
            subscribed_client(&net, |b| b.subscription_type(SubscriptionType::Shared)).await;
        // What a panic of the connection's task leaves behind: the
        // consumer's mailbox dropped, no word of a lost connection.
        let topic: pulsar_wire::TopicName = TOPIC.parse().expect("topic");
        let (conn, lookup) = tokio::join!(client.lookup(&topic), async {
            let lookup = broker.expect(Type::Lookup).await;
            let here = format!("pulsar://{SERVICE}");
            let found = answer::lookup(request_id(&lookup), LookupType::Connect, &here, true);
            broker.send(found).await;
        });
        let () = lookup;
        let conn = conn.expect("the consumer's connection");
        conn.unregister_consumer(pulsar_wire::ids::ConsumerId(id))
            .await;
        // The consumer subscribes again rather than waiting forever.
        let again = attach(&mut broker).await;
        broker
            .send_frame(message(again, 4, "after", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("receive");
        assert_eq!(m.id().entry_id, 4);
    })
    .await;
}

/// Panics when told of an ack timeout: a bug in the application's code,
/// which runs in the consumer's task.
#[derive(Debug)]
struct PanicsOnAckTimeout;

impl ConsumerInterceptor for PanicsOnAckTimeout {
    fn on_ack_timeout(&self, _topic: &str, _ids: &[MessageId]) {
        panic!("a bug in an interceptor");
    }
}

#[tokio::test(start_paused = true)]
async fn a_consumer_whose_task_panicked_is_closed_on_the_broker() {
    let net = FakeNetwork::new();
    guard("panicked task", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Exclusive)
                .ack_timeout(Duration::from_secs(1))
                .interceptor(PanicsOnAckTimeout)
        })
        .await;
        broker
            .send_frame(message(id, 1, "m", Checksum::Valid))
            .await;
        let _unacked = consumer.receive().await.expect("receive");
        // The broker lets go of the consumer (on Exclusive, another may
        // subscribe), though nobody closed it.
        let close = broker.expect(Type::CloseConsumer).await;
        let body = close.command.close_consumer.as_ref().expect("body");
        assert_eq!(body.consumer_id, id);
        broker.send(answer::success(body.request_id)).await;
        assert!(matches!(
            consumer.receive().await,
            Err(ConsumerError::TaskFailed)
        ));
    })
    .await;
}

// A MESSAGE without a payload reaches no consumer; the permit the broker
// charged for it goes back at once (a zero-queue consumer, which asks for
// one message at a time, would otherwise wait for ever), and the messages
// after it come as usual.
#[tokio::test(start_paused = true)]
async fn a_message_without_a_payload_gives_its_permit_back() {
    let net = FakeNetwork::new();
    guard("payload-less MESSAGE", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        let mut bare = message(id, 1, "lost", Checksum::Valid);
        bare.payload = None;
        broker.send_frame(bare).await;
        let flow = broker.expect(Type::Flow).await;
        let body = flow.command.flow.as_ref().expect("body");
        assert_eq!((body.consumer_id, body.message_permits), (id, 1));
        broker
            .send_frame(message(id, 2, "next", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("the next message");
        assert_eq!(&m.payload()[..], b"next");
    })
    .await;
}
