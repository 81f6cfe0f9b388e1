//! A producer and a Shared consumer running at once on one topic, while a
//! test moves the topic or kills its broker: the producer awaits every
//! receipt and publishes how many are confirmed, the consumer acks what it
//! gets until it has seen every message. [`Traffic::finish`] checks that
//! every confirmed message was consumed and reports duplicates.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::consumer::Consumer;
use pulsar_wire::producer::{Producer, SendReceipt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

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
    /// Deliveries of a message already received.
    pub(crate) duplicates: u64,
}

/// A producer and a consumer at work on one topic.
#[derive(Debug)]
pub(crate) struct Traffic {
    total: u64,
    confirmed: watch::Receiver<u64>,
    producing: JoinHandle<Vec<u64>>,
    consuming: JoinHandle<(HashSet<u64>, u64)>,
}

impl Traffic {
    /// Starts sending `total` messages with `producer` and receiving them
    /// with `consumer` (subscribed already).
    pub(crate) fn start(producer: Producer, mut consumer: Consumer, total: u64) -> Self {
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
        let consuming = tokio::spawn(async move {
            let mut seen = HashSet::new();
            let mut deliveries = 0u64;
            while (seen.len() as u64) < total {
                let Ok(next) = tokio::time::timeout(IDLE, consumer.receive()).await else {
                    break;
                };
                let m = next.expect("receive");
                deliveries += 1;
                seen.insert(number(m.payload()));
                // An ack lost to a move only means a redelivery.
                let _ = consumer.ack(&m).await;
            }
            let _ = consumer.close().await;
            (seen, deliveries)
        });
        Self {
            total,
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

    /// Waits for both sides; fails if a confirmed message was never
    /// consumed. `what` names the run in the report line.
    pub(crate) async fn finish(self, what: &str) -> Report {
        let confirmed = self.producing.await.expect("producer task");
        assert_eq!(confirmed.len() as u64, self.total, "every send confirmed");
        let (seen, deliveries) = self.consuming.await.expect("consumer task");
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
        let report = Report {
            confirmed: confirmed.len() as u64,
            deliveries,
            duplicates: deliveries - seen.len() as u64,
        };
        eprintln!(
            "{what}: {} confirmed, all consumed, {} deliveries, {} duplicates",
            report.confirmed, report.deliveries, report.duplicates
        );
        report
    }
}
