//! A producer and a Shared consumer running at once on one topic, while a
//! test moves the topic or kills its broker: the producer awaits every
//! receipt and publishes how many are confirmed, the consumer acks what it
//! gets until it has seen every message. The test announces each fault
//! with [`Traffic::fault`]. [`Traffic::finish`] checks that every confirmed
//! message was consumed, that every ack held (see `common/acks.rs`), that
//! the subscription holds nothing afterwards, and bounds the duplicates.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::consumer::Consumer;
use pulsar_wire::producer::{Producer, SendReceipt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::common::acks::{AckBook, Fault, Faults, Return, assert_nothing_left_before};

pub(crate) use crate::common::client_at as client;
pub(crate) use crate::common::shared_from_start as shared;

/// Sends that may wait for receipts at once.
const IN_FLIGHT: usize = 500;
/// Longest the consumer waits for its next message before it reports what
/// is missing (a hang guard: a moved topic is back within seconds).
const IDLE: Duration = Duration::from_secs(120);
/// Hang guard for a whole run of tens of thousands of messages.
pub(crate) const LONG: Duration = Duration::from_secs(600);
/// Longest a send waits for its receipt: far beyond any move or broker
/// death here, so every send is confirmed and any loss is the client's.
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(600);

/// A producer that keeps trying as long as a topic move could take.
pub(crate) async fn producer(client: &Client, topic: &str) -> Producer {
    client
        .producer(topic)
        .send_timeout(SEND_TIMEOUT)
        .create()
        .await
        .expect("producer")
}

/// The payload of message `i`.
pub(crate) fn body(i: u64) -> String {
    format!("m-{i}")
}

/// The number in a [`body`] payload.
pub(crate) fn number(payload: &[u8]) -> u64 {
    std::str::from_utf8(payload)
        .ok()
        .and_then(|s| s.strip_prefix("m-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a test payload: {payload:?}"))
}

/// What a finished run saw.
#[derive(Debug)]
pub(crate) struct Report {
    /// Messages confirmed by the broker.
    pub(crate) confirmed: u64,
    /// Messages received, duplicates included.
    pub(crate) deliveries: u64,
    /// Deliveries of a message already received (by payload): the two
    /// kinds below.
    pub(crate) duplicates: u64,
    /// Deliveries of a message id already delivered: messages acked before
    /// a kill and lost with the killed broker's unpersisted acks, or handed
    /// out just as a fault began.
    pub(crate) redelivered: u64,
    /// Messages stored twice, under two ids: sends in flight at a kill,
    /// stored by the killed broker without a receipt and sent again.
    pub(crate) stored_twice: u64,
    /// Copies during faults beyond the acked members of batches acked in
    /// part (see `AckBook::copies_beyond_batches_acked_in_part`).
    pub(crate) beyond_batches_in_part: Vec<Return>,
}

/// The subscription the consumer is on (checked for leftovers at the end).
const SUBSCRIPTION: &str = "s";

/// A producer and a consumer at work on one topic.
#[derive(Debug)]
pub(crate) struct Traffic {
    total: u64,
    client: Client,
    topic: String,
    faults: Faults,
    confirmed: watch::Receiver<u64>,
    producing: JoinHandle<Vec<u64>>,
    consuming: JoinHandle<AckBook>,
}

impl Traffic {
    /// Starts sending `total` messages to `topic` with `producer` and
    /// receiving them with `consumer` (subscribed already, on subscription
    /// "s"); `client` checks the subscription at the end.
    pub(crate) fn start(
        client: &Client,
        topic: &str,
        producer: Producer,
        mut consumer: Consumer,
        total: u64,
    ) -> Self {
        let (progress, confirmed) = watch::channel(0);
        let producing = tokio::spawn(async move {
            let mut pending: VecDeque<(u64, SendReceipt)> = VecDeque::new();
            let mut confirmed = Vec::new();
            for i in 0..total {
                let receipt = producer.send(body(i)).await.expect("queued");
                pending.push_back((i, receipt));
                while pending.len() > IN_FLIGHT || (i + 1 == total && !pending.is_empty()) {
                    let (n, receipt) = pending.pop_front().expect("non-empty");
                    receipt.await.unwrap_or_else(|e| panic!("send {n}: {e}"));
                    confirmed.push(n);
                    progress.send_replace(confirmed.len() as u64);
                }
            }
            producer.close().await.expect("close producer");
            confirmed
        });
        let faults = Faults::default();
        let mut book = AckBook::new(faults.clone());
        let consuming = tokio::spawn(async move {
            let mut seen = HashSet::new();
            while (seen.len() as u64) < total {
                let Ok(next) = tokio::time::timeout(IDLE, consumer.receive()).await else {
                    break;
                };
                let m = next.expect("receive");
                let n = number(m.payload());
                book.delivered(n, m.id());
                seen.insert(n);
                book.acked(m.id(), consumer.ack(&m).await);
            }
            consumer.close().await.expect("close consumer");
            book
        });
        Self {
            total,
            client: client.clone(),
            topic: topic.to_owned(),
            faults,
            confirmed,
            producing,
            consuming,
        }
    }

    /// Waits until at least `n` messages are confirmed.
    pub(crate) async fn confirmed(&mut self, n: u64) {
        let n = n.min(self.total);
        crate::common::guard("messages confirmed", self.confirmed.wait_for(|c| *c >= n))
            .await
            .expect("the producer task ended early");
    }

    /// Call right before making a fault.
    pub(crate) fn fault(&self, fault: Fault) {
        self.faults.begin(fault);
    }

    /// Waits for both sides; fails if a confirmed message was never
    /// consumed, if an ack did not hold, if the subscription holds anything
    /// afterwards, or if the duplicates pass their bounds:
    /// - a message id delivered again only with a cause the ack book
    ///   accepts (a fault under way, or a killed broker's unpersisted acks);
    ///   a test without kills asserts that none comes again at all;
    /// - a message stored twice only after a kill, at most `IN_FLIGHT + 1`
    ///   per kill: the producer keeps no more sends unconfirmed, and a
    ///   killed broker may have stored some without answering, which the
    ///   producer then sends again. A move stores nothing twice: the old
    ///   owner answers every send it stored, and the producer takes those
    ///   receipts (docs/resilience.md).
    ///
    /// `what` names the run in messages and the report line.
    pub(crate) async fn finish(self, what: &str) -> Report {
        let confirmed = self.producing.await.expect("producer task");
        assert_eq!(confirmed.len() as u64, self.total, "every send confirmed");
        let book = self.consuming.await.expect("consumer task");
        let seen: HashSet<u64> = book.numbers().collect();
        let mut lost: Vec<u64> = confirmed
            .iter()
            .copied()
            .filter(|n| !seen.contains(n))
            .collect();
        lost.sort_unstable();
        assert!(
            lost.is_empty(),
            "{what}: {} confirmed messages never consumed (first 20: {:?})",
            lost.len(),
            &lost[..lost.len().min(20)]
        );
        assert!(
            book.failed_acks().is_empty(),
            "{what}: acks failed: {:?}",
            book.failed_acks()
        );
        book.assert_acks_held(what);
        let kills = self.faults.kills() as u64;
        let report = Report {
            confirmed: confirmed.len() as u64,
            deliveries: book.deliveries(),
            duplicates: book.deliveries() - seen.len() as u64,
            redelivered: book.redeliveries(),
            stored_twice: book.stored_twice(),
            beyond_batches_in_part: book.copies_beyond_batches_acked_in_part(),
        };
        let faults = self.faults.count();
        let most = (IN_FLIGHT as u64 + 1) * kills;
        assert!(
            report.stored_twice <= most,
            "{what}: {} messages stored twice, more than the {most} sends in flight at {kills} kills",
            report.stored_twice
        );
        assert_nothing_left_before(&self.client, &self.topic, SUBSCRIPTION, "end").await;
        eprintln!(
            "{what}: {} confirmed, all consumed, nothing left in the subscription; {} deliveries, \
             {} duplicates: {} ids again ({} acked and lost with {kills} killed brokers, {} other \
             copies during the {faults} faults), {} stored twice",
            report.confirmed,
            report.deliveries,
            report.duplicates,
            report.redelivered,
            book.returned_after_kill().len(),
            book.during_faults().len(),
            report.stored_twice
        );
        report
    }
}
