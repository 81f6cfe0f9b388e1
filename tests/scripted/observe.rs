//! Interceptors and stats against a scripted broker, on the paused clock:
//! each producer and consumer hook is called once per event, interceptors
//! in the order added; the stats count the same events, the send latency
//! is the time from send to receipt, and intervals close after the stats
//! interval. With the `otel` feature, the same figures reach an in-memory
//! OpenTelemetry exporter under the Java client's names.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pulsar_wire::consumer::{ConsumerBuilder, SubscriptionType};
use pulsar_wire::interceptor::{ConsumerInterceptor, ProducerInterceptor};
use pulsar_wire::producer::{ProducerBuilder, ProducerError, ProducerMessage};
use pulsar_wire::proto::ServerError;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::wire::Checksum;
use pulsar_wire::{Message, MessageId};

use super::chunks::chunk;
use super::consume::{message, subscribed_with};
use super::produce::{producer_built, send_of};
use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer};
use crate::common::guard;

#[cfg(feature = "otel")]
#[path = "observe_otel.rs"]
mod otel;

/// What the interceptors saw, in order: (interceptor, hook, detail).
type Log = Arc<Mutex<Vec<(&'static str, &'static str, String)>>>;

#[derive(Debug)]
struct Recording(&'static str, Log);

impl Recording {
    fn note(&self, hook: &'static str, detail: String) {
        self.1.lock().unwrap().push((self.0, hook, detail));
    }
}

impl ConsumerInterceptor for Recording {
    fn before_consume(&self, message: &Message) {
        self.note("before_consume", message.id().to_string());
    }
    fn on_acknowledge(&self, _topic: &str, id: MessageId, cumulative: bool) {
        self.note("on_acknowledge", format!("{id} {cumulative}"));
    }
    fn on_negative_acknowledge(&self, _topic: &str, id: MessageId) {
        self.note("on_negative_acknowledge", id.to_string());
    }
    fn on_ack_timeout(&self, _topic: &str, ids: &[MessageId]) {
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        self.note("on_ack_timeout", ids.join(","));
    }
}

impl ProducerInterceptor for Recording {
    fn before_send(&self, _topic: &str, message: ProducerMessage) -> ProducerMessage {
        self.note(
            "before_send",
            String::from_utf8_lossy(message.payload()).into(),
        );
        message.property(self.0, "saw it")
    }
    fn on_send_acknowledgement(&self, _topic: &str, outcome: Result<MessageId, &ProducerError>) {
        let detail = match outcome {
            Ok(id) => id.to_string(),
            Err(ProducerError::Send { code, .. }) => format!("{code:?}"),
            Err(other) => other.to_string(),
        };
        self.note("on_send_acknowledgement", detail);
    }
}

/// The hooks of interceptor `who`, with their details.
fn hooks(log: &Log, who: &str) -> Vec<(&'static str, String)> {
    let log = log.lock().unwrap();
    log.iter()
        .filter(|(w, _, _)| *w == who)
        .map(|(_, hook, detail)| (*hook, detail.clone()))
        .collect()
}

/// Every event reached "first" and then "second", one after the other.
fn in_order(log: &Log) {
    let log = log.lock().unwrap();
    assert_eq!(log.len() % 2, 0, "{log:?}");
    for pair in log.chunks(2) {
        assert_eq!((pair[0].0, pair[1].0), ("first", "second"), "{log:?}");
        assert_eq!((pair[0].1, &pair[0].2), (pair[1].1, &pair[1].2), "{log:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn consumer_hooks_and_stats_count_deliveries_acks_nacks_and_ack_timeouts() {
    let net = FakeNetwork::new();
    let log = Log::default();
    guard("consumer interceptors", async {
        let (first, second) = (
            Recording("first", log.clone()),
            Recording("second", log.clone()),
        );
        let setup = |b: ConsumerBuilder| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_timeout(Duration::from_secs(5))
                .interceptor(first)
                .interceptor(Arc::new(second))
        };
        let (mut consumer, mut broker, id) = subscribed_with(&net, setup).await;
        for (entry, text) in [(1, "one"), (2, "two!"), (3, "three")] {
            broker
                .send_frame(message(id, entry, text, Checksum::Valid))
                .await;
        }
        let one = consumer.receive().await.expect("one");
        let two = consumer.receive().await.expect("two");
        let _three = consumer.receive().await.expect("three");
        consumer.ack(&one).await.expect("ack");
        broker.expect(Type::Ack).await;
        consumer.nack(&two).expect("nack");
        let nacked = broker.expect(Type::RedeliverUnacknowledgedMessages).await;
        let ids = &nacked
            .command
            .redeliver_unacknowledged_messages
            .as_ref()
            .expect("body")
            .message_ids;
        assert_eq!(ids.iter().map(|i| i.entry_id).collect::<Vec<_>>(), [2]);
        // Held past its ack timeout: asked for again, and the hook hears it.
        let expired = broker.expect(Type::RedeliverUnacknowledgedMessages).await;
        let ids = &expired
            .command
            .redeliver_unacknowledged_messages
            .as_ref()
            .expect("body")
            .message_ids;
        assert_eq!(ids.iter().map(|i| i.entry_id).collect::<Vec<_>>(), [3]);

        let want: Vec<(&str, String)> = vec![
            ("before_consume", "1:1:-1".into()),
            ("before_consume", "1:2:-1".into()),
            ("before_consume", "1:3:-1".into()),
            ("on_acknowledge", "1:1:-1 false".into()),
            ("on_negative_acknowledge", "1:2:-1".into()),
            ("on_ack_timeout", "1:3:-1".into()),
        ];
        assert_eq!(hooks(&log, "first"), want);
        in_order(&log);

        let stats = consumer.stats();
        let t = stats.total;
        assert_eq!((t.messages_received, t.bytes_received), (3, 12));
        assert_eq!((t.acks, t.nacks, t.ack_timeouts), (1, 1, 1));
        assert_eq!((t.dead_letters, t.retries), (0, 0));
    })
    .await;
}

/// A chunked message reaches every hook under the id the application
/// holds: its last chunk's, with its first chunk beside it.
#[tokio::test(start_paused = true)]
async fn consumer_hooks_see_a_chunked_message_under_the_id_the_application_holds() {
    let net = FakeNetwork::new();
    let log = Log::default();
    guard("consumer interceptors, chunked", async {
        let recording = Recording("first", log.clone());
        let setup = |b: ConsumerBuilder| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_timeout(Duration::from_secs(5))
                .interceptor(recording)
        };
        let (mut consumer, mut broker, id) = subscribed_with(&net, setup).await;
        for (at, uuid) in [(1, "x"), (3, "y"), (5, "z")] {
            broker.send_frame(chunk(id, at, uuid, 0, 2)).await;
            broker.send_frame(chunk(id, at + 1, uuid, 1, 2)).await;
        }
        let x = consumer.receive().await.expect("x");
        let y = consumer.receive().await.expect("y");
        let z = consumer.receive().await.expect("z");
        consumer.ack(&x).await.expect("ack");
        past_flows(&mut broker, Type::Ack).await;
        consumer.nack(&y).expect("nack");
        past_flows(&mut broker, Type::RedeliverUnacknowledgedMessages).await;
        // z, held past its ack timeout.
        past_flows(&mut broker, Type::RedeliverUnacknowledgedMessages).await;

        let shown: Vec<String> = [&x, &y, &z].iter().map(|m| m.id().to_string()).collect();
        assert_eq!(shown, ["1:1:-1;1:2:-1", "1:3:-1;1:4:-1", "1:5:-1;1:6:-1"]);
        let want: Vec<(&str, String)> = vec![
            ("before_consume", shown[0].clone()),
            ("before_consume", shown[1].clone()),
            ("before_consume", shown[2].clone()),
            ("on_acknowledge", format!("{} false", shown[0])),
            ("on_negative_acknowledge", shown[1].clone()),
            ("on_ack_timeout", shown[2].clone()),
        ];
        assert_eq!(hooks(&log, "first"), want);
    })
    .await;
}

/// Waits for the next frame of `kind`, past the FLOWs before it.
async fn past_flows(broker: &mut FakeBroker, kind: Type) {
    loop {
        let frame = broker.recv().await.expect("a frame");
        match frame.command.r#type() {
            Type::Flow => {}
            other => {
                assert_eq!(other, kind);
                return;
            }
        }
    }
}

/// A cumulative ack of a chunked message reaches the hook under the id
/// the application holds too.
#[tokio::test(start_paused = true)]
async fn a_cumulative_ack_hook_sees_a_chunked_message_under_the_id_the_application_holds() {
    let net = FakeNetwork::new();
    let log = Log::default();
    guard("cumulative ack interceptor, chunked", async {
        let recording = Recording("first", log.clone());
        let setup = |b: ConsumerBuilder| {
            b.subscription_type(SubscriptionType::Exclusive)
                .interceptor(recording)
        };
        let (mut consumer, mut broker, id) = subscribed_with(&net, setup).await;
        broker.send_frame(chunk(id, 1, "x", 0, 2)).await;
        broker
            .send_frame(message(id, 2, "between", Checksum::Valid))
            .await;
        broker.send_frame(chunk(id, 3, "x", 1, 2)).await;
        let between = consumer.receive().await.expect("between");
        let x = consumer.receive().await.expect("x");
        consumer.ack_cumulative(&x).await.expect("ack");
        let want: Vec<(&str, String)> = vec![
            ("before_consume", between.id().to_string()),
            ("before_consume", "1:1:-1;1:3:-1".into()),
            ("on_acknowledge", "1:1:-1;1:3:-1 true".into()),
        ];
        assert_eq!(hooks(&log, "first"), want);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn producer_hooks_see_each_send_and_its_outcome_and_stats_time_it() {
    let net = FakeNetwork::new();
    let log = Log::default();
    guard("producer interceptors", async {
        let (first, second) = (
            Recording("first", log.clone()),
            Recording("second", log.clone()),
        );
        let setup = |b: ProducerBuilder| b.batching(false).interceptor(first).interceptor(second);
        let (producer, mut broker, _svc) = producer_built(&net, None, -1, 64 << 20, setup).await;
        let stored = producer.send("stored").await.expect("queued");
        let refused = producer.send("refused").await.expect("queued");
        let send = broker.expect(Type::Send).await;
        let (pid, seq) = send_of(&send);
        let properties = &send.payload.as_ref().expect("payload").metadata.properties;
        let mut seen: Vec<&str> = properties.iter().map(|p| p.key.as_str()).collect();
        seen.sort_unstable();
        assert_eq!(
            seen,
            ["first", "second"],
            "each before_send changed the message"
        );
        broker.expect(Type::Send).await;
        let pending = producer.stats();
        assert_eq!((pending.pending_messages, pending.pending_bytes), (2, 13));

        tokio::time::advance(Duration::from_millis(7)).await;
        broker.send(answer::receipt(pid, seq)).await;
        let error = super::produce::send_error(pid, seq + 1, ServerError::NotAllowedError, "no");
        broker.send(error).await;
        let id = stored.await.expect("stored");
        assert!(refused.await.is_err());

        let want: Vec<(&str, String)> = vec![
            ("before_send", "stored".into()),
            ("before_send", "refused".into()),
            ("on_send_acknowledgement", id.to_string()),
            ("on_send_acknowledgement", "NotAllowedError".into()),
        ];
        assert_eq!(hooks(&log, "first"), want);
        // before_send of the second saw the first's change; the details match.
        let second = hooks(&log, "second");
        assert_eq!(second.len(), 4, "{second:?}");

        let stats = producer.stats();
        let t = stats.total;
        assert_eq!((t.messages_sent, t.bytes_sent, t.receipts), (1, 6, 1));
        assert_eq!(t.send_failures, 1);
        assert_eq!((stats.pending_messages, stats.pending_bytes), (0, 0));
        let latency = stats.send_latency;
        assert_eq!(latency.count, 1);
        let micros = latency.max.as_micros() as f64;
        assert!(
            (micros - 7000.0).abs() <= 70.0,
            "7 ms within 1%: {latency:?}"
        );
        assert_eq!(stats.interval, None, "no interval has passed");

        // The stats interval (60 s by default) closes at the first read after it.
        tokio::time::advance(Duration::from_secs(60)).await;
        let interval = producer.stats().interval.expect("an interval passed");
        assert_eq!(interval.counts, t);
        assert_eq!(interval.send_latency.count, 1);
        assert!(interval.messages_per_second() > 0.0);
        let next = producer.stats().interval.expect("still the last one");
        assert_eq!(
            next.counts, t,
            "a read before the next interval ends changes nothing"
        );
    })
    .await;
}
