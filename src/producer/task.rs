//! The driver task of one (partition) producer: feeds the pure parts,
//! arms one timer, and executes what they return.
//!
//! It owns the batcher, the in-flight queue and the budget; the handle talks
//! to it over a bounded channel, the connection over the producer's mailbox.
//! Only this loop awaits (C1).
//!
//! When the link to the broker breaks (connection lost, CLOSE_PRODUCER,
//! TOPIC_MIGRATED, a receipt that skips ahead) the driver keeps running:
//! `link.rs` re-creates the producer in the background with backoff while
//! sends keep queueing (bounded by the send timeout), then writes every
//! unconfirmed entry again, in order, with its original sequence ids.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};
use tracing::{Instrument, debug, info_span, warn};

use super::batcher::{BatchConfig, Batcher, SealError};
use super::chunker;
use super::connect::{Recipe, Unclaimed};
use super::limits::Budget;
use super::pending::{Pending, ReceiptError};
use super::{ProducerError, ProducerMessage, WhenFull};
use crate::clock;
use crate::connection::{Connection, ProducerEvent};
use crate::ids::{ProducerId, SequenceId};
use crate::interceptor::{Chain, ProducerInterceptor};
use crate::message_id::MessageId;
use crate::proto::ServerError;
use crate::stats::ProducerRecorder;
use crate::wire::{Checksum, Frame, Payload, commands};

#[path = "task_link.rs"]
mod link;
use link::Link;

/// Where one send's outcome goes.
pub(crate) type Reply = oneshot::Sender<Result<MessageId, ProducerError>>;

/// What the handle asks of the driver.
pub(crate) enum Cmd {
    Send {
        msg: Box<ProducerMessage>,
        reply: Reply,
        /// The message's share of the client's memory limit, held until it is answered.
        permit: OwnedSemaphorePermit,
    },
    Flush(oneshot::Sender<Result<(), ProducerError>>),
    Close(oneshot::Sender<Result<(), ProducerError>>),
}

/// Settings the builder resolved, shared by every partition's driver.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) batch: BatchConfig,
    /// Split entries over the broker's max message size into chunks.
    pub(crate) chunking: bool,
    /// Largest chunk, if below the broker's `max_message_size`.
    pub(crate) chunk_size: Option<usize>,
    pub(crate) send_timeout: Duration,
    pub(crate) max_pending_messages: usize,
    pub(crate) when_full: WhenFull,
    /// Where sends and their outcomes are counted.
    pub(crate) stats: Arc<ProducerRecorder>,
    /// Told of every send's outcome.
    pub(crate) interceptors: Chain<dyn ProducerInterceptor>,
}

/// A producer the broker accepted, ready to be driven.
#[derive(Debug)]
pub(crate) struct Created {
    pub(crate) conn: Connection,
    pub(crate) id: ProducerId,
    pub(crate) topic: String,
    pub(crate) name: String,
    /// The partition index, or -1 for a topic that is not partitioned.
    pub(crate) partition: i32,
    pub(crate) next_sequence: u64,
    /// The topic epoch the broker gave, if it gave one.
    pub(crate) topic_epoch: Option<u64>,
    /// The version of the producer's schema, stamped on every entry.
    pub(crate) schema_version: Option<bytes::Bytes>,
    pub(crate) events: mpsc::UnboundedReceiver<ProducerEvent>,
    /// Closes the producer on the broker if it is dropped before a driver
    /// claims it.
    pub(crate) unclaimed: Unclaimed,
}

struct Waiter {
    reply: Reply,
    bytes: usize,
    /// Its payload's length, and when it was queued (for the stats).
    payload: usize,
    queued_at: Instant,
    _permit: OwnedSemaphorePermit,
}

struct Driver {
    p: Created,
    recipe: Recipe,
    settings: Settings,
    /// Whether the producer is up on `p.conn`, or being created again.
    link: Link,
    batcher: Batcher<Waiter>,
    pending: Pending<Waiter, Payload>,
    budget: Budget,
    last_sequence: Option<u64>,
    /// The id of the first chunk of the chunked message being confirmed.
    first_chunk: Option<MessageId>,
    flushes: Vec<(u64, oneshot::Sender<Result<(), ProducerError>>)>,
    closing: Option<Option<oneshot::Sender<Result<(), ProducerError>>>>,
    dead: Option<ProducerError>,
    /// The broker closed the producer (CLOSE_PRODUCER) and it is being
    /// created again: the old registration, `p.events`, stays open for the
    /// receipts of sends the broker was storing as it closed. Handled as
    /// any receipt, each answers its send, which is then not sent again
    /// (the Java client drops them, and the topic stores those messages
    /// twice). Other events there change nothing while the link is down,
    /// except a final send error, which fails its send as it would anyway.
    late_receipts: bool,
}

/// A partition's task, as its handle sees it: the channel it sends on,
/// and whether the task stopped as asked (set) or panicked (unset once
/// the channel is gone).
#[derive(Debug, Clone)]
pub(crate) struct Lane {
    pub(crate) tx: mpsc::Sender<Cmd>,
    pub(crate) ended: Arc<AtomicBool>,
    /// The topic the lane produces to: the topic, or its partition.
    pub(crate) topic: Arc<str>,
}

/// Why a task is gone: closed as asked, or it panicked.
pub(crate) fn gone(ended: &AtomicBool) -> ProducerError {
    if ended.load(Ordering::Acquire) {
        ProducerError::Closed
    } else {
        ProducerError::TaskFailed
    }
}

/// Spawns the driver of `created`; returns the lane its handle sends on.
pub(crate) fn spawn(mut created: Created, mut recipe: Recipe, settings: Settings) -> Lane {
    created.unclaimed.claim();
    let (tx, mut rx) = mpsc::channel(1024);
    let span = info_span!("producer", topic = %created.topic, name = %created.name);
    let topic: Arc<str> = created.topic.as_str().into();
    // Reconnects ask for the name the broker gave.
    recipe.name = Some(created.name.clone());
    recipe.topic_epoch = created.topic_epoch;
    let driver = Driver {
        recipe,
        link: Link::up_since(clock::now()),
        batcher: Batcher::new(settings.batch, created.name.clone())
            .with_schema_version(created.schema_version.clone()),
        pending: Pending::default(),
        budget: Budget::new(Some(settings.max_pending_messages), None),
        p: created,
        settings,
        last_sequence: None,
        first_chunk: None,
        flushes: Vec::new(),
        closing: None,
        dead: None,
        late_receipts: false,
    };
    let ended = Arc::new(AtomicBool::new(false));
    let flag = ended.clone();
    let task = async move {
        driver.run(&mut rx).await;
        // Before the channel goes: a handle that finds it gone sees the flag.
        flag.store(true, Ordering::Release);
        drop(rx);
    };
    tokio::spawn(task.instrument(span));
    Lane { tx, ended, topic }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Driver {
    async fn run(mut self, cmds: &mut mpsc::Receiver<Cmd>) {
        loop {
            let full = self.budget.messages() >= self.settings.max_pending_messages;
            if full && self.batcher.len() > 0 {
                // Nothing more can join the batch: send it rather than
                // linger while every sender waits.
                self.batcher.flush();
                self.write_ready().await;
            }
            let deadline = earliest(
                self.batcher.next_deadline(),
                self.pending.next_deadline(self.settings.send_timeout),
            );
            let up = self.link.is_up();
            let accepting = self.closing.is_none()
                && (self.settings.when_full == WhenFull::Fail || self.dead.is_some() || !full);
            let sleep = tokio::time::sleep_until(deadline.unwrap_or_else(clock::now).into());
            tokio::select! {
                biased;
                // Once dead, the mailbox is closed for good: stop polling it.
                // While re-creating, the old one is done too, unless the
                // broker closed the producer and may still send receipts.
                event = self.p.events.recv(), if self.dead.is_none() && (up || self.late_receipts) => match event {
                    Some(event) => self.on_event(event),
                    None if up => self.lose(
                        ProducerError::ConnectionLost(crate::connection::ConnectionError::Closed),
                        None,
                        false,
                    ),
                    None => self.late_receipts = false,
                },
                fresh = self.link.attempt(), if self.dead.is_none() && !up => self.on_attempt(fresh),
                cmd = cmds.recv(), if accepting => match cmd {
                    Some(Cmd::Send { msg, reply, permit }) => self.on_send(*msg, reply, permit),
                    Some(Cmd::Flush(done)) => self.on_flush(done),
                    Some(Cmd::Close(done)) => self.start_close(Some(done)),
                    None => self.start_close(None),
                },
                () = sleep, if deadline.is_some() => self.on_tick(clock::now()),
            }
            self.write_ready().await;
            self.resolve_flushes();
            // Closing during a reconnect does not wait for it: what is
            // pending fails with `Closed`.
            if self.closing.is_some()
                && (self.dead.is_some()
                    || !self.link.is_up()
                    || (self.pending.is_empty() && self.batcher.len() == 0))
            {
                self.finish_close().await;
                return;
            }
        }
    }

    fn on_send(&mut self, msg: ProducerMessage, reply: Reply, permit: OwnedSemaphorePermit) {
        let (bytes, payload, now) = (msg.size_hint(), msg.payload().len(), clock::now());
        self.settings.stats.queued(payload);
        let refuse = |driver: &Self, reply, err| {
            driver
                .settings
                .stats
                .failed(now, [(now, payload)].into_iter());
            driver.answer(reply, Err(err));
        };
        if let Some(err) = &self.dead {
            refuse(self, reply, err.clone());
            return;
        }
        let max = self.p.conn.max_message_size();
        let compressed = self.settings.batch.compression != crate::compression::Compression::None;
        if !compressed && !self.settings.chunking && payload > max {
            refuse(
                self,
                reply,
                ProducerError::MessageTooLarge { size: payload, max },
            );
            return;
        }
        match self.settings.when_full {
            WhenFull::Fail => {
                if let Err(full) = self.budget.try_acquire(bytes) {
                    refuse(self, reply, full.into());
                    return;
                }
            }
            // The loop only takes a send while there is room.
            WhenFull::Block => self.budget.force_acquire(bytes),
        }
        let sequence = msg.get_sequence_id().unwrap_or_else(|| {
            let next = self.p.next_sequence;
            self.p.next_sequence += 1;
            next
        });
        self.last_sequence = Some(sequence);
        let waiter = Waiter {
            reply,
            bytes,
            payload,
            queued_at: now,
            _permit: permit,
        };
        self.batcher
            .push(now, clock::unix_millis(), sequence, &msg, waiter);
    }

    fn on_flush(&mut self, done: oneshot::Sender<Result<(), ProducerError>>) {
        self.batcher.flush();
        match (&self.dead, self.last_sequence) {
            (Some(err), _) => {
                let _ = done.send(Err(err.clone()));
            }
            (None, None) => {
                let _ = done.send(Ok(()));
            }
            (None, Some(upto)) => self.flushes.push((upto, done)),
        }
    }

    fn start_close(&mut self, done: Option<oneshot::Sender<Result<(), ProducerError>>>) {
        self.batcher.flush();
        self.closing = Some(done);
    }

    fn on_tick(&mut self, now: Instant) {
        self.batcher.on_tick(now);
        let expired = self.pending.expire(now, self.settings.send_timeout);
        if !expired.is_empty() {
            warn!(
                count = expired.len(),
                "send timeout: failing every send in flight"
            );
            let after = self.settings.send_timeout;
            self.fail(expired, &ProducerError::Timeout { after });
        }
    }

    fn on_event(&mut self, event: ProducerEvent) {
        match event {
            ProducerEvent::Receipt {
                sequence_id,
                message_id,
                ..
            } => self.on_receipt(sequence_id, message_id),
            ProducerEvent::SendError {
                sequence_id,
                code,
                message,
            } if !fails_the_send(code) => {
                // A broker that could not store the message for now (its
                // ledger fenced as the topic moves, bookies unreachable):
                // like the Java client, start over and send everything
                // unconfirmed again; the send timeout bounds the retries.
                let topic = self.p.topic.clone();
                let why = ProducerError::Send {
                    topic,
                    sequence_id: sequence_id.0,
                    code,
                    message,
                };
                self.lose(why, None, true);
            }
            ProducerEvent::SendError {
                sequence_id,
                code,
                message,
            } => match self.pending.on_send_error(sequence_id.0) {
                Ok(mut failed) => {
                    // The other chunks of a message share its sequence id:
                    // the message failed as a whole.
                    while self
                        .pending
                        .in_flight()
                        .next()
                        .is_some_and(|(first, _)| first == sequence_id.0)
                    {
                        failed.extend(
                            self.pending
                                .on_send_error(sequence_id.0)
                                .unwrap_or_default(),
                        );
                    }
                    self.first_chunk = None;
                    let err = ProducerError::Send {
                        topic: self.p.topic.clone(),
                        sequence_id: sequence_id.0,
                        code,
                        message,
                    };
                    self.fail(failed, &err);
                }
                Err(e) => debug!(error = %e, "send error for a send no longer in flight"),
            },
            ProducerEvent::Closed(hint) => self.closed_by_broker(hint),
            ProducerEvent::TopicMigrated(hint) => {
                let topic = self.p.topic.clone();
                self.lose(ProducerError::ClosedByBroker { topic }, Some(hint), true);
            }
            ProducerEvent::ConnectionLost(e) => {
                self.lose(ProducerError::ConnectionLost(e), None, false);
            }
        }
    }

    /// A SEND_RECEIPT: answers the oldest send in flight, if it is the one
    /// named; a receipt for a later one means the broker and we are out of
    /// step, and the producer starts over.
    fn on_receipt(&mut self, sequence_id: SequenceId, message_id: Option<MessageId>) {
        // A broker with deduplication on answers a sequence id it has
        // stored before with the position (-1, -1): the message is in the
        // topic, and its receipt resolves to that id (`is_duplicate`).
        let id = message_id
            .unwrap_or(MessageId::new(0, 0))
            .with_partition(self.p.partition);
        let chunk = self
            .pending
            .oldest()
            .and_then(|p| chunker::position(&p.metadata));
        match self.pending.on_receipt(sequence_id.0, id) {
            Ok(resolved) => {
                self.link.worked();
                // A chunked message is known by its last chunk's id, with
                // its first chunk's beside it.
                let chunked = match chunk {
                    Some((0, _)) => Some(*self.first_chunk.insert(id)),
                    Some((at, num)) if at + 1 == num => self
                        .first_chunk
                        .take()
                        .map(|first| id.with_first_chunk(first)),
                    _ => None,
                };
                let now = clock::now();
                let sends = resolved.iter().map(|(w, _)| (w.queued_at, w.payload));
                self.settings.stats.stored(now, sends);
                for (waiter, own) in resolved {
                    self.budget.release(1, waiter.bytes);
                    self.answer(waiter.reply, Ok(chunked.unwrap_or(own)));
                }
            }
            Err(ReceiptError::Stale { got, .. }) => {
                debug!(sequence_id = got, "receipt for a send no longer in flight");
            }
            Err(ReceiptError::OutOfOrder { expected, got }) => {
                // The broker and we disagree about what was sent:
                // start over on a fresh producer and send it all again.
                self.lose(
                    ProducerError::OutOfOrderReceipt { expected, got },
                    None,
                    true,
                );
            }
        }
    }

    /// Takes the receipts the closed registration holds, then lets it go
    /// (the producer is up again, or ends).
    fn end_late_receipts(&mut self) {
        if !std::mem::take(&mut self.late_receipts) {
            return;
        }
        while let Ok(event) = self.p.events.try_recv() {
            self.on_event(event);
        }
        let (conn, id) = (self.p.conn.clone(), self.p.id);
        tokio::spawn(async move { conn.unregister_producer(id).await });
    }

    /// Answers the flushes whose messages have all been answered.
    fn resolve_flushes(&mut self) {
        if self.dead.is_some() {
            return; // `die` answered them
        }
        let oldest = self.pending.in_flight().next().map(|(first, _)| first);
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flushes)
            .into_iter()
            .partition(|(upto, _)| oldest.is_none_or(|first| first > *upto));
        self.flushes = waiting;
        for (_, answer) in done {
            let _ = answer.send(Ok(()));
        }
    }

    fn fail(&mut self, waiters: Vec<Waiter>, err: &ProducerError) {
        let sends = waiters.iter().map(|w| (w.queued_at, w.payload));
        self.settings.stats.failed(clock::now(), sends);
        for waiter in waiters {
            self.budget.release(1, waiter.bytes);
            self.answer(waiter.reply, Err(err.clone()));
        }
    }

    /// Answers one send once the interceptors have seen its outcome.
    fn answer(&self, reply: Reply, outcome: Result<MessageId, ProducerError>) {
        for interceptor in self.settings.interceptors.iter() {
            let seen = outcome.as_ref().map(|id| *id);
            interceptor.on_send_acknowledgement(&self.p.topic, seen);
        }
        let _ = reply.send(outcome);
    }

    /// The producer cannot go on: fail everything held, refuse what comes.
    fn die(&mut self, err: ProducerError) {
        // Sends the broker confirmed as it closed are answered as stored.
        self.end_late_receipts();
        warn!(error = %err, "producer failed");
        let held: Vec<Waiter> = self
            .pending
            .drain()
            .into_iter()
            .chain(self.batcher.drain())
            .collect();
        self.fail(held, &err);
        for (_, done) in self.flushes.drain(..) {
            let _ = done.send(Err(err.clone()));
        }
        self.dead = Some(err);
    }

    async fn finish_close(&mut self) {
        let result = match self.dead.clone() {
            Some(ProducerError::ConnectionLost(_)) => Ok(()),
            // Nothing on the broker to close: it lost the producer already.
            _ if !self.link.is_up() => Ok(()),
            _ => match self.p.conn.close_producer(self.p.id).await {
                // The connection ended first: the broker dropped the
                // producer with it (as the Java client, done).
                Err(_) if self.p.conn.is_closed() => Ok(()),
                closed => closed.map_err(ProducerError::ConnectionLost),
            },
        };
        if self.dead.is_none() {
            self.die(ProducerError::Closed);
        }
        if let Some(Some(done)) = self.closing.take() {
            let _ = done.send(result);
        }
    }
}

/// Whether a SEND_ERROR with `code` fails the message for good. The Java
/// client fails it on a checksum mismatch, a terminated topic and a refused
/// message, and for any other code reconnects and sends it again.
fn fails_the_send(code: ServerError) -> bool {
    matches!(
        code,
        ServerError::ChecksumError
            | ServerError::TopicTerminatedError
            | ServerError::NotAllowedError
    )
}
