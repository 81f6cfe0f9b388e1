//! The chaos run's parts that do the work: producers, the consumers of
//! subscription "s" (acking, or nacking poison), the Failover group, the
//! dead-letter readers and the tailing reader.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use pulsar_wire::consumer::{Consumer, Reader};
use pulsar_wire::producer::{Producer, SendReceipt};
use tokio::sync::watch;

use super::books::{Books, Group, Tail};
use super::faults::poison;
use crate::traffic::{body, number};

/// Sends a producer keeps waiting for receipts.
pub(super) const IN_FLIGHT: usize = 200;

/// Sends numbered messages until `deadline`; returns the confirmed numbers,
/// in the order they were sent.
pub(super) async fn produce(
    producer: Producer,
    deadline: tokio::time::Instant,
    progress: Arc<watch::Sender<u64>>,
) -> Vec<u64> {
    let mut pending: std::collections::VecDeque<(u64, SendReceipt)> = Default::default();
    let mut confirmed = Vec::new();
    let mut n = 0;
    loop {
        let more = tokio::time::Instant::now() < deadline;
        if more {
            pending.push_back((n, producer.send(body(n)).await.expect("queued")));
            n += 1;
        }
        while pending.len() > IN_FLIGHT || (!more && !pending.is_empty()) {
            let (i, receipt) = pending.pop_front().expect("non-empty");
            receipt.await.unwrap_or_else(|e| panic!("send {i}: {e}"));
            confirmed.push(i);
            progress.send_modify(|c| *c += 1);
        }
        if !more {
            break;
        }
    }
    producer.close().await.expect("close producer");
    confirmed
}

/// The application on subscription "s": acks every message except poison
/// ones, which it nacks until the dead-letter policy takes them. Its
/// consumer has ack receipts: each ack's result (awaited alongside the
/// next receives, since a batch member's ack waits for its batch) goes to
/// the topic's ack book. Ends when the consumer is closed.
pub(super) async fn consume(mut consumer: Consumer, books: Arc<Books>, topic: usize, seed: u64) {
    let acker = consumer.clone();
    let mut acking = FuturesUnordered::new();
    loop {
        tokio::select! {
            next = consumer.receive() => {
                let Ok(m) = next else { break };
                let n = number(m.payload());
                if poison(seed, topic, n) {
                    books.acks(topic).nacked(m.id());
                    let _ = consumer.nack(&m);
                    continue;
                }
                books.acks(topic).delivered(n, m.id());
                books.record(topic, n, false);
                let acker = acker.clone();
                acking.push(async move { (m.id(), acker.ack(&m).await) });
            }
            Some((id, result)) = acking.next() => books.acks(topic).acked(id, result),
        }
    }
    while let Some((id, result)) = acking.next().await {
        books.acks(topic).acked(id, result);
    }
}

/// A member of the Failover group: acks everything, with receipts, into
/// the group's book. Ends when the consumer is closed.
pub(super) async fn consume_in_group(mut consumer: Consumer, group: Arc<Group>) {
    let acker = consumer.clone();
    let mut acking = FuturesUnordered::new();
    loop {
        tokio::select! {
            next = consumer.receive() => {
                let Ok(m) = next else { break };
                group.delivered(number(m.payload()), m.id());
                let acker = acker.clone();
                acking.push(async move { (m.id(), acker.ack(&m).await) });
            }
            Some((id, result)) = acking.next() => {
                group.book.lock().expect("ack book").acked(id, result);
            }
        }
    }
    while let Some((id, result)) = acking.next().await {
        group.book.lock().expect("ack book").acked(id, result);
    }
}

/// Reads a topic's dead-letter copies into its ledger. Ends when the
/// consumer is closed.
pub(super) async fn read_dead_letters(mut reader: Consumer, books: Arc<Books>, topic: usize) {
    while let Ok(m) = reader.receive().await {
        books.record(topic, number(m.payload()), true);
        let _ = reader.ack(&m).await;
    }
}

/// Reads a topic from the start into `tail` until `stop` changes, then
/// closes the reader (which must succeed).
pub(super) async fn tail(mut reader: Reader, tail: Arc<Tail>, mut stop: watch::Receiver<()>) {
    loop {
        tokio::select! {
            next = reader.read_next() => {
                let m = next.expect("the reader reads on through every fault");
                tail.record(m.id(), number(m.payload()));
            }
            _ = stop.changed() => break,
        }
    }
    reader.close().await.expect("close the reader");
}
