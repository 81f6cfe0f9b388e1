//! Consuming: subscribe to topics, receive messages, acknowledge them.
//!
//! [`Consumer`] is the handle, made by [`ConsumerBuilder::subscribe`]; it
//! talks to a task of its own that does the IO. [`Reader`] reads a topic
//! from a position without acking. [`Consumer::run`] drives a handler and
//! maps its [`Outcome`]s to acks, nacks and retries.
//!
//! The policies a consumer is built with are plain values:
//! [`SubscriptionType`], [`NackPolicy`] and [`RedeliveryBackoff`],
//! [`DeadLetterPolicy`] (and [`dead_letter`]'s property names),
//! [`KeySharedPolicy`], [`InitialPosition`], [`CryptoFailureAction`].
//!
//! Inside, by concept:
//! - `core/`: the acknowledgement contract as a pure state machine (no IO,
//!   no clock: events and `now` in, actions and the next deadline out),
//!   with the ack-timeout tracker and its storage in `core/unacked/`;
//! - `unpack.rs`: one broker delivery into messages (checksum,
//!   decompression, batches, encryption);
//! - `letters/`: dead-letter and retry copies and the producers that
//!   send them;
//! - `task/`: the driver that subscribes (and subscribes again), feeds the
//!   core and carries out its actions on the wire.

mod batch_receive;
mod builder;
pub(crate) mod core;
mod crypto;
mod error;
mod letters;
mod message;
mod pattern;
mod position;
mod reader;
mod redrive;
mod run;
mod subscribe;
mod task;
pub(crate) mod unpack;

#[cfg(test)]
mod tests;

pub use self::core::chunks::{
    DEFAULT_INCOMPLETE_CHUNK_EXPIRY, DEFAULT_MAX_PENDING_CHUNKED_BYTES,
    DEFAULT_MAX_PENDING_CHUNKED_MESSAGES,
};
pub use self::core::config::{DEFAULT_REWIND_MIN_DELAY, SubscriptionType};
pub use self::core::dead_letter::{self, DeadLetterCutoff, DeadLetterPolicy};
pub use self::core::nack::{NackPolicy, RedeliveryBackoff};
#[cfg(feature = "unstable")]
#[doc(hidden)]
pub use self::core::unacked::UnackedTracker;
pub use batch_receive::{BatchReceivePolicy, Messages};
pub use builder::{
    ConsumerBuilder, DEFAULT_MAX_TOTAL_RECEIVER_QUEUE_SIZE, DEFAULT_RECEIVER_QUEUE_SIZE,
};
pub use crypto::{CryptoFailureAction, EncryptionContext, EncryptionKey, Unreadable};
pub use error::{ConfigError, ConsumerError};
pub use letters::copy::DEFAULT_MAX_RECONSUMETIMES;
pub use message::Message;
pub use pattern::{PatternProblem, RegexSubscriptionMode};
pub use reader::{Reader, ReaderBuilder};
pub use redrive::{
    DEFAULT_REDRIVE_IDLE, DEFAULT_REDRIVE_SUBSCRIPTION, Redrive, RedriveError, RedriveReport,
    Redriven, SkipReason, Skipped,
};
pub use run::{Outcome, RunOptions};
pub use subscribe::{HashRange, InitialPosition, KeySharedPolicy};
pub use unpack::MAX_BATCH_MEMBERS;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use futures::Stream;
use tokio::sync::{mpsc, oneshot, watch};

use crate::interceptor::Chain;
use crate::message_id::MessageId;
use crate::stats::ConsumerRecorder;
use crate::wire::commands::SeekTarget;

/// A consumer: receives the messages of its subscription and acknowledges
/// them. Made by [`ConsumerBuilder::subscribe`].
///
/// A task per consumer does the work; this handle talks to it. Clones share
/// the consumer (each clone has its own place in line for
/// [`receive`](Self::receive)). The consumer closes when
/// [`close`](Self::close) is called or every handle is dropped.
///
/// # Examples
/// ```no_run
/// use futures::StreamExt;
/// use pulsar_wire::consumer::SubscriptionType;
/// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
/// let mut consumer = client
///     .consumer("orders", "billing")
///     .subscription_type(SubscriptionType::Shared)
///     .subscribe()
///     .await?;
/// while let Some(msg) = consumer.next().await {
///     let msg = msg?;
///     println!("{}: {:?}", msg.id(), msg.payload());
///     consumer.ack(&msg).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Consumer {
    /// Requests to the task (boxed: the channel holds room for 32 from
    /// the start, and most requests no longer go through it).
    commands: mpsc::UnboundedSender<Box<task::Command>>,
    /// The queues and cores, shared with the task: receives and acks
    /// taken there directly when they can be (see `task/shelf.rs`).
    shelf: Arc<task::Shelf>,
    pending: Option<oneshot::Receiver<Result<Message, ConsumerError>>>,
    /// The answer of a batch receive asked for and not read yet (its
    /// future dropped): the next batch receive reads it.
    pending_batch: Option<oneshot::Receiver<Result<Messages, ConsumerError>>>,
    subscription_type: SubscriptionType,
    /// The topics (partitions) read now; the task updates them.
    topics: watch::Receiver<Arc<task::TopicsRead>>,
    activity: watch::Receiver<task::Activity>,
    /// Dead-letter and retry copies (with a dead-letter policy or retry on).
    letters: Option<Arc<letters::Letters>>,
    /// Whether acks wait for the broker's ACK_RESPONSE.
    ack_receipts: bool,
    /// Set by the task when it stops as asked (close, unsubscribe, every
    /// handle dropped); unset when a handle finds it gone, it panicked.
    ended: Arc<AtomicBool>,
    /// What the task (and retries) counted.
    stats: Arc<ConsumerRecorder>,
}

impl Clone for Consumer {
    fn clone(&self) -> Self {
        Self {
            commands: self.commands.clone(),
            shelf: self.shelf.clone(),
            pending: None,
            pending_batch: None,
            subscription_type: self.subscription_type,
            topics: self.topics.clone(),
            activity: self.activity.clone(),
            letters: self.letters.clone(),
            ack_receipts: self.ack_receipts,
            ended: self.ended.clone(),
            stats: self.stats.clone(),
        }
    }
}

impl ConsumerBuilder {
    /// Checks the settings, subscribes to every topic (every partition of a
    /// partitioned one) and starts the consumer's task.
    ///
    /// # Errors
    /// Caller misuse first, before any IO: [`ConsumerError::NoTopic`],
    /// [`ConsumerError::InvalidTopic`], [`ConsumerError::EmptySubscription`],
    /// [`ConsumerError::ZeroQueueNeedsOneTopic`], [`ConsumerError::ZeroTotalReceiverQueue`],
    /// [`ConsumerError::ZeroPendingChunkedBytes`], [`ConsumerError::UnboundedBatchReceive`], [`ConsumerError::NegativePriority`],
    /// the Key_Shared policy errors, [`ConsumerError::Config`] for a delivery
    /// setting the core refuses (or a dead-letter policy on Exclusive or
    /// Failover). Then [`ConsumerError::Client`] if a
    /// topic's broker cannot be found or reached, [`ConsumerError::Request`]
    /// if the broker refused the SUBSCRIBE (e.g. a second Exclusive consumer).
    /// A failure that may pass (a lost connection, a broker not ready) is
    /// tried again with backoff until the client's operation timeout; a
    /// busy or unauthorized refusal fails at once.
    pub async fn subscribe(self) -> Result<Consumer, ConsumerError> {
        let mut topics = self.validate()?;
        let discovery = self.discovery()?;
        let listing = match &discovery.pattern {
            Some((pattern, _)) => {
                let listing = self
                    .client
                    .topics_of_namespace(
                        &pattern.namespace,
                        pattern.mode.wire(),
                        Some(&pattern.wire),
                        None,
                    )
                    .await
                    .map_err(|source| ConsumerError::Client {
                        topic: pattern.given.clone(),
                        source,
                    })?;
                for t in pattern.select(listing.topics.iter().map(String::as_str)) {
                    if !topics.contains(&t) {
                        topics.push(t);
                    }
                }
                Some(listing)
            }
            None => None,
        };
        let core = self.core_config();
        let first = topics.first().map_or("", |t| t.as_str());
        let stats = ConsumerRecorder::for_consumer(&self.client, first, &self.options.subscription);
        let letters = match (&core.dead_letter, topics.first()) {
            (Some(policy), Some(first)) => {
                let names = letters::copy::LetterTopics::new(
                    policy.clone(),
                    self.options.subscription.clone(),
                    first,
                    self.retry,
                );
                if let Some(retry) = names.retry_topic() {
                    let retry = crate::client::TopicName::parse(retry)?;
                    if !topics.contains(&retry) {
                        topics.push(retry);
                    }
                }
                let letters = letters::Letters::new(self.client.clone(), names);
                Some(Arc::new(letters.counted_in(stats.clone())))
            }
            _ => None,
        };
        let settings = task::Settings {
            client: self.client.clone(),
            options: self.options.clone(),
            core,
            ack_receipts: self.ack_receipts,
            ack_group_time: self.ack_group_time,
            crypto_failure_action: self.crypto_failure_action,
            chunks: self.chunks,
            forwards: task::Forwards::new(letters.clone()),
            discovery,
            max_total_receiver_queue_size: self.max_total_receiver_queue_size,
            batch_receive: self.batch_receive,
            stats: stats.clone(),
            interceptors: Chain::new(self.interceptors.clone()),
        };
        let single = topics.first().cloned();
        let partitions = task::expand(&self.client, topics).await?;
        if self.receiver_queue_size == 0
            && (partitions.len() != 1 || partitions.first() != single.as_ref())
        {
            // As Java: a partitioned topic's consumer needs a queue.
            return Err(ConsumerError::ZeroQueueNeedsOneTopic {
                topics: partitions.len(),
            });
        }
        let (activity_tx, activity) = watch::channel(Vec::new());
        let (names_tx, names) = watch::channel(Arc::default());
        // Dropped half-way, this leaves nothing behind on the broker: what
        // it subscribed is closed in the background (see attach.rs).
        let driver =
            task::Driver::subscribe(settings, partitions, listing, activity_tx, names_tx).await?;
        let (commands, mailbox) = mpsc::unbounded_channel();
        let shelf = driver.shelf();
        let span = tracing::debug_span!("consumer", subscription = %self.options.subscription);
        let ended = Arc::new(AtomicBool::new(false));
        let task = driver.run(mailbox, ended.clone());
        tokio::spawn(tracing::Instrument::instrument(task, span));
        Ok(Consumer {
            commands,
            shelf,
            pending: None,
            pending_batch: None,
            subscription_type: self.options.subscription_type,
            topics: names,
            activity,
            letters,
            ack_receipts: self.ack_receipts,
            ended,
            stats,
        })
    }
}

impl Consumer {
    /// The topics (partitions) this consumer reads now: partitions added
    /// later and a pattern's new topics join, deleted topics leave.
    pub fn topics(&self) -> Vec<String> {
        self.topics.borrow().read.clone()
    }

    /// The subscription type.
    pub fn subscription_type(&self) -> SubscriptionType {
        self.subscription_type
    }

    /// The consumer's statistics (over all its topics): messages and bytes
    /// received, acks, nacks, ack timeouts, dead-letter and retry copies,
    /// since it subscribed and over the last stats interval (see
    /// [`ConsumerStats`](crate::stats::ConsumerStats)). Cheap: a few
    /// atomic loads and one lock.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mut consumer: pulsar_wire::Consumer) -> Result<(), pulsar_wire::Error> {
    /// let msg = consumer.receive().await?;
    /// consumer.ack(&msg).await?;
    /// let stats = consumer.stats();
    /// println!("{} received, {} acked", stats.total.messages_received, stats.total.acks);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> crate::stats::ConsumerStats {
        self.stats.snapshot(crate::clock::now())
    }

    /// Why the task is gone: closed as asked, or it panicked.
    fn gone(&self) -> ConsumerError {
        if self.ended.load(Ordering::Acquire) || self.shelf.is_closing() {
            ConsumerError::Closed
        } else {
            ConsumerError::TaskFailed
        }
    }

    fn send(&self, command: task::Command) -> Result<(), ConsumerError> {
        self.shelf.command_sent();
        self.commands
            .send(Box::new(command))
            .map_err(|_| self.gone())
    }

    async fn ask<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<Result<T, ConsumerError>>) -> task::Command,
    ) -> Result<T, ConsumerError> {
        let (reply, answer) = oneshot::channel();
        self.send(command(reply))?;
        answer.await.unwrap_or_else(|_| Err(self.gone()))
    }

    /// Polls for the next message; keeps its place in line across polls.
    fn poll_receive(&mut self, cx: &mut Context<'_>) -> Poll<Result<Message, ConsumerError>> {
        let pending = match &mut self.pending {
            Some(pending) => pending,
            None => {
                // A message taken here counts against the task's budget, as
                // one from a tokio channel would: a loop over a full queue
                // still lets the consumer's task and the connection run.
                let coop = ready!(tokio::task::coop::poll_proceed(cx));
                match self.shelf.take_or_wake(cx.waker()) {
                    task::Taken::Message(result) => {
                        coop.made_progress();
                        return Poll::Ready(result);
                    }
                    // Woken when a message is queued, or when the task
                    // must answer instead.
                    task::Taken::Empty => return Poll::Pending,
                    task::Taken::AskTheTask => {}
                }
                let (reply, answer) = oneshot::channel();
                if let Err(e) = self.send(task::Command::Receive(reply)) {
                    return Poll::Ready(Err(e));
                }
                self.pending.insert(answer)
            }
        };
        let result = ready!(Pin::new(pending).poll(cx));
        self.pending = None;
        Poll::Ready(result.unwrap_or_else(|_| Err(self.gone())))
    }

    /// Waits for the next message. Cancel-safe: a message that arrives for
    /// a dropped `receive()` goes to the next one.
    ///
    /// Taking a message gives its permit back; permits go to the broker in
    /// one FLOW once half the receiver queue has been taken.
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] once the consumer is closed.
    /// [`ConsumerError::Lost`] once for each partition or topic (the
    /// retry-letter topic too) whose subscription is given up for good (the
    /// topic was deleted, say) while others go on: the next call receives
    /// from the others. Once every one is given up, every call fails with it.
    /// [`ConsumerError::TaskFailed`] if its task panicked (the stream then
    /// yields that error, never a clean end);
    /// [`ConsumerError::Unreadable`] in place of a message this consumer
    /// cannot decode (encrypted, with [`CryptoFailureAction::Fail`], or
    /// compressed with an unknown codec): that message is not acked and
    /// stays in the subscription; the next `receive()` goes on with the
    /// messages after it.
    pub async fn receive(&mut self) -> Result<Message, ConsumerError> {
        std::future::poll_fn(|cx| self.poll_receive(cx)).await
    }

    /// The next message if one is queued now, without waiting for the broker.
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] once the consumer is closed.
    pub async fn try_receive(&mut self) -> Result<Option<Message>, ConsumerError> {
        if let Some(pending) = &mut self.pending {
            match pending.try_recv() {
                Ok(result) => {
                    self.pending = None;
                    return result.map(Some);
                }
                Err(oneshot::error::TryRecvError::Empty) => return Ok(None),
                Err(oneshot::error::TryRecvError::Closed) => return Err(self.gone()),
            }
        }
        let taken = std::future::poll_fn(|cx| {
            let coop = ready!(tokio::task::coop::poll_proceed(cx));
            let taken = self.shelf.take();
            if matches!(taken, task::Taken::Message(_)) {
                coop.made_progress();
            }
            Poll::Ready(taken)
        })
        .await;
        match taken {
            task::Taken::Message(result) => return result.map(Some),
            task::Taken::Empty => return Ok(None),
            task::Taken::AskTheTask => {}
        }
        self.ask(task::Command::TryReceive).await
    }

    /// Acknowledges `msg` so the subscription will not deliver it again.
    ///
    /// Any message this consumer handed out can be acked, also after a
    /// reconnect, a topic unload, an ack timeout, a nack or a rewind: ids
    /// are positions, and the ack goes to the current subscription (a copy
    /// redelivered meanwhile is not handed out again). A batch member's ack
    /// reaches the broker when every member of its batch is acked (acking
    /// one member never acks its siblings), or at once with batch index ack.
    ///
    /// Without ack receipts this returns once the ack is handed to the
    /// consumer's task, which sends it before anything asked for later (a
    /// `close` after it still sends it first). With them, it returns Ok only
    /// once the broker confirmed the ACK that covers the message: while the
    /// partition subscribes again it waits and the ACK goes out under the
    /// new subscription; a batch member's waits for its batch's ACK.
    ///
    /// # Errors
    /// [`ConsumerError::ForeignMessage`] for a message of another consumer,
    /// [`ConsumerError::Closed`]; with receipts the broker's error,
    /// [`ConsumerError::Lost`] if the partition lost its subscription for
    /// good, and [`ConsumerError::AckNotSent`] if the consumer closed before
    /// the ACK could be sent (a member of a batch never fully acked).
    pub async fn ack(&self, msg: &Message) -> Result<(), ConsumerError> {
        let (topic, id, batch_size) = (msg.0.topic.clone(), msg.id(), msg.0.batch_size);
        if !self.ack_receipts && self.shelf.ack(&topic, id, batch_size) {
            // Recorded in the core now; the task sends the ACK.
            return Ok(());
        }
        self.ask(|reply| task::Command::Ack {
            topic,
            id,
            batch_size,
            cumulative: false,
            reply: Some(reply),
        })
        .await
    }

    /// Waits for a batch of messages, as the consumer's
    /// [`BatchReceivePolicy`] says (default: 100 messages, 10 MiB of
    /// payload, or 100 ms, whichever comes first): returns once that many
    /// messages or bytes are queued, or when the timeout has passed, with
    /// the messages queued then (maybe none). A batch holds at most the
    /// policy's messages and bytes (but always one message, however
    /// large), taken from the partitions in turn.
    ///
    /// Each message is taken when the batch is returned: that is when its
    /// ack timeout starts and its permit is given back, as for
    /// [`receive`](Self::receive). Ack the batch with
    /// [`ack_all`](Self::ack_all). Cancel-safe: a batch answered for a
    /// call dropped before it returned (under `select!` or a timeout) is
    /// returned by the next call.
    ///
    /// # Errors
    /// [`ConsumerError::BatchReceiveOnZeroQueue`] with a zero receiver
    /// queue; otherwise those of [`receive`](Self::receive): an
    /// unreadable message ends a batch before it and is reported by the
    /// next call, or by this one if the batch would be empty.
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// use pulsar_wire::consumer::BatchReceivePolicy;
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// let mut consumer = client
    ///     .consumer("orders", "billing")
    ///     .batch_receive_policy(BatchReceivePolicy {
    ///         max_messages: Some(500),
    ///         timeout: Some(Duration::from_secs(1)),
    ///         ..BatchReceivePolicy::default()
    ///     })
    ///     .subscribe()
    ///     .await?;
    /// let batch = consumer.receive_batch().await?;
    /// for msg in &batch {
    ///     println!("{}: {} bytes", msg.id(), msg.payload().len());
    /// }
    /// consumer.ack_all(&batch).await?;
    /// # Ok(()) }
    /// ```
    pub async fn receive_batch(&mut self) -> Result<Messages, ConsumerError> {
        std::future::poll_fn(|cx| self.poll_receive_batch(cx)).await
    }

    /// Polls for the next batch; an answer not read before the future was
    /// dropped is kept for the next call (cancel-safe, as `receive`).
    fn poll_receive_batch(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Messages, ConsumerError>> {
        let pending = match &mut self.pending_batch {
            Some(pending) => pending,
            None => {
                let (reply, answer) = oneshot::channel();
                if let Err(e) = self.send(task::Command::ReceiveBatch(reply)) {
                    return Poll::Ready(Err(e));
                }
                self.pending_batch.insert(answer)
            }
        };
        let result = ready!(Pin::new(pending).poll(cx));
        self.pending_batch = None;
        Poll::Ready(result.unwrap_or_else(|_| Err(self.gone())))
    }

    /// Acknowledges every message of `messages` (e.g. a
    /// [`receive_batch`](Self::receive_batch)): individual acks, sent in
    /// one ACK frame per partition (more only past the frame size limit;
    /// with batch index ack, members of batches left partly acked go with
    /// their own `ack_set`). Otherwise as [`ack`](Self::ack) on each.
    ///
    /// # Errors
    /// [`ConsumerError::ForeignMessage`] if one message came from another
    /// consumer (then nothing is acked); otherwise the first error of
    /// [`ack`](Self::ack) among the messages.
    pub async fn ack_all<'a>(
        &self,
        messages: impl IntoIterator<Item = &'a Message>,
    ) -> Result<(), ConsumerError> {
        let mut acks = Vec::new();
        let mut answers = Vec::new();
        for msg in messages {
            let topic = msg.0.topic.clone();
            if !self.topics.borrow().knows(&topic) {
                return Err(ConsumerError::ForeignMessage {
                    topic: topic.to_string(),
                });
            }
            let reply = self.ack_receipts.then(|| {
                let (reply, answer) = oneshot::channel();
                answers.push(answer);
                reply
            });
            acks.push(task::AckOne {
                topic,
                id: msg.id(),
                batch_size: msg.0.batch_size,
                reply,
            });
        }
        if acks.is_empty() {
            return Ok(());
        }
        self.send(task::Command::AckAll(acks))?;
        for answer in answers {
            answer.await.unwrap_or_else(|_| Err(self.gone()))?;
        }
        Ok(())
    }

    /// Acknowledges every message up to and including `msg`.
    ///
    /// # Errors
    /// [`ConsumerError::CumulativeAckNotAllowed`] on Shared and Key_Shared
    /// subscriptions (checked before anything is sent), and the errors of
    /// [`ack`](Self::ack).
    pub async fn ack_cumulative(&self, msg: &Message) -> Result<(), ConsumerError> {
        if matches!(
            self.subscription_type,
            SubscriptionType::Shared | SubscriptionType::KeyShared
        ) {
            return Err(ConsumerError::CumulativeAckNotAllowed {
                subscription: self.subscription_type,
            });
        }
        // Up to where the message ends (see `task::held_at`): a chunked
        // message is delivered at its last chunk, after the messages stored
        // between its chunks.
        let (topic, id, batch_size) = (msg.0.topic.clone(), msg.id(), msg.0.batch_size);
        self.ask(|reply| task::Command::Ack {
            topic,
            id,
            batch_size,
            cumulative: true,
            reply: Some(reply),
        })
        .await
    }

    /// Acknowledges `msg` in transaction `txn`: the ack takes effect when
    /// `txn` commits and is undone if it aborts (the message comes back).
    ///
    /// The subscription is added to the transaction first (once per
    /// topic partition); returns once the broker answered the ACK. The
    /// transaction's commit waits for it, and aborts instead if it failed.
    /// Until the transaction ends the message stays held by this consumer
    /// (under its ack timeout, if one is set). Once it commits, the
    /// consumer settles the message as after [`ack`](Self::ack); once it
    /// aborts (or times out), it asks for the message again as after
    /// [`nack`](Self::nack).
    ///
    /// # Errors
    /// [`ConsumerError::Transaction`] if the transaction is not open, the
    /// coordinator refused the subscription, or the broker refused the ACK
    /// for the transaction's sake ([`TransactionError::Conflict`](crate::TransactionError::Conflict)
    /// when another open transaction acked the message);
    /// [`ConsumerError::Request`] if the broker refused the ACK otherwise;
    /// [`ConsumerError::ForeignMessage`], [`ConsumerError::Closed`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: pulsar_wire::Client, mut consumer: pulsar_wire::Consumer) -> Result<(), pulsar_wire::Error> {
    /// let msg = consumer.receive().await?;
    /// let txn = client.transaction().begin().await?;
    /// consumer.ack_in(&txn, &msg).await?;
    /// txn.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack_in(
        &self,
        txn: &crate::transaction::Transaction,
        msg: &Message,
    ) -> Result<(), ConsumerError> {
        self.ack_in_txn(txn, msg, false).await
    }

    /// Acknowledges every message up to and including `msg` in transaction
    /// `txn`, as [`ack_in`](Self::ack_in) does one.
    ///
    /// If the transaction aborts, the consumer nacks `msg`: the
    /// subscription rewinds to its first unacked message, so every message
    /// the ack covered comes back.
    ///
    /// # Errors
    /// [`ConsumerError::CumulativeAckNotAllowed`] on Shared and Key_Shared
    /// subscriptions, and the errors of [`ack_in`](Self::ack_in).
    pub async fn ack_cumulative_in(
        &self,
        txn: &crate::transaction::Transaction,
        msg: &Message,
    ) -> Result<(), ConsumerError> {
        if matches!(
            self.subscription_type,
            SubscriptionType::Shared | SubscriptionType::KeyShared
        ) {
            return Err(ConsumerError::CumulativeAckNotAllowed {
                subscription: self.subscription_type,
            });
        }
        self.ack_in_txn(txn, msg, true).await
    }

    async fn ack_in_txn(
        &self,
        txn: &crate::transaction::Transaction,
        msg: &Message,
        cumulative: bool,
    ) -> Result<(), ConsumerError> {
        let (topic, batch_size) = (msg.0.topic.clone(), msg.0.batch_size);
        let id = task::held_at(msg.id(), cumulative);
        let on_end = self.settle_on_end(msg, cumulative);
        self.ask(|reply| task::Command::AckInTxn {
            topic,
            id,
            batch_size,
            cumulative,
            txn: txn.clone(),
            on_end,
            reply,
        })
        .await
    }

    /// What the consumer does with `msg` once its transaction ends: acks
    /// it (again: the broker applied the commit already; this settles it
    /// here too), or asks for it again as a nack does (the broker ignores
    /// the request for a message a commit acked after all).
    fn settle_on_end(
        &self,
        msg: &Message,
        cumulative: bool,
    ) -> Option<crate::transaction::EndHook> {
        let (commands, shelf) = (self.commands.clone(), self.shelf.clone());
        let (topic, id, batch_size) = (msg.0.topic.clone(), msg.id(), msg.0.batch_size);
        let redelivery_count = msg.0.redelivery_count;
        Some(crate::transaction::EndHook(Box::new(move |committed| {
            let command = match committed {
                true => task::Command::Ack {
                    topic,
                    id,
                    batch_size,
                    cumulative,
                    reply: None,
                },
                false => task::Command::Nack {
                    topic,
                    id,
                    redelivery_count,
                },
            };
            // A closed consumer has nothing to settle.
            shelf.command_sent();
            let _ = commands.send(Box::new(command));
        })))
    }

    /// Asks for `msg` again (now, or after the nack policy's delay). On
    /// Exclusive and Failover the broker rewinds to the first unacked
    /// message; that rewind waits until the messages already received are
    /// handed out (see [`ConsumerBuilder::nack_policy`]).
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] once the consumer is closed.
    pub fn nack(&self, msg: &Message) -> Result<(), ConsumerError> {
        self.shelf
            .nack(&msg.0.topic, msg.id(), msg.0.redelivery_count)
    }

    /// Moves the subscription to message `id` (on a partitioned topic, that
    /// id's partition; [`MessageId::EARLIEST`] and [`MessageId::LATEST`]
    /// move every partition).
    ///
    /// Exact, as the official clients: once this returns, no message
    /// queued or in flight before the seek reaches the application, and
    /// reading starts right after `id`, or at `id` with
    /// [`seek_inclusive`](ConsumerBuilder::seek_inclusive). For a batch
    /// member, the members before it never come: the seek marks them
    /// acked when the batch's size is known (the batch last received),
    /// and the consumer drops them on arrival in any case.
    ///
    /// It returns once the broker has answered the SEEK and the consumer
    /// has dropped its queue and closed its consumer on the broker; the
    /// partition then subscribes again in the background, as after a lost
    /// subscription, after its reconnect backoff: 90 to 100 ms when the
    /// subscription it leaves had delivered a message or lasted 10 s;
    /// otherwise the backoff goes on doubling (seeks in a row with nothing
    /// delivered between them wait about 100 ms, 200 ms, 400 ms, … up to
    /// 60 s).
    /// A seek made while a partition still subscribes again waits for that
    /// first, for at most the operation timeout, and fails with
    /// [`ConsumerError::Request`] (a timeout) if it is still under way
    /// then: so does the eleventh seek in a row with nothing delivered.
    ///
    /// # Errors
    /// [`ConsumerError::Request`] if the broker refused, [`ConsumerError::Closed`].
    pub async fn seek(&self, id: MessageId) -> Result<(), ConsumerError> {
        self.ask(|reply| task::Command::Seek(SeekTarget::MessageId(id), reply))
            .await
    }

    /// Moves the subscription (every partition) to the first message
    /// published at or after `publish_time_ms` (ms since the Unix epoch).
    ///
    /// # Errors
    /// As [`seek`](Self::seek).
    pub async fn seek_to_time(&self, publish_time_ms: u64) -> Result<(), ConsumerError> {
        self.ask(|reply| task::Command::Seek(SeekTarget::PublishTime(publish_time_ms), reply))
            .await
    }

    /// The id of the last message stored in the topic.
    ///
    /// # Errors
    /// [`ConsumerError::MultipleTopics`] for a consumer of several topics or
    /// partitions; [`ConsumerError::Request`] if the broker refused.
    pub async fn last_message_id(&self) -> Result<MessageId, ConsumerError> {
        self.ask(task::Command::LastMessageId).await
    }

    /// Whether a message is there to read (see
    /// [`Reader::has_message_available`]).
    pub(crate) async fn has_message_available(&self) -> Result<bool, ConsumerError> {
        self.ask(task::Command::HasMessageAvailable).await
    }

    /// Whether this consumer is the active one of a Failover subscription
    /// (on any of its partitions); `None` until the broker said.
    pub fn is_active(&self) -> Option<bool> {
        let activity = self.activity.borrow();
        (!activity.is_empty()).then(|| activity.iter().any(|(_, active)| *active))
    }

    /// Waits until the broker reports an ACTIVE_CONSUMER_CHANGE (Failover),
    /// then returns [`is_active`](Self::is_active).
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] once the consumer is closed.
    pub async fn active_changed(&mut self) -> Result<bool, ConsumerError> {
        self.activity.changed().await.map_err(|_| self.gone())?;
        Ok(self.is_active().unwrap_or(false))
    }

    /// Deletes the subscription (with its position), then closes the consumer.
    ///
    /// # Errors
    /// [`ConsumerError::Request`] if the broker refused (e.g. other
    /// consumers are still attached); the consumer stays open then.
    /// [`ConsumerError::Lost`] naming a topic (partition) given up whose
    /// subscription stays on the broker: the others are unsubscribed, and
    /// the consumer stays open.
    pub async fn unsubscribe(&self) -> Result<(), ConsumerError> {
        self.ask(task::Command::Unsubscribe).await
    }

    /// Closes the consumer: unacked messages return to the subscription.
    ///
    /// Dead-letter forwards in flight are finished first (their originals
    /// acked once the copies are confirmed), so this may wait up to the
    /// dead-letter producer's send timeout.
    ///
    /// Closing a closed consumer does nothing; a close that meets a lost
    /// connection is done (the broker drops the consumer with it).
    ///
    /// # Errors
    /// [`ConsumerError::TaskFailed`] if the consumer's task panicked.
    pub async fn close(&self) -> Result<(), ConsumerError> {
        match self.ask(task::Command::Close).await {
            Err(ConsumerError::Closed) => Ok(()),
            other => other,
        }
    }
}

impl Stream for Consumer {
    type Item = Result<Message, ConsumerError>;

    /// The next message; ends once the consumer is closed.
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match ready!(self.poll_receive(cx)) {
            Err(ConsumerError::Closed) => Poll::Ready(None),
            other => Poll::Ready(Some(other)),
        }
    }
}
