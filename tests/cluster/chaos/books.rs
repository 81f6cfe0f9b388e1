//! The chaos run's books: per topic, what the application consumed and
//! what the dead-letter topic holds, the acks of each subscription, and
//! what the reader read.

use std::collections::HashSet;
use std::sync::Mutex;

use pulsar_wire::MessageId;
use tokio::sync::watch;

use crate::common::acks::{AckBook, Faults};

/// What happened to the messages of one topic on subscription "s".
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// Deliveries to the application of each (non-poison) message.
    pub(super) consumed: Vec<u32>,
    /// Copies of each message read from the dead-letter topic.
    pub(super) dead: Vec<u32>,
    /// Messages consumed or dead-lettered at least once.
    accounted: u64,
}

impl Ledger {
    fn bump(list: &mut Vec<u32>, n: u64) -> bool {
        let i = n as usize;
        if list.len() <= i {
            list.resize(i + 1, 0);
        }
        list[i] += 1;
        list[i] == 1
    }

    fn seen(list: &[u32], n: u64) -> bool {
        list.get(n as usize).is_some_and(|c| *c > 0)
    }

    /// Records one delivery (or one dead letter) of `n`.
    fn record(&mut self, n: u64, dead: bool) {
        let other_seen = if dead {
            Self::seen(&self.consumed, n)
        } else {
            Self::seen(&self.dead, n)
        };
        let list = if dead {
            &mut self.dead
        } else {
            &mut self.consumed
        };
        if Self::bump(list, n) && !other_seen {
            self.accounted += 1;
        }
    }
}

/// The books of every topic's subscription "s" and dead-letter topic.
#[derive(Debug)]
pub(super) struct Books {
    pub(super) ledgers: Vec<Mutex<Ledger>>,
    /// Per topic: the deliveries and acks of subscription "s" (both its
    /// consumers), poison messages left out.
    pub(super) acks: Vec<Mutex<AckBook>>,
    /// Total accounted for, across topics (for waiting on progress).
    pub(super) accounted: watch::Sender<u64>,
}

impl Books {
    pub(super) fn new(topics: usize, faults: &Faults) -> Self {
        Self {
            ledgers: (0..topics).map(|_| Mutex::default()).collect(),
            acks: (0..topics)
                .map(|_| Mutex::new(AckBook::new(faults.clone())))
                .collect(),
            accounted: watch::channel(0).0,
        }
    }

    /// Records that the application consumed `n` (`dead`: that the
    /// dead-letter topic holds a copy of it).
    pub(super) fn record(&self, topic: usize, n: u64, dead: bool) {
        let first = {
            let mut ledger = self.ledgers[topic].lock().expect("ledger");
            let before = ledger.accounted;
            ledger.record(n, dead);
            ledger.accounted > before
        };
        if first {
            self.accounted.send_modify(|a| *a += 1);
        }
    }

    /// The ack book of `topic`'s subscription "s".
    pub(super) fn acks(&self, topic: usize) -> std::sync::MutexGuard<'_, AckBook> {
        self.acks[topic].lock().expect("ack book")
    }
}

/// A group of consumers on one subscription: its ack book, and how many
/// distinct messages it was handed (for waiting on progress).
#[derive(Debug)]
pub(super) struct Group {
    pub(super) book: Mutex<AckBook>,
    pub(super) distinct: watch::Sender<u64>,
}

impl Group {
    pub(super) fn new(faults: &Faults) -> Self {
        Self {
            book: Mutex::new(AckBook::new(faults.clone())),
            distinct: watch::channel(0).0,
        }
    }

    /// Message `n` was handed out under `id`.
    pub(super) fn delivered(&self, n: u64, id: MessageId) {
        let distinct = {
            let mut book = self.book.lock().expect("ack book");
            book.delivered(n, id);
            book.distinct() as u64
        };
        self.distinct.send_replace(distinct);
    }
}

/// What a reader read, in order.
#[derive(Debug)]
pub(super) struct Tail {
    /// Every message read: its id and payload number.
    pub(super) read: Mutex<Vec<(MessageId, u64)>>,
    numbers: Mutex<HashSet<u64>>,
    /// How many distinct messages it read (for waiting on progress).
    pub(super) distinct: watch::Sender<u64>,
}

impl Tail {
    pub(super) fn new() -> Self {
        Self {
            read: Mutex::default(),
            numbers: Mutex::default(),
            distinct: watch::channel(0).0,
        }
    }

    pub(super) fn record(&self, id: MessageId, n: u64) {
        self.read.lock().expect("tail").push((id, n));
        let distinct = {
            let mut numbers = self.numbers.lock().expect("tail");
            numbers.insert(n);
            numbers.len() as u64
        };
        self.distinct.send_replace(distinct);
    }
}

/// The errors the roles met. One that may pass (the client says so: a
/// send or receive that failed for a passing reason while brokers are
/// killed or connections cut) is recorded and the role goes on; the run
/// prints them all. Any other kind is one the client should never return
/// under these faults: the role stops, and the run fails on it.
#[derive(Debug, Default)]
pub(super) struct Errors(Mutex<Vec<Met>>);

/// One error a role met.
#[derive(Debug)]
pub(super) struct Met {
    /// Which role, e.g. "consumer 1 of topic 2".
    pub(super) role: String,
    /// The error, as displayed (with what the role was doing).
    pub(super) error: String,
    /// Whether it may pass: the role went on.
    pub(super) passing: bool,
}

impl Errors {
    /// Records `error`, met by `role`; returns whether the role goes on.
    pub(super) fn met(&self, role: &str, error: String, passing: bool) -> bool {
        self.0.lock().expect("errors").push(Met {
            role: role.to_owned(),
            error,
            passing,
        });
        passing
    }

    /// The errors met, in the order they came: (passing, not passing).
    pub(super) fn split(&self) -> (Vec<String>, Vec<String>) {
        let met = self.0.lock().expect("errors");
        let line = |m: &Met| format!("{}: {}", m.role, m.error);
        (
            met.iter().filter(|m| m.passing).map(line).collect(),
            met.iter().filter(|m| !m.passing).map(line).collect(),
        )
    }
}
