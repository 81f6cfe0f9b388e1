//! The chaos run's parts that do the work: producers, the consumers of
//! subscription "s" (acking, or nacking poison), the Failover group, the
//! dead-letter readers and the tailing reader.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use pulsar_wire::ConsumerError;
use pulsar_wire::consumer::{Consumer, Message, Reader};
use pulsar_wire::producer::{Producer, SendReceipt};
use tokio::sync::watch;

use super::books::{Books, Errors, Group, Tail};
use super::faults::poison;
use crate::traffic::{body, number};

/// Sends a producer keeps waiting for receipts.
pub(super) const IN_FLIGHT: usize = 200;

/// Sends numbered messages until `deadline`; returns the confirmed numbers,
/// in the order they were sent. A send that fails for a passing reason is
/// recorded in `errors` and not confirmed; after any other error it sends
/// no more (it still waits for the receipts of the sends in flight).
pub(super) async fn produce(
    producer: Producer,
    topic: usize,
    deadline: tokio::time::Instant,
    progress: Arc<watch::Sender<u64>>,
    errors: Arc<Errors>,
) -> Vec<u64> {
    let role = format!("producer of topic {topic}");
    let mut pending: std::collections::VecDeque<(u64, SendReceipt)> = Default::default();
    let mut confirmed = Vec::new();
    let mut n = 0;
    let mut stopped = false;
    loop {
        let more = !stopped && tokio::time::Instant::now() < deadline;
        if more {
            match producer.send(body(n)).await {
                Ok(receipt) => pending.push_back((n, receipt)),
                Err(e) => {
                    stopped |=
                        !errors.met(&role, format!("queuing send {n}: {e}"), e.is_retryable());
                }
            }
            n += 1;
        }
        while pending.len() > IN_FLIGHT || (!more && !pending.is_empty()) {
            let (i, receipt) = pending.pop_front().expect("non-empty");
            match receipt.await {
                Ok(_) => {
                    confirmed.push(i);
                    progress.send_modify(|c| *c += 1);
                }
                Err(e) => {
                    stopped |= !errors.met(&role, format!("send {i}: {e}"), e.is_retryable());
                }
            }
        }
        if !more {
            break;
        }
    }
    producer.close().await.expect("close producer");
    confirmed
}

/// What a consumer role does after a receive.
enum Next {
    /// Handles this message.
    Message(Message),
    /// Receives again: the error may pass (it is recorded).
    Again,
    /// Stops: the run closed the consumer, or the error is one it cannot
    /// go on from (it is recorded, and fails the run).
    Stop,
}

/// [`Next`] for the outcome of a receive by `role`.
fn received(next: Result<Message, ConsumerError>, role: &str, errors: &Errors) -> Next {
    match next {
        Ok(m) => Next::Message(m),
        // The end of the run closes every consumer.
        Err(ConsumerError::Closed) => Next::Stop,
        Err(e) => {
            if errors.met(role, format!("receive: {e}"), e.is_retryable()) {
                Next::Again
            } else {
                Next::Stop
            }
        }
    }
}

/// The application on subscription "s": acks every message except poison
/// ones, which it nacks until the dead-letter policy takes them. Its
/// consumer has ack receipts: each ack's result (awaited alongside the
/// next receives, since a batch member's ack waits for its batch) goes to
/// the topic's ack book. Ends when the consumer is closed.
pub(super) async fn consume(
    mut consumer: Consumer,
    books: Arc<Books>,
    topic: usize,
    which: usize,
    seed: u64,
    errors: Arc<Errors>,
) {
    let role = format!("consumer {which} of topic {topic}");
    let acker = consumer.clone();
    let mut acking = FuturesUnordered::new();
    loop {
        tokio::select! {
            next = consumer.receive() => {
                let m = match received(next, &role, &errors) {
                    Next::Message(m) => m,
                    Next::Again => continue,
                    Next::Stop => break,
                };
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

/// A member of a group (the Failover group, a twin's consumers): acks
/// everything, with receipts, into the group's book. Ends when the
/// consumer is closed.
pub(super) async fn consume_in_group(
    mut consumer: Consumer,
    group: Arc<Group>,
    role: String,
    errors: Arc<Errors>,
) {
    let acker = consumer.clone();
    let mut acking = FuturesUnordered::new();
    loop {
        tokio::select! {
            next = consumer.receive() => {
                let m = match received(next, &role, &errors) {
                    Next::Message(m) => m,
                    Next::Again => continue,
                    Next::Stop => break,
                };
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
pub(super) async fn read_dead_letters(
    mut reader: Consumer,
    books: Arc<Books>,
    topic: usize,
    errors: Arc<Errors>,
) {
    let role = format!("dead-letter reader of topic {topic}");
    loop {
        let m = match received(reader.receive().await, &role, &errors) {
            Next::Message(m) => m,
            Next::Again => continue,
            Next::Stop => break,
        };
        books.record(topic, number(m.payload()), true);
        let _ = reader.ack(&m).await;
    }
}

/// Reads a topic from the start into `tail` until `stop` changes, then
/// closes the reader (which must succeed).
pub(super) async fn tail(
    mut reader: Reader,
    tail: Arc<Tail>,
    mut stop: watch::Receiver<()>,
    errors: Arc<Errors>,
) {
    loop {
        tokio::select! {
            next = reader.read_next() => {
                match received(next, "the tailing reader", &errors) {
                    Next::Message(m) => tail.record(m.id(), number(m.payload())),
                    Next::Again => {}
                    Next::Stop => break,
                }
            }
            _ = stop.changed() => break,
        }
    }
    reader.close().await.expect("close the reader");
}
