//! The driver's link to the broker: up, or being re-created in the
//! background, one attempt at a time, with backoff between attempts (reset
//! after a success) and no limit on attempts while the producer is open.
//! Only a final refusal from the broker (`ConnectionError::is_final`) ends the
//! producer; a send timeout fails the sends that waited too long but the
//! producer keeps trying. The SENDs go out here too: only what the current
//! connection has not had yet, and nothing while re-creating.

use tracing::info;

use super::*;
use crate::backoff::Backoff;
use crate::connection::{BrokerHint, ConnectionError};
use crate::producer::connect::{self, Old};

/// The outcome of the reconnect attempt under way (a task of its own).
type Attempt = oneshot::Receiver<Result<Created, ProducerError>>;

/// Up on the current connection, or re-creating.
#[derive(Default)]
pub(super) struct Link {
    attempt: Option<Attempt>,
    backoff: Backoff,
}

impl Link {
    /// A link that came up at `now`.
    pub(super) fn up_since(now: Instant) -> Self {
        let mut link = Self::default();
        link.backoff.up(now);
        link
    }

    /// The broker answered a send on this link.
    pub(super) const fn worked(&mut self) {
        self.backoff.worked();
    }

    pub(super) const fn is_up(&self) -> bool {
        self.attempt.is_none()
    }

    /// The outcome of the attempt under way (pending forever while up).
    pub(super) async fn attempt(&mut self) -> Result<Created, ProducerError> {
        match self.attempt.as_mut() {
            // The task only ends without an answer if it panicked.
            Some(attempt) => attempt.await.unwrap_or(Err(ProducerError::Closed)),
            None => std::future::pending().await,
        }
    }

    fn start(&mut self, recipe: Recipe, old: Option<Old>, hint: Option<BrokerHint>) {
        let delay = self.backoff.next_delay();
        debug!(
            ?delay,
            attempt = self.backoff.attempts(),
            "re-creating the producer"
        );
        self.attempt = Some(connect::spawn_recreate(recipe, old, hint, delay));
    }
}

impl Driver {
    /// The producer on the broker is gone or cannot be trusted (`why`):
    /// re-create it, at `hint`'s broker if the broker named one, closing
    /// the old one first if `close_old`. Every unconfirmed entry will be
    /// written again.
    pub(super) fn lose(&mut self, why: ProducerError, hint: Option<BrokerHint>, close_old: bool) {
        let old = Old {
            conn: self.p.conn.clone(),
            id: self.p.id,
            close: close_old,
        };
        self.relink(&why, hint, Some(old));
    }

    /// The broker closed the producer (CLOSE_PRODUCER): re-create it, at
    /// `hint`'s broker if it named one. The old registration stays until
    /// then, for the receipts of the sends the broker was storing as it
    /// closed (see `Driver::late_receipts`).
    pub(super) fn closed_by_broker(&mut self, hint: BrokerHint) {
        let why = ProducerError::ClosedByBroker {
            topic: self.p.topic.clone(),
        };
        if self.relink(&why, Some(hint), None) {
            self.late_receipts = true;
        }
    }

    /// Starts re-creating the producer unless it is being re-created or
    /// dead already; every unconfirmed entry will be written again. True
    /// if it started.
    fn relink(&mut self, why: &ProducerError, hint: Option<BrokerHint>, old: Option<Old>) -> bool {
        if !self.link.is_up() || self.dead.is_some() {
            return false;
        }
        warn!(error = %why, unconfirmed = self.pending.in_flight().count(), "producer link lost; re-creating it");
        self.link.backoff.down(clock::now());
        self.pending.rewind();
        self.link.start(self.recipe.clone(), old, hint);
        true
    }

    /// Takes the outcome of one reconnect attempt.
    pub(super) fn on_attempt(&mut self, outcome: Result<Created, ProducerError>) {
        self.link.attempt = None;
        match outcome {
            Ok(mut fresh) => {
                fresh.unclaimed.claim();
                self.end_late_receipts();
                if fresh.topic_epoch.is_some() {
                    self.recipe.topic_epoch = fresh.topic_epoch;
                }
                info!(
                    connection = %fresh.conn.id(),
                    producer = %fresh.id,
                    resend = self.pending.unsent(),
                    "producer re-created; resending what is unconfirmed"
                );
                self.link.backoff.up(clock::now());
                self.p.conn = fresh.conn;
                self.p.id = fresh.id;
                self.p.events = fresh.events;
            }
            Err(e) if !e.is_final() => {
                debug!(error = %e, "re-creating the producer failed; trying again");
                self.link.start(self.recipe.clone(), None, None);
            }
            Err(e) => self.die(e),
        }
    }

    /// Moves every sealed entry, in order, into the in-flight queue, then
    /// writes what the current connection has not had yet (nothing while
    /// the producer is being re-created).
    pub(super) async fn write_ready(&mut self) {
        while let Some(sealed) = self.batcher.poll_ready() {
            let entry = match sealed {
                Ok(entry) => entry,
                Err(SealError { tokens, error }) => {
                    self.fail(
                        tokens,
                        &ProducerError::Compression(std::sync::Arc::new(error)),
                    );
                    continue;
                }
            };
            let (size, max) = (entry.payload.len(), self.p.conn.max_message_size());
            let chunk = self.settings.chunk_size.map_or(max, |c| c.min(max));
            let pieces = if size <= chunk {
                vec![(entry.metadata, entry.payload)]
            } else if self.settings.chunking && !entry.batched {
                match chunker::split(entry.metadata, entry.payload, chunk) {
                    Ok(chunks) => chunks,
                    Err(_) => {
                        self.fail(entry.tokens, &ProducerError::MessageTooLarge { size, max });
                        continue;
                    }
                }
            } else {
                self.fail(entry.tokens, &ProducerError::MessageTooLarge { size, max });
                continue;
            };
            // The last piece (the only one, unless chunked) carries the
            // replies: its receipt completes the send.
            let last = pieces.len() - 1;
            let mut tokens = Some(entry.tokens);
            for (i, (metadata, data)) in pieces.into_iter().enumerate() {
                let bytes = if last == 0 {
                    entry.uncompressed
                } else {
                    data.len()
                };
                let payload = Payload {
                    broker_entry_metadata: None,
                    checksum: Checksum::Valid,
                    metadata,
                    data,
                };
                let tokens = if i == last {
                    tokens.take().unwrap_or_default()
                } else {
                    Vec::new()
                };
                let (first, last_seq) = (entry.first, entry.last);
                self.pending.push(
                    clock::now(),
                    first,
                    last_seq,
                    entry.batched,
                    bytes,
                    tokens,
                    payload,
                );
            }
        }
        while self.link.is_up() && self.dead.is_none() {
            let Some((first, count, payload)) = self.pending.take_unsent() else {
                break;
            };
            let num = i32::try_from(count).unwrap_or(i32::MAX);
            let frame = Frame {
                command: commands::send_in(
                    self.p.id,
                    SequenceId(first),
                    num,
                    crate::ids::TxnId::of_metadata(&payload.metadata),
                ),
                payload: Some(Box::new(payload.clone())),
            };
            match self.p.conn.send_payload(frame).await {
                Ok(()) => {}
                // Never written, and it never will be: fail it, not the link.
                Err(ConnectionError::TooLarge { size, max }) => {
                    let tokens = self.pending.remove_last_taken().unwrap_or_default();
                    self.fail(tokens, &ProducerError::MessageTooLarge { size, max });
                }
                Err(e) => self.lose(ProducerError::ConnectionLost(e), None, false),
            }
        }
    }
}
