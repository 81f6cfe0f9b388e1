//! The run's twins: one workload on two topics, driven by pulsar-wire on
//! one and by the Java client of the broker's version on the other
//! (`tests/java/ChaosPeer.java`), both through the fault proxy in front of
//! the Pulsar proxy and under the same faults (a fault that picks the twins
//! hits both topics). One producer, two Shared consumers on subscription
//! "t", each on a client of its own, with ack receipts, acking every
//! message. The run prints what each client confirmed, lost and received
//! twice, side by side.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Child;

use super::roles::IN_FLIGHT;
use super::{IDLE, verdict::missing};
use crate::common::acks::AckBook;

/// The subscription of the twins' consumers.
pub(super) const SUBSCRIPTION: &str = "t";

/// What one client did on its twin topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Outcome {
    pub(super) confirmed: u64,
    /// Confirmed messages received at least once.
    pub(super) consumed: u64,
    /// Every message received, copies included.
    pub(super) deliveries: u64,
    pub(super) lost: u64,
}

impl Outcome {
    /// pulsar-wire's outcome from its book and its confirmed numbers.
    pub(super) fn of(book: &AckBook, confirmed: &[u64]) -> Self {
        let lost = missing(book, confirmed).len() as u64;
        let confirmed_count = confirmed.len() as u64;
        Self {
            confirmed: confirmed_count,
            consumed: confirmed_count - lost,
            deliveries: book.deliveries(),
            lost,
        }
    }

    /// Deliveries beyond the first of each message received.
    pub(super) fn duplicates(&self) -> u64 {
        self.deliveries.saturating_sub(self.consumed)
    }

    /// The line that says it, for `who`.
    pub(super) fn line(&self, who: &str) -> String {
        let share = if self.consumed == 0 {
            0.0
        } else {
            100.0 * self.duplicates() as f64 / self.consumed as f64
        };
        format!(
            "{who} confirmed {}, consumed {}, lost {}, duplicates {} ({share:.2}%)",
            self.confirmed,
            self.consumed,
            self.lost,
            self.duplicates()
        )
    }

    /// Parses the peer's `RESULT confirmed=C consumed=U deliveries=D
    /// lost=L` line.
    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.strip_prefix("RESULT ")?.split(' ').map(|field| {
            let (_, value) = field.split_once('=')?;
            value.parse().ok()
        });
        let mut next = || fields.next().flatten();
        Some(Self {
            confirmed: next()?,
            consumed: next()?,
            deliveries: next()?,
            lost: next()?,
        })
    }
}

/// Starts the Java client's twin on `topic` through `url`, producing for
/// `seconds`.
pub(super) async fn start_java(url: &str, topic: &str, seconds: u64) -> Child {
    let (seconds, in_flight, idle) = (
        seconds.to_string(),
        IN_FLIGHT.to_string(),
        IDLE.as_secs().to_string(),
    );
    crate::common::java::peer("ChaosPeer", &[url, topic, &seconds, &in_flight, &idle])
        .await
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Java client's twin")
}

/// Waits for the Java twin to finish (it drains its subscription itself);
/// its outcome.
pub(super) async fn java_outcome(peer: Child) -> Outcome {
    let waited = tokio::time::timeout(IDLE + Duration::from_secs(600), peer.wait_with_output())
        .await
        .expect("the Java client's twin did not finish");
    let out = waited.expect("wait for the Java client's twin");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(Outcome::parse)
        .filter(|_| out.status.success())
        .unwrap_or_else(|| {
            panic!(
                "the Java client's twin failed ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peers_result_line_parses() {
        let parsed = Outcome::parse("RESULT confirmed=10 consumed=9 deliveries=12 lost=1");
        let expected = Outcome {
            confirmed: 10,
            consumed: 9,
            deliveries: 12,
            lost: 1,
        };
        assert_eq!(parsed, Some(expected));
        assert_eq!(expected.duplicates(), 3);
        assert_eq!(Outcome::parse("RESULT confirmed=10"), None);
    }
}
