//! What the demo saw, per kind of message (pure): every delivery, every
//! outcome, every dead-letter arrival; the progress line and the closing
//! table come from here, so they are tested without a broker.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The kinds of message the demo produces, each meeting a different fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// Acked on first delivery.
    Ack,
    /// Nacked on first delivery, acked when it comes back.
    NackOnce,
    /// Left unacked on first delivery: the ack timeout brings it back.
    TimeoutOnce,
    /// The handler panics on first delivery (a nack), then acks.
    PanicOnce,
    /// Sent to the retry topic with a delay, acked when it comes back.
    RetryLater,
    /// Fails every time: ends in the dead-letter topic.
    Poison,
}

impl Kind {
    /// Every kind, in table order.
    pub(crate) const ALL: [Self; 6] = [
        Self::Ack,
        Self::NackOnce,
        Self::TimeoutOnce,
        Self::PanicOnce,
        Self::RetryLater,
        Self::Poison,
    ];

    /// The kind of message number `n`: half are plain acks.
    pub(crate) fn of(n: u32) -> Self {
        match n % 10 {
            5 => Self::NackOnce,
            6 => Self::TimeoutOnce,
            7 => Self::Poison,
            8 => Self::RetryLater,
            9 => Self::PanicOnce,
            _ => Self::Ack,
        }
    }

    /// The name in the `kind` property and the table.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Ack => "ack",
            Self::NackOnce => "nack-once",
            Self::TimeoutOnce => "timeout-once",
            Self::PanicOnce => "panic-once",
            Self::RetryLater => "retry-later",
            Self::Poison => "poison",
        }
    }

    /// The kind a `kind` property names.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// What the handler did with a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Did {
    Acked,
    Nacked,
    LeftToTimeout,
    Panicked,
    RetriedLater,
}

/// One thing that happened to message `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// Handed to the handler with this redelivery count (and
    /// `RECONSUMETIMES`, when it came through the retry topic).
    Delivered {
        n: u32,
        redelivery_count: u32,
        reconsume_times: u32,
        did: Did,
    },
    /// Read from the dead-letter topic.
    DeadLettered { n: u32 },
}

#[derive(Debug, Default, Clone)]
struct Row {
    produced: u32,
    deliveries: u32,
    redelivery_counts: BTreeSet<u32>,
    nacks: u32,
    left: u32,
    panics: u32,
    retried: u32,
    via_retry_topic: u32,
    acked: BTreeSet<u32>,
    dead_lettered: BTreeSet<u32>,
}

/// The demo's bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    rows: BTreeMap<Kind, Row>,
}

impl Tally {
    /// A tally for messages `0..count`.
    pub(crate) fn new(count: u32) -> Self {
        let mut rows: BTreeMap<Kind, Row> = BTreeMap::new();
        for n in 0..count {
            rows.entry(Kind::of(n)).or_default().produced += 1;
        }
        Self { rows }
    }

    /// Counts `event`.
    pub(crate) fn record(&mut self, event: &Event) {
        match *event {
            Event::Delivered {
                n,
                redelivery_count,
                reconsume_times,
                did,
            } => {
                let row = self.rows.entry(Kind::of(n)).or_default();
                row.deliveries += 1;
                row.redelivery_counts.insert(redelivery_count);
                if reconsume_times > 0 {
                    row.via_retry_topic += 1;
                }
                match did {
                    Did::Acked => {
                        row.acked.insert(n);
                    }
                    Did::Nacked => row.nacks += 1,
                    Did::LeftToTimeout => row.left += 1,
                    Did::Panicked => row.panics += 1,
                    Did::RetriedLater => row.retried += 1,
                }
            }
            Event::DeadLettered { n } => {
                self.rows
                    .entry(Kind::of(n))
                    .or_default()
                    .dead_lettered
                    .insert(n);
            }
        }
    }

    /// Messages acked or in the dead-letter topic (each counted once).
    pub(crate) fn settled(&self) -> u32 {
        self.rows.values().map(settled).sum()
    }

    /// Messages produced.
    pub(crate) fn produced(&self) -> u32 {
        self.rows.values().map(|r| r.produced).sum()
    }

    /// Every message is acked or dead-lettered.
    pub(crate) fn done(&self) -> bool {
        self.settled() == self.produced()
    }

    /// One line: settled so far, and what each kind is doing.
    pub(crate) fn progress_line(&self) -> String {
        let mut line = format!("settled {}/{}", self.settled(), self.produced());
        for (kind, row) in &self.rows {
            let _ = write!(line, " | {} {}/{}", kind.name(), settled(row), row.produced);
        }
        line
    }

    /// The closing table (Markdown), one row per kind and a total row that
    /// accounts for every message.
    pub(crate) fn summary_table(&self) -> String {
        let mut out = String::from(
            "| kind | produced | deliveries | redelivery counts | nacks | left to ack timeout | panics | retry topic (sent / came back) | acked | in DLQ | unaccounted |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        let mut total = Row::default();
        for (kind, row) in &self.rows {
            let counts: Vec<String> = row.redelivery_counts.iter().map(u32::to_string).collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} |",
                kind.name(),
                row.produced,
                row.deliveries,
                counts.join(", "),
                row.nacks,
                row.left,
                row.panics,
                row.retried,
                row.via_retry_topic,
                row.acked.len(),
                row.dead_lettered.len(),
                row.produced - settled(row),
            );
            total.produced += row.produced;
            total.deliveries += row.deliveries;
            total.nacks += row.nacks;
            total.left += row.left;
            total.panics += row.panics;
            total.retried += row.retried;
            total.via_retry_topic += row.via_retry_topic;
            total.acked.extend(&row.acked);
            total.dead_lettered.extend(&row.dead_lettered);
        }
        let _ = writeln!(
            out,
            "| **all** | {} | {} | | {} | {} | {} | {} / {} | {} | {} | {} |",
            total.produced,
            total.deliveries,
            total.nacks,
            total.left,
            total.panics,
            total.retried,
            total.via_retry_topic,
            total.acked.len(),
            total.dead_lettered.len(),
            total.produced - settled(&total),
        );
        out
    }
}

/// Acked or dead-lettered, each message once.
fn settled(row: &Row) -> u32 {
    let both = row.acked.union(&row.dead_lettered).count();
    u32::try_from(both).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered(n: u32, redelivery_count: u32, did: Did) -> Event {
        Event::Delivered {
            n,
            redelivery_count,
            reconsume_times: 0,
            did,
        }
    }

    #[test]
    fn kinds_cycle_every_ten_messages_and_round_trip_their_names() {
        let kinds: Vec<Kind> = (0..10).map(Kind::of).collect();
        assert_eq!(kinds.iter().filter(|k| **k == Kind::Ack).count(), 5);
        for kind in Kind::ALL {
            assert!(kinds.contains(&kind));
            assert_eq!(Kind::parse(kind.name()), Some(kind));
        }
        assert_eq!(Kind::parse("nope"), None);
    }

    #[test]
    fn a_message_is_settled_once_even_when_acked_twice() {
        let mut tally = Tally::new(10);
        tally.record(&delivered(0, 0, Did::Acked));
        tally.record(&delivered(0, 0, Did::Acked));
        assert_eq!(tally.settled(), 1);
        assert!(!tally.done());
    }

    #[test]
    fn the_tally_is_done_when_every_message_is_acked_or_dead_lettered() {
        let mut tally = Tally::new(10);
        for n in 0..10 {
            if Kind::of(n) == Kind::Poison {
                for count in 0..3 {
                    tally.record(&delivered(n, count, Did::Nacked));
                }
                assert!(!tally.done());
                tally.record(&Event::DeadLettered { n });
            } else {
                tally.record(&delivered(n, 0, Did::Acked));
            }
        }
        assert!(tally.done());
        let table = tally.summary_table();
        assert!(
            table.contains("| poison | 1 | 3 | 0, 1, 2 | 3 | 0 | 0 | 0 / 0 | 0 | 1 | 0 |"),
            "{table}"
        );
        assert!(
            table.contains("| **all** | 10 | 12 | | 3 | 0 | 0 | 0 / 0 | 9 | 1 | 0 |"),
            "{table}"
        );
    }

    #[test]
    fn unsettled_messages_show_in_the_table_and_the_progress_line() {
        let mut tally = Tally::new(20);
        tally.record(&Event::Delivered {
            n: 8,
            redelivery_count: 0,
            reconsume_times: 0,
            did: Did::RetriedLater,
        });
        tally.record(&Event::Delivered {
            n: 8,
            redelivery_count: 0,
            reconsume_times: 1,
            did: Did::Acked,
        });
        assert!(tally.progress_line().starts_with("settled 1/20"));
        assert!(tally.progress_line().contains("retry-later 1/2"));
        let table = tally.summary_table();
        assert!(
            table.contains("| retry-later | 2 | 2 | 0 | 0 | 0 | 0 | 1 / 1 | 1 | 0 | 1 |"),
            "{table}"
        );
        assert!(table.contains("| **all** | 20 |"), "{table}");
        assert!(table.trim_end().ends_with("| 19 |"), "{table}");
    }
}
