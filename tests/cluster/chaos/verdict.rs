//! The chaos run's verdict: what became of every confirmed message, and
//! whether the reader read each one once and in order.

use pulsar_wire::MessageId;
use pulsar_wire::consumer::DeadLetterCutoff;

use super::books::Books;
use super::cutoff;
use super::faults::poison;
use crate::common::acks::AckBook;

/// What became of the confirmed messages of subscription "s", over all topics.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// Consumed by the application at least once.
    pub(super) consumed: u64,
    /// With a copy in the dead-letter topic.
    pub(super) in_dlq: u64,
    /// Poison messages (the application nacks them).
    pub(super) poisoned: u64,
    /// Consumed and also in the dead-letter topic, on topics that forward
    /// at the limit on arrival: a message whose ack was lost (in flight at
    /// a fault, or with a killed broker) comes back with its count raised.
    pub(super) both_on_arrival: u64,
    /// The same on topics that forward only after a nack: must be 0.
    pub(super) both_java_style: u64,
    /// Deliveries beyond the first of each message.
    pub(super) duplicates: u64,
    /// Dead-letter copies beyond the first of each message.
    pub(super) dead_copies: u64,
    /// Confirmed and neither consumed nor dead-lettered (`topic:n`).
    pub(super) lost: Vec<String>,
}

impl Tally {
    pub(super) fn of(books: &Books, sent: &[Vec<u64>], seed: u64, topics: &[String]) -> Self {
        let mut tally = Self::default();
        for (t, confirmed) in sent.iter().enumerate() {
            let ledger = books.ledgers[t].lock().expect("ledger");
            for &n in confirmed {
                let times = ledger.consumed.get(n as usize).copied().unwrap_or(0);
                let copies = ledger.dead.get(n as usize).copied().unwrap_or(0);
                tally.poisoned += u64::from(poison(seed, t, n));
                tally.consumed += u64::from(times > 0);
                tally.in_dlq += u64::from(copies > 0);
                let both = u64::from(times > 0 && copies > 0);
                if cutoff(t) == DeadLetterCutoff::OnArrival {
                    tally.both_on_arrival += both;
                } else {
                    tally.both_java_style += both;
                }
                tally.duplicates += u64::from(times.saturating_sub(1));
                tally.dead_copies += u64::from(copies.saturating_sub(1));
                if times == 0 && copies == 0 {
                    tally.lost.push(format!("{}:{n}", topics[t]));
                }
            }
        }
        tally
    }
}

/// The confirmed numbers `book` never saw delivered.
pub(super) fn missing(book: &AckBook, confirmed: &[u64]) -> Vec<u64> {
    let seen: std::collections::HashSet<u64> = book.numbers().collect();
    confirmed
        .iter()
        .copied()
        .filter(|n| !seen.contains(n))
        .collect()
}

/// A reader reads each stored message once, in order: ids only grow. It
/// reads every confirmed message, and the first copies of the messages
/// come in the order the producer sent them (a resend after a lost receipt
/// may store a message again, later).
pub(super) fn check_tail(read: &[(MessageId, u64)], confirmed: &[u64]) {
    if let Some(pair) = read.windows(2).find(|w| w[0].0 >= w[1].0) {
        panic!(
            "the reader read {} (m-{}) and then {} (m-{}): not once and in order",
            pair[0].0, pair[0].1, pair[1].0, pair[1].1
        );
    }
    let mut first = std::collections::HashSet::new();
    let order: Vec<u64> = read
        .iter()
        .map(|(_, n)| *n)
        .filter(|n| first.insert(*n))
        .collect();
    let unread: Vec<u64> = confirmed
        .iter()
        .copied()
        .filter(|n| !first.contains(n))
        .take(20)
        .collect();
    assert!(
        unread.is_empty(),
        "confirmed messages the reader never read: {unread:?}"
    );
    if let Some(pair) = order.windows(2).find(|w| w[0] >= w[1]) {
        panic!(
            "the reader read m-{} before m-{}: not the producer's order",
            pair[0], pair[1]
        );
    }
}
