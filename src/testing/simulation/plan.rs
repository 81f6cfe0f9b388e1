//! What one seed runs: the workload and the faults, chosen by one seeded
//! random generator before anything starts.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::compression::Compression;
use crate::consumer::SubscriptionType;

/// A small, fast, seedable generator (SplitMix64): the same seed gives the
/// same choices on every machine.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A number in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True one time in `n`.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    pub(crate) fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

/// A stateless hash of a value, for choices that must not depend on the
/// order in which tasks run (what the application does with a message).
pub(crate) use crate::backoff::splitmix64 as mix;

/// How the application takes its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// `receive()`, then `ack` / `nack`.
    Receive,
    /// The consumer as a `Stream`.
    Stream,
    /// `Consumer::run` with a handler returning an `Outcome`.
    Run,
    /// `receive_batch()`, then each message.
    Batch,
}

/// How the application acks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckStyle {
    /// `ack` of each message.
    Individual,
    /// `ack_cumulative` now and then (Exclusive and Failover only).
    Cumulative,
    /// `ack` of each, sent grouped every 100 ms.
    Grouped,
}

/// The workload of one seed.
#[derive(Debug, Clone)]
pub(crate) struct Workload {
    /// 0: a topic that is not partitioned; else its partitions.
    pub(crate) partitions: u32,
    pub(crate) kind: SubscriptionType,
    /// Consumers on the subscription at the start (one for Exclusive).
    pub(crate) consumers: usize,
    pub(crate) api: Api,
    pub(crate) acks: AckStyle,
    pub(crate) receipts: bool,
    pub(crate) batch_index_ack: bool,
    pub(crate) receiver_queue: u32,
    pub(crate) producers: usize,
    pub(crate) messages: u64,
    pub(crate) batching: bool,
    pub(crate) compression: Compression,
    /// One message in this many is larger than the broker's message size
    /// and goes in chunks (0: no chunking). The chunking producer does not
    /// batch.
    pub(crate) chunk_every: u64,
    pub(crate) keys: u64,
    /// Nack delay: none is immediate.
    pub(crate) nack_delay: Option<Duration>,
    pub(crate) ack_timeout: Option<Duration>,
    /// Deliveries before the dead-letter topic (Shared and Key_Shared).
    pub(crate) dead_letter_after: Option<u32>,
    /// `run` with a lease (its handler sometimes slower than the timeout).
    pub(crate) lease: bool,
    /// A reader tails the topic from the earliest message.
    pub(crate) reader: bool,
    /// The client's memory limit, when one is set.
    pub(crate) memory_limit: Option<usize>,
}

/// The broker's message size in a simulation: small, so chunks are cheap.
pub(crate) const MAX_MESSAGE_SIZE: usize = 16 * 1024;

impl Workload {
    pub(crate) fn choose(rng: &mut Rng) -> Self {
        let kind = rng.pick(&[
            SubscriptionType::Exclusive,
            SubscriptionType::Shared,
            SubscriptionType::Failover,
            SubscriptionType::KeyShared,
        ]);
        let in_order = matches!(
            kind,
            SubscriptionType::Exclusive | SubscriptionType::Failover
        );
        let api = rng.pick(&[Api::Receive, Api::Stream, Api::Run, Api::Batch]);
        let acks = if in_order && api != Api::Run && rng.one_in(3) {
            AckStyle::Cumulative
        } else if rng.one_in(3) {
            AckStyle::Grouped
        } else {
            AckStyle::Individual
        };
        let partitions = if rng.one_in(2) {
            0
        } else {
            rng.range(2, 4) as u32
        };
        let batching = rng.one_in(2);
        let shared = !in_order;
        Self {
            partitions,
            kind,
            consumers: if kind == SubscriptionType::Exclusive {
                1
            } else {
                rng.range(1, 3) as usize
            },
            api,
            acks,
            receipts: rng.one_in(2),
            batch_index_ack: batching && rng.one_in(2),
            receiver_queue: rng.pick(&[4, 16, 100, 1000]),
            producers: rng.range(1, 2) as usize,
            messages: rng.range(20, 120),
            batching,
            compression: rng.pick(&[
                Compression::None,
                Compression::Lz4,
                Compression::Zstd,
                Compression::Snappy,
                Compression::Zlib,
            ]),
            // Chunks only on Exclusive and Failover, as Apache Pulsar
            // documents: Shared spreads the chunks of one message over the
            // consumers, and Key_Shared, keeping the order of a key whose
            // consumer changed, holds the rest of a message from its new
            // consumer until the old one acks a first chunk it cannot.
            chunk_every: if rng.one_in(3) {
                let every = rng.range(3, 9);
                if matches!(kind, SubscriptionType::Shared | SubscriptionType::KeyShared) {
                    0
                } else {
                    every
                }
            } else {
                0
            },
            keys: rng.range(1, 8),
            nack_delay: rng
                .one_in(2)
                .then(|| Duration::from_millis(rng.range(100, 2000))),
            ack_timeout: rng.one_in(3).then(|| Duration::from_secs(rng.range(2, 10))),
            dead_letter_after: (shared && acks != AckStyle::Cumulative && rng.one_in(2))
                .then(|| rng.range(1, 3) as u32),
            lease: api == Api::Run && rng.one_in(2),
            reader: rng.one_in(3),
            memory_limit: rng.one_in(4).then(|| rng.pick(&[64 * 1024, 256 * 1024])),
        }
    }

    /// The application takes its messages with `Consumer::run` (a
    /// handler of its own).
    pub(crate) fn take_by_run(&mut self) {
        self.api = Api::Run;
        if self.acks == AckStyle::Cumulative {
            self.acks = AckStyle::Individual;
        }
    }

    /// One line naming every choice.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{:?} x{} on {} via {:?}, acks {:?}{}{}, queue {}, {} producer(s) x {} msgs{}{:?}{}, keys {}{}{}{}{}{}{}",
            self.kind,
            self.consumers,
            match self.partitions {
                0 => "a topic".to_owned(),
                n => format!("{n} partitions"),
            },
            self.api,
            self.acks,
            if self.receipts { " with receipts" } else { "" },
            if self.batch_index_ack {
                ", batch index ack"
            } else {
                ""
            },
            self.receiver_queue,
            self.producers,
            self.messages,
            if self.batching { ", batched " } else { ", " },
            self.compression,
            match self.chunk_every {
                0 => String::new(),
                n => format!(", 1 in {n} chunked"),
            },
            self.keys,
            self.nack_delay
                .map_or(String::new(), |d| format!(", nack delay {d:?}")),
            self.ack_timeout
                .map_or(String::new(), |d| format!(", ack timeout {d:?}")),
            self.dead_letter_after
                .map_or(String::new(), |n| format!(", dead letter after {n}")),
            if self.lease { ", leased" } else { "" },
            if self.reader { ", a reader" } else { "" },
            self.memory_limit
                .map_or(String::new(), |b| format!(", memory limit {b} B")),
        )
    }
}

/// A fault the simulation injects, or an act of the application that races
/// the rest (a seek, a consumer leaving or joining, a close).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// Every connection cut, as a broker restart does: what consumers
    /// held (delivered, unacked) is delivered again.
    Cut,
    /// The topic unloaded: CLOSE_PRODUCER and CLOSE_CONSUMER from the
    /// broker.
    Unload,
    /// CLOSE_CONSUMER from the broker to every consumer of the topic.
    CloseConsumers,
    /// The subscription's cursor reset to the first message from outside.
    ResetCursor,
    /// The next three SENDs refused.
    FailSends,
    /// SENDs confirmed only after 2 s, for the next 5 s.
    SlowSends,
    /// The application seeks the subscription to the earliest message.
    Seek,
    /// A consumer closes (racing its own acks) and a new one joins.
    Rejoin,
}

impl FaultKind {
    const ALL: [(Self, &'static str); 8] = [
        (Self::Cut, "cut"),
        (Self::Unload, "unload"),
        (Self::CloseConsumers, "close-consumers"),
        (Self::ResetCursor, "reset-cursor"),
        (Self::FailSends, "fail-sends"),
        (Self::SlowSends, "slow-sends"),
        (Self::Seek, "seek"),
        (Self::Rejoin, "rejoin"),
    ];

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("?", |(_, n)| n)
    }

    /// Whether it moves the subscription, so that messages acked before
    /// it may rightly come again.
    pub(crate) fn rewinds(self) -> bool {
        matches!(self, Self::ResetCursor | Self::Seek)
    }

    /// Whether it ends consumers' subscriptions (they subscribe again).
    pub(crate) fn ends_subscriptions(self) -> bool {
        !matches!(self, Self::FailSends | Self::SlowSends)
    }
}

/// A fault and when it comes: after the broker's `at`-th change (a frame
/// in, a fault, a tick).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fault {
    /// What happens.
    pub kind: FaultKind,
    /// After how many broker changes.
    pub at: u64,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.kind.name(), self.at)
    }
}

/// A fault list that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?} is not a fault (KIND@CHANGES, KIND one of cut, unload, close-consumers, reset-cursor, fail-sends, slow-sends, seek, rejoin)"
)]
pub struct BadFault {
    text: String,
}

impl FromStr for Fault {
    type Err = BadFault;

    fn from_str(text: &str) -> Result<Self, BadFault> {
        let bad = || BadFault {
            text: text.to_owned(),
        };
        let (name, at) = text.split_once('@').ok_or_else(bad)?;
        let kind = FaultKind::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(k, _)| *k)
            .ok_or_else(bad)?;
        let at = at.parse().map_err(|_| bad())?;
        Ok(Self { kind, at })
    }
}

/// The faults of one seed, in the order they come.
pub(crate) fn choose_faults(rng: &mut Rng, workload: &Workload) -> Vec<Fault> {
    // About how many broker changes the workload makes: sends, their
    // deliveries, acks, flows.
    let span = workload.messages * workload.producers as u64 * 4 + 50;
    let count = rng.below(6);
    let mut kinds: Vec<FaultKind> = FaultKind::ALL.iter().map(|(k, _)| *k).collect();
    if workload.kind == SubscriptionType::Exclusive {
        // One consumer only: a rejoin is a close then a subscribe.
        kinds.retain(|k| *k != FaultKind::Rejoin || rng.one_in(2));
    }
    let mut faults: Vec<Fault> = (0..count)
        .map(|_| Fault {
            kind: rng.pick(&kinds),
            at: rng.range(5, span),
        })
        .collect();
    faults.sort_by_key(|f| f.at);
    faults
}
