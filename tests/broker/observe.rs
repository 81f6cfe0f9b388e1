//! Interceptors and stats on a real broker: a producer's hooks and stats
//! count every send and receipt; a consumer's count deliveries, acks, a
//! nack, an ack timeout, two dead-letter forwards and a retry letter, and
//! its hooks hear the same events.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use pulsar_wire::consumer::{DeadLetterPolicy, InitialPosition, SubscriptionType};
use pulsar_wire::interceptor::{ConsumerInterceptor, ProducerInterceptor};
use pulsar_wire::producer::{ProducerError, ProducerMessage};
use pulsar_wire::{Message, MessageId};

use crate::common::broker::{TestBroker, client};
use crate::common::{guard, unique_topic};

/// Counts each hook.
#[derive(Debug, Default)]
struct Counts {
    before_send: AtomicU64,
    stored: AtomicU64,
    failed: AtomicU64,
    before_consume: AtomicU64,
    acks: AtomicU64,
    nacks: AtomicU64,
    timed_out: AtomicU64,
}

impl ProducerInterceptor for Counts {
    fn before_send(&self, _topic: &str, message: ProducerMessage) -> ProducerMessage {
        self.before_send.fetch_add(1, Relaxed);
        message
    }
    fn on_send_acknowledgement(&self, _topic: &str, outcome: Result<MessageId, &ProducerError>) {
        let which = if outcome.is_ok() {
            &self.stored
        } else {
            &self.failed
        };
        which.fetch_add(1, Relaxed);
    }
}

impl ConsumerInterceptor for Counts {
    fn before_consume(&self, _message: &Message) {
        self.before_consume.fetch_add(1, Relaxed);
    }
    fn on_acknowledge(&self, _topic: &str, _id: MessageId, _cumulative: bool) {
        self.acks.fetch_add(1, Relaxed);
    }
    fn on_negative_acknowledge(&self, _topic: &str, _id: MessageId) {
        self.nacks.fetch_add(1, Relaxed);
    }
    fn on_ack_timeout(&self, _topic: &str, ids: &[MessageId]) {
        self.timed_out.fetch_add(ids.len() as u64, Relaxed);
    }
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Relaxed)
}

#[tokio::test]
async fn hooks_and_stats_count_every_send_delivery_and_answer() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("interceptors and stats", async {
        let client = client(&broker).await;
        let topic = unique_topic("observe");
        let sent = Arc::new(Counts::default());
        let producer = client
            .producer(topic.as_str())
            .batching(false)
            .interceptor(sent.clone())
            .create()
            .await
            .expect("producer");
        let seen = Arc::new(Counts::default());
        let mut consumer = client
            .consumer(topic.as_str(), "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .ack_timeout(Duration::from_secs(1))
            .dead_letter_policy(DeadLetterPolicy {
                initial_subscription_name: Some("keep".into()),
                ..DeadLetterPolicy::after_redeliveries(1)
            })
            .enable_retry(true)
            .interceptor(seen.clone())
            .subscribe()
            .await
            .expect("subscribe");

        let mut receipts = Vec::new();
        for i in 0..20 {
            let receipt = producer
                .send(format!("message {i:02}"))
                .await
                .expect("queued");
            receipts.push(receipt);
        }
        for receipt in receipts {
            receipt.await.expect("stored");
        }
        assert_eq!((get(&sent.before_send), get(&sent.stored)), (20, 20));
        assert_eq!(get(&sent.failed), 0);
        let stats = producer.stats();
        assert_eq!(
            (stats.total.messages_sent, stats.total.bytes_sent),
            (20, 200)
        );
        assert_eq!((stats.total.send_failures, stats.total.receipts), (0, 20));
        assert_eq!((stats.pending_messages, stats.pending_bytes), (0, 0));
        assert_eq!(stats.send_latency.count, 20);
        assert!(stats.send_latency.p50 <= stats.send_latency.max);

        // 17 acked, one nacked, one retried later, one held past its ack
        // timeout. The nacked and the held one come back with a count of 1
        // and go to the dead-letter topic; the retry copy is delivered.
        let mut held = Vec::new();
        let (mut originals, mut copies) = (0, 0);
        while originals < 20 || copies < 1 {
            let m = consumer.receive().await.expect("receive");
            if m.topic().ends_with("-s-RETRY") {
                consumer.ack(&m).await.expect("ack the copy");
                copies += 1;
                continue;
            }
            assert_eq!(m.redelivery_count(), 0, "{m:?}");
            match originals {
                0 => consumer.nack(&m).expect("nack"),
                1 => consumer
                    .reconsume_later(&m, Duration::from_millis(100))
                    .await
                    .expect("retry"),
                2 => held.push(m),
                _ => consumer.ack(&m).await.expect("ack"),
            }
            originals += 1;
        }
        let mut dead = client
            .consumer(format!("{topic}-s-DLQ"), "keep")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("the dead-letter topic");
        for _ in 0..2 {
            dead.receive().await.expect("a dead letter");
        }
        // Closing settles the forwards in flight: each is counted by then.
        consumer.close().await.expect("close");

        assert_eq!(get(&seen.before_consume), 21);
        assert_eq!(get(&seen.acks), 19, "17, the retried original, the copy");
        assert_eq!((get(&seen.nacks), get(&seen.timed_out)), (1, 1));
        let t = consumer.stats().total;
        assert_eq!((t.messages_received, t.bytes_received), (21, 210));
        assert_eq!((t.acks, t.nacks, t.ack_timeouts), (19, 1, 1));
        assert_eq!((t.dead_letters, t.retries), (2, 1));
        drop(held);
    })
    .await;
}
