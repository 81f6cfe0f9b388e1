//! Producing messages: [`Producer`], its builder, the message builder, and
//! the pure parts the driver task feeds (batch container, in-flight queue,
//! partition routing, bounds).
//!
//! The pure parts take `now` and never read the clock (C1); `task.rs` is the
//! only part that awaits.
//!
//! # Examples
//! ```no_run
//! use std::time::Duration;
//! use pulsar_wire::Client;
//! use pulsar_wire::compression::Compression;
//! use pulsar_wire::producer::ProducerMessage;
//! # async fn demo() -> Result<(), pulsar_wire::Error> {
//! let client = Client::builder().service_url("pulsar://127.0.0.1:6650").build().await?;
//! let producer = client
//!     .producer("persistent://public/default/orders")
//!     .compression(Compression::Lz4)
//!     .batching_max_delay(Duration::from_millis(5))
//!     .create()
//!     .await?;
//! // Pipelined: queue many, then await the receipts (they resolve in order).
//! let mut receipts = Vec::new();
//! for i in 0..100 {
//!     receipts.push(producer.send(ProducerMessage::new(format!("order {i}")).key("customer-7")).await?);
//! }
//! for receipt in receipts {
//!     println!("{}", receipt.await?);
//! }
//! producer.close().await?;
//! # Ok(()) }
//! ```

mod batcher;
mod builder;
mod chunker;
mod connect;
mod error;
mod limits;
mod message;
mod partitions;
mod pending;
mod routing;
mod task;

#[cfg(test)]
mod handle_tests;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

pub use builder::{AccessMode, ProducerBuilder};
pub use error::ProducerError;
pub use limits::{DEFAULT_MEMORY_LIMIT, LimitExceeded, WhenFull};
pub use message::{DeliverAt, ProducerMessage};
pub use routing::{HashingScheme, RoutingMode};

use crate::clock;
use crate::interceptor::{Chain, ProducerInterceptor};
use crate::message_id::MessageId;
use crate::stats::ProducerRecorder;
use crate::transaction::Transaction;
use routing::Router;
use task::Cmd;

/// A producer on one topic (on every partition of a partitioned topic).
/// Cheap to clone; the producer closes when [`close`](Self::close) is
/// called or the last clone is dropped (after sending what it holds).
///
/// # Examples
/// ```no_run
/// # async fn demo(producer: pulsar_wire::producer::Producer) -> Result<(), pulsar_wire::Error> {
/// let id = producer.send("hello").await?.await?;
/// producer.flush().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    topic: String,
    /// The producer's name (of partition 0 on a partitioned topic).
    name: String,
    lanes: Mutex<partitions::Lanes>,
    /// The one lane of a producer whose partitions never change (a
    /// non-partitioned topic, or partitions not followed with one lane):
    /// sends take it without the lock, the router or the clock.
    fixed: Option<task::Lane>,
    /// The client's memory limit, as this producer takes from it.
    memory: Memory,
    stats: Arc<ProducerRecorder>,
    interceptors: Chain<dyn ProducerInterceptor>,
}

/// The client's memory limit as a producer takes from it.
#[derive(Debug)]
pub(crate) struct Memory {
    /// Bytes free of the limit.
    pub(crate) budget: Arc<Semaphore>,
    /// The limit, in bytes.
    pub(crate) limit: usize,
    /// What a send does when the limit is reached.
    pub(crate) when_full: WhenFull,
    /// How long a send waits for memory at most (the send timeout).
    pub(crate) wait: std::time::Duration,
}

impl Producer {
    fn new(
        topic: String,
        name: String,
        lanes: Vec<task::Lane>,
        (router, follows_partitions): (Router, bool),
        memory: Memory,
        (stats, interceptors): (Arc<ProducerRecorder>, Chain<dyn ProducerInterceptor>),
    ) -> Self {
        let fixed = match lanes.as_slice() {
            [lane] if !follows_partitions => Some(lane.clone()),
            _ => None,
        };
        let lanes = partitions::Lanes {
            lanes,
            router,
            closed: false,
        };
        Self {
            inner: Arc::new(Inner {
                topic,
                name,
                lanes: Mutex::new(lanes),
                fixed,
                memory,
                stats,
                interceptors,
            }),
        }
    }

    /// Takes `msg`'s share of the client's memory limit: waits for it (at
    /// most the send timeout) or fails at once. A message larger than the
    /// whole limit takes all of it.
    async fn reserve(&self, msg: &ProducerMessage) -> Result<OwnedSemaphorePermit, ProducerError> {
        let Memory {
            budget,
            limit,
            when_full,
            wait,
        } = &self.inner.memory;
        let wanted = msg.size_hint().min(*limit);
        let n = u32::try_from(wanted).unwrap_or(u32::MAX);
        let full = || {
            ProducerError::Full(LimitExceeded::Memory {
                used: limit.saturating_sub(budget.available_permits()),
                limit: *limit,
                wanted,
            })
        };
        match when_full {
            WhenFull::Fail => budget.clone().try_acquire_many_owned(n).map_err(|_| full()),
            WhenFull::Block => {
                let acquire = budget.clone().acquire_many_owned(n);
                match tokio::time::timeout_at(clock::after(clock::now(), *wait).into(), acquire)
                    .await
                {
                    Ok(taken) => taken.map_err(|_| ProducerError::Closed),
                    Err(_) => Err(full()),
                }
            }
        }
    }

    /// Whether `other` is a clone of this producer.
    pub(crate) fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The topic, as given to the broker.
    pub fn topic(&self) -> &str {
        &self.inner.topic
    }

    /// The producer's name (the broker's choice unless one was given); of
    /// partition 0 on a partitioned topic.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// How many partitions the producer writes to now (1 for a topic that
    /// is not partitioned); partitions added later count once the producer
    /// writes to them.
    pub fn partitions(&self) -> usize {
        partitions::lock(&self.inner.lanes).lanes.len()
    }

    /// Queues `msg` and returns its receipt, a future of the broker's
    /// [`MessageId`].
    ///
    /// Returns once the message is queued: waits only while the producer
    /// is full (with [`WhenFull::Block`]). Receipts of messages queued one
    /// after another on one partition resolve in that order.
    ///
    /// # Errors
    /// [`ProducerError::Closed`] if the producer is closed;
    /// [`ProducerError::Full`] at once if the client's memory limit is used
    /// up and the producer is set to [`WhenFull::Fail`], or once the send
    /// timeout passed without room in it. The receipt
    /// fails with [`ProducerError::MessageTooLarge`] (nothing was sent),
    /// [`ProducerError::Full`] (with [`WhenFull::Fail`]),
    /// [`ProducerError::Send`] (a SEND_ERROR that refuses the message for
    /// good; after any other the message is sent again), [`ProducerError::Timeout`],
    /// or the error that ended the producer.
    ///
    /// # Examples
    /// ```no_run
    /// use pulsar_wire::producer::ProducerMessage;
    /// # async fn demo(producer: pulsar_wire::producer::Producer) -> Result<(), pulsar_wire::Error> {
    /// let receipt = producer.send(ProducerMessage::new("hello").key("k")).await?;
    /// let id = receipt.await?;
    /// # Ok(()) }
    /// ```
    pub async fn send(
        &self,
        msg: impl Into<ProducerMessage>,
    ) -> Result<SendReceipt, ProducerError> {
        let msg = self.intercept(msg.into());
        match &self.inner.fixed {
            Some(lane) => self.queue(lane, msg).await,
            None => self.queue(&self.choose_lane(&msg), msg).await,
        }
    }

    /// Queues `msg` in transaction `txn` and returns its receipt, as
    /// [`send`](Self::send): the message is stored at once but delivered
    /// to consumers only once `txn` commits, never if it aborts.
    ///
    /// The topic partition the message goes to is added to the transaction
    /// (ADD_PARTITION_TO_TXN, once per partition) before the message is
    /// sent, so the first send to a partition waits for the coordinator.
    /// The transaction's commit waits for the receipt; a send that fails
    /// makes the commit abort the transaction instead.
    ///
    /// # Errors
    /// [`ProducerError::Transaction`] if the transaction is not open (ended,
    /// ending or timed out) or the coordinator refused the partition; the
    /// errors of [`send`](Self::send).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: pulsar_wire::Client, producer: pulsar_wire::producer::Producer) -> Result<(), pulsar_wire::Error> {
    /// let txn = client.transaction().begin().await?;
    /// let receipt = producer.send_in(&txn, "hello").await?;
    /// txn.commit().await?;
    /// let id = receipt.await?; // answered before the commit went out
    /// # Ok(()) }
    /// ```
    pub async fn send_in(
        &self,
        txn: &Transaction,
        msg: impl Into<ProducerMessage>,
    ) -> Result<SendReceipt, ProducerError> {
        let msg = self.intercept(msg.into());
        let lane = self.choose_lane(&msg);
        let op = txn.produce_to(&lane.topic).await?;
        let queued = self.queue(&lane, msg.in_txn(txn.id())).await?;
        let ended = queued.ended.clone();
        // The transaction learns the outcome even if the receipt is dropped.
        let (reply, receipt) = oneshot::channel();
        tokio::spawn(async move {
            let outcome = queued.await;
            op.finish(outcome.is_ok());
            let _ = reply.send(outcome);
        });
        Ok(SendReceipt { receipt, ended })
    }

    /// `msg` as the interceptors' `before_send` leave it.
    fn intercept(&self, mut msg: ProducerMessage) -> ProducerMessage {
        for interceptor in self.inner.interceptors.iter() {
            msg = interceptor.before_send(&self.inner.topic, msg);
        }
        msg
    }

    fn choose_lane(&self, msg: &ProducerMessage) -> task::Lane {
        if let Some(lane) = &self.inner.fixed {
            return lane.clone();
        }
        partitions::lock(&self.inner.lanes).choose(msg.get_key())
    }

    async fn queue(
        &self,
        lane: &task::Lane,
        msg: ProducerMessage,
    ) -> Result<SendReceipt, ProducerError> {
        let permit = self.reserve(&msg).await?;
        let (reply, receipt) = oneshot::channel();
        lane.tx
            .send(Cmd::Send {
                msg: Box::new(msg),
                reply,
                permit,
            })
            .await
            .map_err(|_| task::gone(&lane.ended))?;
        Ok(SendReceipt {
            receipt,
            ended: lane.ended.clone(),
        })
    }

    /// The producer's statistics (every partition's): messages and bytes
    /// stored, failures, receipts, pending sends and send latency
    /// percentiles, since it was created and over the last stats interval
    /// (see [`ProducerStats`](crate::stats::ProducerStats)). Cheap: a few
    /// atomic loads and one lock.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(producer: pulsar_wire::producer::Producer) -> Result<(), pulsar_wire::Error> {
    /// producer.send("hello").await?.await?;
    /// let stats = producer.stats();
    /// assert_eq!(stats.total.messages_sent, 1);
    /// println!("p99 send latency {:?}", stats.send_latency.p99);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> crate::stats::ProducerStats {
        self.inner.stats.snapshot(clock::now())
    }

    /// Sends every batched message now and waits until all messages queued
    /// before the call are answered.
    ///
    /// # Errors
    /// The error that ended the producer, or [`ProducerError::Closed`].
    pub async fn flush(&self) -> Result<(), ProducerError> {
        self.each(Cmd::Flush).await
    }

    /// Sends what is held, waits for its receipts (up to the send timeout),
    /// then closes the producer on the broker. Later sends fail with
    /// [`ProducerError::Closed`].
    ///
    /// Closing a closed producer does nothing; a close that meets a lost
    /// connection is done (the broker drops the producer with it).
    ///
    /// # Errors
    /// The broker's answer to CLOSE_PRODUCER, if it refused or did not
    /// answer over a connection still up; [`ProducerError::TaskFailed`] if
    /// the producer's task panicked.
    pub async fn close(&self) -> Result<(), ProducerError> {
        // After a close no partition is added.
        partitions::lock(&self.inner.lanes).closed = true;
        match self.each(Cmd::Close).await {
            Err(ProducerError::Closed) => Ok(()),
            other => other,
        }
    }

    async fn each(
        &self,
        cmd: fn(oneshot::Sender<Result<(), ProducerError>>) -> Cmd,
    ) -> Result<(), ProducerError> {
        let lanes = partitions::lock(&self.inner.lanes).lanes.clone();
        let mut answers = Vec::with_capacity(lanes.len());
        for lane in &lanes {
            let (done, answer) = oneshot::channel();
            if lane.tx.send(cmd(done)).await.is_err() {
                return Err(task::gone(&lane.ended));
            }
            answers.push((answer, &lane.ended));
        }
        for (answer, ended) in answers {
            answer.await.map_err(|_| task::gone(ended))??;
        }
        Ok(())
    }
}

/// The outcome of one send: resolves to the message's [`MessageId`] once
/// the broker has stored it (with its `batch_index` for a batched message,
/// its `partition` on a partitioned topic). Dropping it does not cancel the
/// send.
///
/// # Examples
/// ```no_run
/// # async fn demo(producer: pulsar_wire::producer::Producer) -> Result<(), pulsar_wire::Error> {
/// let receipt = producer.send("hello").await?; // queued
/// let id = receipt.await?;                      // stored
/// assert!(id.batch_index >= -1);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a receipt tells whether the message was stored"]
pub struct SendReceipt {
    receipt: oneshot::Receiver<Result<MessageId, ProducerError>>,
    /// Whether its partition's task stopped as asked (see `task::Lane`).
    ended: Arc<std::sync::atomic::AtomicBool>,
}

impl Future for SendReceipt {
    type Output = Result<MessageId, ProducerError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.receipt)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|_| Err(task::gone(&self.ended))))
    }
}
