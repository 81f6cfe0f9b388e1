//! Transactions: produce and acknowledge atomically, for exactly-once
//! consume-transform-produce.
//!
//! [`Client::transaction`] begins a [`Transaction`] on one of the cluster's
//! transaction coordinators. Messages sent with
//! [`Producer::send_in`](crate::producer::Producer::send_in) stay invisible
//! to consumers until it commits, and are dropped if it aborts; acks made
//! with [`Consumer::ack_in`](crate::Consumer::ack_in) take effect on commit
//! and are undone on abort (the messages come back). A transaction that
//! outlives its timeout is aborted by its coordinator; commit then fails
//! with [`TransactionError::TimedOut`].
//!
//! As in the Java client: a topic partition is added to the transaction
//! (ADD_PARTITION_TO_TXN) before the first message to it is sent, a
//! subscription (ADD_SUBSCRIPTION_TO_TXN) before the first ack on it, and
//! commit and abort wait until every send and ack of the transaction is
//! answered. If one of them failed, commit aborts instead
//! ([`TransactionError::OperationFailed`]).
//!
//! The broker must run its transaction coordinator
//! (`transactionCoordinatorEnabled=true`), and the client must be built with
//! [`enable_transaction(true)`](crate::ClientBuilder::enable_transaction).
//!
//! # Examples
//! ```no_run
//! use std::time::Duration;
//! # async fn demo(client: pulsar_wire::Client, mut input: pulsar_wire::Consumer,
//! #               output: pulsar_wire::producer::Producer) -> Result<(), pulsar_wire::Error> {
//! let msg = input.receive().await?;
//! let txn = client.transaction().timeout(Duration::from_secs(30)).begin().await?;
//! output.send_in(&txn, msg.payload().clone()).await?;
//! input.ack_in(&txn, &msg).await?;
//! txn.commit().await?;
//! # Ok(()) }
//! ```

pub(crate) mod coordinator;
mod error;
mod ledger;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

pub use error::TransactionError;

use crate::client::Client;
use crate::clock;
use crate::connection::Response;
use crate::ids::TxnId;
use crate::proto::TxnAction;
use crate::wire::commands;
use ledger::{End, Ledger, Refusal};

/// The timeout of a transaction whose builder was given none (as the Java client).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionState {
    /// Sends and acks may join it.
    Open,
    /// Commit is under way.
    Committing,
    /// Abort is under way.
    Aborting,
    /// Committed: its messages are visible, its acks applied.
    Committed,
    /// Aborted: its messages are dropped, its acks undone.
    Aborted,
    /// It outlived its timeout; its coordinator aborts it.
    TimedOut,
    /// Commit or abort failed; the coordinator aborts it at its timeout
    /// unless it ended meanwhile.
    Failed,
}

/// Configures a transaction; [`begin`](Self::begin) starts it.
#[derive(Debug, Clone)]
#[must_use = "a transaction builder does nothing until `begin`"]
pub struct TransactionBuilder {
    client: Client,
    timeout: Duration,
}

impl TransactionBuilder {
    pub(crate) const fn new(client: Client) -> Self {
        Self {
            client,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// How long the transaction may stay open: past it, its coordinator
    /// aborts it. Default [`DEFAULT_TIMEOUT`] (60 s); whole milliseconds.
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Starts the transaction (NEW_TXN), finding and attaching the
    /// coordinators first if this is the client's first transaction.
    ///
    /// # Errors
    /// [`TransactionError::NotEnabled`] without `enable_transaction(true)`,
    /// [`TransactionError::InvalidOption`] for a timeout under 1 ms, and the
    /// coordinator's errors: [`TransactionError::Lookup`],
    /// [`TransactionError::CoordinatorNotFound`], or
    /// [`TransactionError::Request`] naming the request that failed (a
    /// broker without transactions may not answer TC_CLIENT_CONNECT at all:
    /// it times out after the operation timeout).
    pub async fn begin(self) -> Result<Transaction, TransactionError> {
        if self.timeout < Duration::from_millis(1) {
            return Err(TransactionError::InvalidOption {
                option: "timeout",
                reason: "must be at least 1 ms",
            });
        }
        let coordinators = self
            .client
            .coordinators()
            .ok_or(TransactionError::NotEnabled)?;
        let started = clock::now();
        let id = coordinators.new_txn(&self.client, self.timeout).await?;
        tracing::debug!(txn = %id, timeout = ?self.timeout, "transaction begun");
        let ledger = Ledger::open_until(clock::after(started, self.timeout));
        Ok(Transaction {
            inner: Arc::new(Inner {
                id,
                timeout: self.timeout,
                client: self.client,
                ledger: watch::Sender::new(ledger),
                partitions: tokio::sync::Mutex::new(HashSet::new()),
                subscriptions: tokio::sync::Mutex::new(HashSet::new()),
                on_end: Mutex::new(Vec::new()),
            }),
        })
    }
}

/// An open transaction: a handle to send and ack in, then commit or
/// abort. Cheap to clone (clones are the same transaction).
#[derive(Debug, Clone)]
pub struct Transaction {
    inner: Arc<Inner>,
}

/// Run once the transaction ended, with whether it committed: a consumer
/// settles what it acked in it (committed), or asks for it again (aborted,
/// timed out, or an end whose outcome is unknown: the broker ignores a
/// redelivery request for a message a commit acked).
pub(crate) struct EndHook(pub(crate) Box<dyn FnOnce(bool) + Send + Sync>);

impl std::fmt::Debug for EndHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EndHook")
    }
}

struct Inner {
    id: TxnId,
    timeout: Duration,
    client: Client,
    ledger: watch::Sender<Ledger>,
    /// Topic partitions added to the transaction.
    partitions: tokio::sync::Mutex<HashSet<String>>,
    /// (topic, subscription) pairs added to the transaction.
    subscriptions: tokio::sync::Mutex<HashSet<(String, String)>>,
    on_end: Mutex<Vec<EndHook>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id)
            .field("state", &self.ledger.borrow().state())
            .finish_non_exhaustive()
    }
}

/// One send or ack of a transaction, under way: commit and abort wait until
/// it is finished. Dropped unfinished, it counts as failed.
#[derive(Debug)]
pub(crate) struct TxnOp {
    txn: Transaction,
    done: bool,
}

impl TxnOp {
    /// The operation is over: `ok` if the broker took it.
    pub(crate) fn finish(mut self, ok: bool) {
        self.done = true;
        self.txn.inner.ledger.send_modify(|l| l.finish_op(ok));
    }
}

impl Drop for TxnOp {
    fn drop(&mut self) {
        if !self.done {
            self.txn.inner.ledger.send_modify(|l| l.finish_op(false));
        }
    }
}

impl Transaction {
    /// The transaction's id.
    pub fn id(&self) -> TxnId {
        self.inner.id
    }

    /// Where the transaction is now.
    pub fn state(&self) -> TransactionState {
        self.inner.ledger.borrow().state()
    }

    fn refused(&self, op: &'static str, refusal: Refusal) -> TransactionError {
        match refusal {
            Refusal::TimedOut => TransactionError::TimedOut {
                txn: self.inner.id,
                timeout: self.inner.timeout,
            },
            Refusal::NotOpen(state) => TransactionError::NotOpen {
                txn: self.inner.id,
                state,
                op,
            },
        }
    }

    fn start_op(&self, op: &'static str) -> Result<TxnOp, TransactionError> {
        let mut started = Ok(());
        self.inner
            .ledger
            .send_modify(|l| started = l.start_op(clock::now()));
        started.map_err(|r| self.refused(op, r))?;
        Ok(TxnOp {
            txn: self.clone(),
            done: false,
        })
    }

    /// A send to `partition` (a full topic name) joins the transaction:
    /// the partition is added to it first, once.
    pub(crate) async fn produce_to(&self, partition: &str) -> Result<TxnOp, TransactionError> {
        let op = self.start_op("SEND")?;
        let mut added = self.inner.partitions.lock().await;
        if !added.contains(partition) {
            let (txn, partitions) = (self.inner.id, vec![partition.to_owned()]);
            let answer = self
                .coordinator_request("ADD_PARTITION_TO_TXN", &|id| {
                    commands::add_partition_to_txn(txn, partitions.clone(), id)
                })
                .await?;
            expect(&answer, "ADD_PARTITION_TO_TXN", |r| {
                matches!(r, Response::AddPartitionToTxnResponse(_))
            })?;
            added.insert(partition.to_owned());
        }
        Ok(op)
    }

    /// An ack on `subscription` of `topic` (a full topic name) joins the
    /// transaction: the subscription is added to it first, once. `on_end`
    /// runs when the transaction ends.
    pub(crate) async fn ack_on(
        &self,
        topic: &str,
        subscription: &str,
        on_end: Option<EndHook>,
    ) -> Result<TxnOp, TransactionError> {
        let op = self.start_op("ACK")?;
        let mut added = self.inner.subscriptions.lock().await;
        let key = (topic.to_owned(), subscription.to_owned());
        if !added.contains(&key) {
            let txn = self.inner.id;
            let answer = self
                .coordinator_request("ADD_SUBSCRIPTION_TO_TXN", &|id| {
                    commands::add_subscription_to_txn(txn, topic, subscription, id)
                })
                .await?;
            expect(&answer, "ADD_SUBSCRIPTION_TO_TXN", |r| {
                matches!(r, Response::AddSubscriptionToTxnResponse(_))
            })?;
            added.insert(key);
        }
        if let Some(hook) = on_end {
            self.hooks().push(hook);
        }
        Ok(op)
    }

    /// An ack that leaves nothing to send now joins the transaction by
    /// `on_end` alone, which runs when the transaction ends.
    pub(crate) fn ack_later(&self, on_end: Option<EndHook>) -> Result<(), TransactionError> {
        let op = self.start_op("ACK")?;
        if let Some(hook) = on_end {
            self.hooks().push(hook);
        }
        op.finish(true);
        Ok(())
    }

    fn hooks(&self) -> std::sync::MutexGuard<'_, Vec<EndHook>> {
        self.inner
            .on_end
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn coordinator_request(
        &self,
        op: &'static str,
        build: coordinator::Build<'_>,
    ) -> Result<Response, TransactionError> {
        let coordinators = self
            .inner
            .client
            .coordinators()
            .ok_or(TransactionError::NotEnabled)?;
        coordinators
            .request(&self.inner.client, self.inner.id, op, build)
            .await
    }

    /// Commits: waits until every send and ack of the transaction is
    /// answered, then asks the coordinator to commit (END_TXN). Once it
    /// returns Ok, the messages produced in the transaction are visible and
    /// its acks applied.
    ///
    /// # Errors
    /// [`TransactionError::TimedOut`] if the transaction outlived its
    /// timeout (the coordinator aborts it); [`TransactionError::OperationFailed`]
    /// if a send or ack of it failed (it is aborted instead);
    /// [`TransactionError::NotOpen`] if it already ended or is ending; the
    /// coordinator's errors otherwise.
    pub async fn commit(&self) -> Result<(), TransactionError> {
        self.end(true).await
    }

    /// Aborts: waits until every send and ack of the transaction is
    /// answered, then asks the coordinator to abort (END_TXN). Messages
    /// produced in it are never delivered; messages acked in it come back.
    ///
    /// # Errors
    /// [`TransactionError::TimedOut`] if it outlived its timeout (the
    /// coordinator aborts it by itself), [`TransactionError::NotOpen`] if
    /// it already ended or is ending, and the coordinator's errors.
    pub async fn abort(&self) -> Result<(), TransactionError> {
        self.end(false).await
    }

    async fn end(&self, commit: bool) -> Result<(), TransactionError> {
        let op = if commit { "COMMIT" } else { "ABORT" };
        let mut started = Ok(End::Abort);
        self.inner
            .ledger
            .send_modify(|l| started = l.start_end(clock::now(), commit));
        let mut end = match started {
            Ok(end) => end,
            Err(refusal) => {
                if refusal == Refusal::TimedOut {
                    self.run_end_hooks(false);
                }
                return Err(self.refused(op, refusal));
            }
        };
        // Every send and ack of the transaction is answered first.
        let mut settled = self.inner.ledger.subscribe();
        let _ = settled.wait_for(Ledger::settled).await;
        let failed = self.inner.ledger.borrow().failed();
        if end == End::Commit && failed > 0 {
            self.inner.ledger.send_modify(Ledger::abort_instead);
            end = End::AbortInstead { failed };
        }
        let action = match end {
            End::Commit => TxnAction::Commit,
            End::Abort | End::AbortInstead { .. } => TxnAction::Abort,
        };
        let txn = self.inner.id;
        let answer = self
            .coordinator_request("END_TXN", &|id| commands::end_txn(txn, action, id))
            .await
            .and_then(|a| expect(&a, "END_TXN", |r| matches!(r, Response::EndTxnResponse(_))));
        let outcome = match (answer, end) {
            (Ok(()), End::Commit) => Ok(TransactionState::Committed),
            (Ok(()), End::Abort) => Ok(TransactionState::Aborted),
            (Ok(()), End::AbortInstead { failed }) => {
                self.inner
                    .ledger
                    .send_modify(|l| l.ended(TransactionState::Aborted));
                self.run_end_hooks(false);
                return Err(TransactionError::OperationFailed { txn, failed });
            }
            // The coordinator no longer has it open, and its time is up:
            // it aborted the transaction at its timeout.
            (Err(e), _) if e.is_gone() && self.past_deadline() => {
                self.inner
                    .ledger
                    .send_modify(|l| l.ended(TransactionState::TimedOut));
                self.run_end_hooks(false);
                return Err(TransactionError::TimedOut {
                    txn,
                    timeout: self.inner.timeout,
                });
            }
            (Err(e), _) => Err(e),
        };
        match outcome {
            Ok(state) => {
                self.inner.ledger.send_modify(|l| l.ended(state));
                self.run_end_hooks(state == TransactionState::Committed);
                tracing::debug!(txn = %txn, ?state, "transaction ended");
                Ok(())
            }
            Err(e) => {
                self.inner
                    .ledger
                    .send_modify(|l| l.ended(TransactionState::Failed));
                self.run_end_hooks(false);
                Err(e)
            }
        }
    }

    fn past_deadline(&self) -> bool {
        self.inner.ledger.borrow().past_deadline(clock::now())
    }

    fn run_end_hooks(&self, committed: bool) {
        let hooks = std::mem::take(&mut *self.hooks());
        for hook in hooks {
            (hook.0)(committed);
        }
    }
}

fn expect(
    answer: &Response,
    op: &'static str,
    ok: impl Fn(&Response) -> bool,
) -> Result<(), TransactionError> {
    if ok(answer) {
        Ok(())
    } else {
        Err(TransactionError::UnexpectedResponse {
            op,
            got: answer.kind(),
        })
    }
}
