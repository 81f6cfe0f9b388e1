//! Running a handler per message: [`Consumer::run`]. The handler's
//! [`Outcome`] decides what is sent for the message; an error or a panic
//! nacks it, and the loop goes on.

use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::task::JoinSet;

/// A handler call's result, or the panic it ended in.
type Called<E> = Result<Result<Outcome, E>, Box<dyn std::any::Any + Send>>;
use tracing::{debug, warn};

use super::Consumer;
use super::error::ConsumerError;
use super::message::Message;

/// What a handler decided about a message.
///
/// | Outcome | Sent |
/// |---|---|
/// | `Ack` | `ACK` (individual) |
/// | `Retry` | `REDELIVER_UNACKNOWLEDGED_MESSAGES` naming it (now, or after the nack policy's delay) |
/// | `RetryLater(d)` | `SEND` of a copy to the retry topic (delivered after `d`), then `ACK` |
/// | `Leave` | nothing: the ack timeout (if set) redelivers it |
/// | handler `Err` or panic | as `Retry` |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done: acknowledge it.
    Ack,
    /// Failed: nack it, so it comes back (per the consumer's nack policy).
    Retry,
    /// Failed: [`reconsume_later`](Consumer::reconsume_later) it after this
    /// delay (needs [`enable_retry`](super::ConsumerBuilder::enable_retry);
    /// without it the message is nacked instead).
    RetryLater(Duration),
    /// Send nothing now: the message stays unacked, and the consumer's
    /// [`ack_timeout`](super::ConsumerBuilder::ack_timeout), if set, asks
    /// for it again (without one it comes back only after a reconnect).
    Leave,
}

/// How [`Consumer::run`] runs its handler.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use pulsar_wire::consumer::RunOptions;
/// assert_eq!(RunOptions::default().concurrency, 1);
/// assert_eq!(RunOptions::default().concurrency(8).concurrency, 8);
/// let leased = RunOptions::default().lease(Duration::from_secs(600));
/// assert_eq!(leased.lease, Some(Duration::from_secs(600)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunOptions {
    /// How many handler calls may run at once (default 1: one message at
    /// a time, in the order received).
    pub concurrency: usize,
    /// While a handler call runs, keep its message from the ack timeout
    /// for at most this long (see [`lease`](Self::lease)); `None` (the
    /// default): the ack timeout runs as for any received message.
    pub lease: Option<Duration>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            concurrency: 1,
            lease: None,
        }
    }
}

impl RunOptions {
    /// Lets up to `n` handler calls run at once (at least 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Leases each message to its handler call for at most `max_total`:
    /// while the call runs, each time the message's
    /// [`ack_timeout`](super::ConsumerBuilder::ack_timeout) expires its
    /// deadline moves one ack timeout on, so a handler slower than the
    /// ack timeout is not raced by a redelivery to another consumer. Once
    /// `max_total` has passed since the message was received, the ack
    /// timeout takes it back as usual (a handler stuck for good does not
    /// hold its message for ever). The lease ends when the call returns:
    /// its outcome is sent at once, and after [`Outcome::Leave`] the
    /// message's last deadline stands.
    ///
    /// The lease is the client's own: nothing is sent to the broker for
    /// it. Without an ack timeout there is nothing to extend and it does
    /// nothing.
    pub fn lease(mut self, max_total: Duration) -> Self {
        self.lease = Some(max_total);
        self
    }
}

impl Consumer {
    /// Gives the application longer to answer `msg`: its
    /// [`ack_timeout`](super::ConsumerBuilder::ack_timeout) deadline moves
    /// to `by` from now, unless it already lies later. Call it again to
    /// extend again; [`RunOptions::lease`] does this for a handler. Nothing
    /// is sent to the broker (the ack timeout is the client's timer); for a
    /// message not held (answered already, or taken back by the ack
    /// timeout or a reconnect), or without an ack timeout, it does nothing.
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] once the consumer is closed.
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn slow_part(_: &[u8]) {}
    /// # async fn demo(mut consumer: pulsar_wire::Consumer) -> Result<(), pulsar_wire::Error> {
    /// let msg = consumer.receive().await?;
    /// consumer.extend(&msg, Duration::from_secs(120))?;
    /// slow_part(msg.payload()).await;
    /// consumer.ack(&msg).await?;
    /// # Ok(()) }
    /// ```
    pub fn extend(&self, msg: &Message, by: Duration) -> Result<(), ConsumerError> {
        self.shelf.extend(&msg.0.topic, msg.0.id, by)
    }

    /// Receives messages and calls `handler` for each; its [`Outcome`]
    /// decides what is sent (see the table on [`Outcome`]). A handler
    /// error or panic nacks the message and the loop goes on (a panic in
    /// the future the handler returns is caught).
    ///
    /// At most `options.concurrency` calls run at once; the consumer does
    /// not take the next message before a call has finished. The calls run
    /// concurrently within the task that awaits `run`, as
    /// [`for_each_concurrent`](futures::StreamExt::for_each_concurrent)
    /// runs its futures, and no task is spawned per message: a handler that
    /// does CPU-heavy work should hand it to `tokio::task::spawn_blocking`
    /// or a task of its own. Returns
    /// `Ok(())` once the consumer is closed (after the calls in flight have
    /// finished), or the consumer's error if it failed for good.
    ///
    /// # Errors
    /// [`ConsumerError::ZeroConcurrency`] (before anything is received);
    /// [`ConsumerError::Lost`] if the consumer lost its subscription;
    /// [`ConsumerError::Unreadable`] when a message cannot be decoded
    /// (encrypted, or an unknown codec; see [`receive`](Self::receive)): it
    /// stays unacked, and calling `run` again goes on with the messages
    /// after it.
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// use pulsar_wire::consumer::{Outcome, RunOptions};
    /// # async fn store(_: &[u8]) -> Result<bool, std::io::Error> { Ok(true) }
    /// # async fn demo(consumer: pulsar_wire::Consumer) -> Result<(), pulsar_wire::Error> {
    /// consumer
    ///     .run(
    ///         |msg| async move {
    ///             match store(msg.payload()).await? {
    ///                 true => Ok::<_, std::io::Error>(Outcome::Ack),
    ///                 false => Ok(Outcome::RetryLater(Duration::from_secs(30))),
    ///             }
    ///         },
    ///         RunOptions::default().concurrency(4),
    ///     )
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn run<F, Fut, E>(
        &self,
        mut handler: F,
        options: RunOptions,
    ) -> Result<(), ConsumerError>
    where
        F: FnMut(Message) -> Fut,
        Fut: Future<Output = Result<Outcome, E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        if options.concurrency == 0 {
            return Err(ConsumerError::ZeroConcurrency);
        }
        let mut receiver = self.clone();
        // Handler calls count against the concurrency; sending their outcome
        // does not: with ack receipts, a batch member's ack waits for its
        // siblings, which the next calls handle. An outcome that waits for
        // nothing (an ack without receipts, a nack) is sent at once.
        let mut running = FuturesUnordered::new();
        let mut settling = JoinSet::new();
        let leased = options.lease.is_some();
        // One call at a time: each call is awaited in turn, with no set of
        // calls to poll alongside the next receive.
        let one_at_a_time = options.concurrency == 1;
        let settle = |settling: &mut JoinSet<()>, (msg, called)| {
            let outcome = self.outcome_of(&msg, called);
            if !self.send_outcome_now(&msg, outcome, leased) {
                let consumer = self.clone();
                settling.spawn(async move { consumer.send_outcome(msg, outcome, leased).await });
            }
        };
        let end = loop {
            while settling.try_join_next().is_some() {}
            // A call that ends while the loop waits for the next message is
            // settled at once: its outcome must not wait for more messages
            // (`receive` is cancel-safe, so the wait resumes where it was).
            let received = if one_at_a_time {
                receiver.receive().await
            } else {
                tokio::select! {
                    // Calls that ended first, so their outcomes go out
                    // before more messages come in.
                    biased;
                    Some(done) = running.next(), if !running.is_empty() => {
                        settle(&mut settling, done);
                        continue;
                    }
                    received = receiver.receive(), if running.len() < options.concurrency => received,
                }
            };
            let msg = match received {
                Ok(msg) => msg,
                Err(ConsumerError::Closed) => break Ok(()),
                Err(e) => break Err(e),
            };
            if let Some(max_total) = options.lease {
                // Queued behind the hand-over, so the task holds the message.
                let _ = self.send(super::task::Command::Lease {
                    topic: msg.0.topic.clone(),
                    id: msg.0.id,
                    max_total: Some(max_total),
                });
            }
            let call = AssertUnwindSafe(handler(msg.clone())).catch_unwind();
            if one_at_a_time {
                let called = call.await;
                settle(&mut settling, (msg, called));
            } else {
                let mut call = Box::pin(async move { (msg, call.await) });
                // A quick handler's call is done at its first poll: settled
                // now, without joining the set of calls in flight.
                match futures::poll!(call.as_mut()) {
                    std::task::Poll::Ready(done) => settle(&mut settling, done),
                    std::task::Poll::Pending => running.push(call),
                }
            }
        };
        while let Some(done) = running.next().await {
            settle(&mut settling, done);
        }
        while settling.join_next().await.is_some() {}
        end
    }

    /// What the handler's outcome (or failure) asks for.
    fn outcome_of<E: Display>(&self, msg: &Message, called: Called<E>) -> Outcome {
        let id = msg.id();
        match called {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => {
                warn!(%id, error = %e, "handler failed; nacking");
                if let Some(letters) = &self.letters {
                    letters.failed(msg, &e.to_string());
                }
                Outcome::Retry
            }
            Err(panic) => {
                let reason = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                warn!(%id, error = %reason, "handler panicked; nacking");
                if let Some(letters) = &self.letters {
                    letters.failed(msg, &reason);
                }
                Outcome::Retry
            }
        }
    }

    /// Sends what `outcome` asks for `msg`.
    async fn send_outcome(&self, msg: Message, outcome: Outcome, leased: bool) {
        let id = msg.id();
        let sent = match outcome {
            Outcome::Ack => self.ack(&msg).await,
            Outcome::Retry | Outcome::Leave => self.send_at_once(&msg, outcome, leased),
            Outcome::RetryLater(delay) => match self.reconsume_later(&msg, delay).await {
                Ok(()) => Ok(()),
                Err(e) => {
                    warn!(%id, error = %e, "reconsume_later failed; nacking");
                    self.nack(&msg)
                }
            },
        };
        if let Err(e) = sent {
            // A closed consumer (the broker redelivers), or a refused ack
            // receipt.
            debug!(%id, error = %e, "outcome not sent");
        }
    }

    /// Sends what `outcome` asks for `msg` if that waits for nothing (an
    /// ack without receipts, a nack, a leave); false if it must wait.
    fn send_outcome_now(&self, msg: &Message, outcome: Outcome, leased: bool) -> bool {
        let sent = match outcome {
            Outcome::Ack if !self.ack_receipts => match self.ack(msg).now_or_never() {
                Some(sent) => sent,
                // A topic the consumer left: handed to the task, which
                // answers Ok; nothing to wait for.
                None => Ok(()),
            },
            Outcome::Retry | Outcome::Leave => self.send_at_once(msg, outcome, leased),
            Outcome::Ack | Outcome::RetryLater(_) => return false,
        };
        if let Err(e) = sent {
            debug!(id = %msg.id(), error = %e, "outcome not sent");
        }
        true
    }

    /// A nack, or for a leave the end of its lease (an ack, a nack or a
    /// retry's ack ends a lease; leaving the message must end it too).
    fn send_at_once(
        &self,
        msg: &Message,
        outcome: Outcome,
        leased: bool,
    ) -> Result<(), ConsumerError> {
        match outcome {
            Outcome::Leave if leased => self.send(super::task::Command::Lease {
                topic: msg.0.topic.clone(),
                id: msg.0.id,
                max_total: None,
            }),
            Outcome::Leave => Ok(()),
            _ => self.nack(msg),
        }
    }
}
