//! The pure bookkeeping of one transaction: where it is, its deadline, and
//! the sends and acks still under way (commit and abort wait for them, as
//! the Java client does). No IO, no clock: `now` comes in.

use std::time::Instant;

use super::TransactionState;

/// Why an operation or an end was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The transaction is not open.
    NotOpen(TransactionState),
    /// Its deadline passed: the coordinator aborts it by itself.
    TimedOut,
}

/// What ending the transaction must do once its operations settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Send END_TXN COMMIT.
    Commit,
    /// Send END_TXN ABORT, as asked.
    Abort,
    /// A commit was asked but `failed` operations failed: abort instead.
    AbortInstead {
        /// How many failed.
        failed: usize,
    },
}

/// The state of one transaction.
#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    state: TransactionState,
    deadline: Instant,
    in_flight: usize,
    failed: usize,
}

impl Ledger {
    /// An open transaction that times out at `deadline`.
    pub(crate) const fn open_until(deadline: Instant) -> Self {
        Self {
            state: TransactionState::Open,
            deadline,
            in_flight: 0,
            failed: 0,
        }
    }

    pub(crate) const fn state(&self) -> TransactionState {
        self.state
    }

    /// Whether no operation is under way.
    pub(crate) const fn settled(&self) -> bool {
        self.in_flight == 0
    }

    /// Whether the transaction's timeout has passed at `now`.
    pub(crate) fn past_deadline(&self, now: Instant) -> bool {
        now >= self.deadline
    }

    fn check_open(&mut self, now: Instant) -> Result<(), Refusal> {
        if self.state == TransactionState::Open && now >= self.deadline {
            self.state = TransactionState::TimedOut;
        }
        match self.state {
            TransactionState::Open => Ok(()),
            TransactionState::TimedOut => Err(Refusal::TimedOut),
            other => Err(Refusal::NotOpen(other)),
        }
    }

    /// A send or ack joins the transaction at `now`.
    pub(crate) fn start_op(&mut self, now: Instant) -> Result<(), Refusal> {
        self.check_open(now)?;
        self.in_flight += 1;
        Ok(())
    }

    /// A send or ack finished; a failed one makes commit abort instead.
    pub(crate) fn finish_op(&mut self, ok: bool) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if !ok {
            self.failed += 1;
        }
    }

    /// Commit (`commit`) or abort asked at `now`. An abort of a
    /// transaction that timed out is refused too: the coordinator aborts it.
    pub(crate) fn start_end(&mut self, now: Instant, commit: bool) -> Result<End, Refusal> {
        self.check_open(now)?;
        self.state = match commit {
            true => TransactionState::Committing,
            false => TransactionState::Aborting,
        };
        Ok(match (commit, self.failed) {
            (false, _) => End::Abort,
            (true, 0) => End::Commit,
            (true, failed) => {
                self.state = TransactionState::Aborting;
                End::AbortInstead { failed }
            }
        })
    }

    /// Failed operations counted so far (read once operations settled:
    /// one may fail while commit waits).
    pub(crate) const fn failed(&self) -> usize {
        self.failed
    }

    /// Commit waited for its operations and found some failed: abort instead.
    pub(crate) fn abort_instead(&mut self) {
        self.state = TransactionState::Aborting;
    }

    /// The end is over: the transaction is `state` for good.
    pub(crate) fn ended(&mut self, state: TransactionState) {
        self.state = state;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn operations_join_until_the_deadline_then_it_is_timed_out() {
        let t0 = crate::clock::now();
        let mut ledger = Ledger::open_until(t0 + secs(10));
        assert_eq!(ledger.start_op(t0 + secs(9)), Ok(()));
        assert!(!ledger.settled());
        ledger.finish_op(true);
        assert!(ledger.settled());
        assert_eq!(ledger.start_op(t0 + secs(10)), Err(Refusal::TimedOut));
        assert_eq!(ledger.state(), TransactionState::TimedOut);
        assert_eq!(
            ledger.start_end(t0 + secs(11), true),
            Err(Refusal::TimedOut)
        );
    }

    #[test]
    fn a_failed_operation_turns_commit_into_abort() {
        let t0 = crate::clock::now();
        let mut ledger = Ledger::open_until(t0 + secs(10));
        ledger.start_op(t0).unwrap();
        ledger.start_op(t0).unwrap();
        ledger.finish_op(true);
        ledger.finish_op(false);
        assert_eq!(
            ledger.start_end(t0, true),
            Ok(End::AbortInstead { failed: 1 })
        );
        assert_eq!(ledger.state(), TransactionState::Aborting);
    }

    #[test]
    fn an_ended_transaction_takes_nothing_more() {
        let t0 = crate::clock::now();
        let mut ledger = Ledger::open_until(t0 + secs(10));
        assert_eq!(ledger.start_end(t0, true), Ok(End::Commit));
        assert_eq!(
            ledger.start_op(t0),
            Err(Refusal::NotOpen(TransactionState::Committing))
        );
        ledger.ended(TransactionState::Committed);
        assert_eq!(
            ledger.start_end(t0, false),
            Err(Refusal::NotOpen(TransactionState::Committed))
        );
        let mut other = Ledger::open_until(t0 + secs(10));
        assert_eq!(other.start_end(t0, false), Ok(End::Abort));
    }
}
