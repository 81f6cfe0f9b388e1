//! Batch receives and batch acks: a batch receive waits, its messages
//! staying in the partitions' queues, until the policy says the batch is
//! due; then they are taken one by one as single receives take them (each
//! starts its ack timeout and gives its permit back at that moment). An
//! ack of many messages goes to the cores first and out after, so each
//! partition sends them in one ACK frame.

use super::*;
use crate::consumer::batch_receive::{BatchReceivePolicy, Messages};

/// A batch receive waiting to be due.
#[derive(Debug)]
pub(crate) struct PendingBatch {
    pub(super) reply: Reply<Messages>,
    /// When it is due whatever is queued (the policy's timeout).
    pub(super) deadline: Option<std::time::Instant>,
}

/// One message of an ack of many.
#[derive(Debug)]
pub(crate) struct AckOne {
    pub(crate) topic: Arc<str>,
    /// The application's id (see [`super::held_at`]).
    pub(crate) id: MessageId,
    pub(crate) batch_size: Option<u32>,
    /// `None`: nobody waits for the outcome.
    pub(crate) reply: Option<Reply<()>>,
}

impl Driver {
    /// The batch policy as applied: its message bound at most what the
    /// partitions can queue together.
    fn batch_policy(&self) -> BatchReceivePolicy {
        let queue = self
            .shelf
            .lock()
            .slots
            .iter()
            .map(|s| s.core.config().receiver_queue_size as usize)
            .sum();
        self.settings.batch_receive.effective(queue)
    }

    /// A batch receive: answered at once if a batch is due (or cannot be
    /// served), else it waits (until the policy's timeout at most).
    pub(super) fn receive_batch(&mut self, reply: Reply<Messages>) {
        if self.settings.core.receiver_queue_size == 0 {
            let _ = reply.send(Err(ConsumerError::BatchReceiveOnZeroQueue));
            return;
        }
        let deadline = self
            .batch_policy()
            .timeout
            .map(|timeout| clock::after(clock::now(), timeout));
        self.batches.push_back(PendingBatch { reply, deadline });
    }

    /// When the first waiting batch receive is due by its timeout.
    pub(super) fn batch_deadline(&self) -> Option<std::time::Instant> {
        self.batches.front().and_then(|b| b.deadline)
    }

    /// Answers the batch receives that are due, oldest first.
    pub(super) async fn serve_batches(&mut self) {
        let policy = self.batch_policy();
        let mut now = None;
        while let Some(head) = self.batches.front() {
            if head.reply.is_closed() {
                self.batches.pop_front();
                continue;
            }
            let deadline = head.deadline;
            if let Some(error) = self.report_for_next_receiver() {
                if let Some(batch) = self.batches.pop_front() {
                    let _ = batch.reply.send(Err(error));
                }
                continue;
            }
            let (queued, bytes) = self.shelf.lock().slots.iter().fold((0, 0), |(n, b), s| {
                (n + s.core.queued(), b + s.core.queued_bytes())
            });
            let at = *now.get_or_insert_with(clock::now);
            if queued == 0 {
                // A batch receive waits on empty queues: as for a receive,
                // that lets a rewind a nack asked for go out (Exclusive,
                // Failover). With nothing queued nothing is taken.
                let core_now = self.shelf.core_now();
                if let Some(taken) = self.pop(core_now).await {
                    if let Some(batch) = self.batches.pop_front() {
                        let _ = batch.reply.send(taken.map(|m| Messages(vec![m])));
                    }
                    continue;
                }
            }
            let lost = self.all_lost();
            let due = policy.is_full(queued, bytes)
                || deadline.is_some_and(|d| d <= at)
                || (queued == 0 && lost.is_some());
            if !due {
                return;
            }
            let Some(batch) = self.batches.pop_front() else {
                return;
            };
            let answer = match (queued, lost) {
                (0, Some(lost)) => Err(lost()),
                _ => self.take_batch(&policy).await,
            };
            let _ = batch.reply.send(answer);
        }
    }

    /// Takes queued messages, partitions in turn, while they fit the policy;
    /// an unreadable one ends the batch (its error goes to the next
    /// receiver, or is the answer if the batch is empty).
    async fn take_batch(&mut self, policy: &BatchReceivePolicy) -> Result<Messages, ConsumerError> {
        let now = self.shelf.core_now();
        let (mut messages, mut total) = (Vec::new(), 0);
        while let Some(bytes) = self.next_queued_bytes() {
            if !policy.fits(messages.len(), total, bytes) {
                break;
            }
            match self.pop(now).await {
                Some(Ok(message)) => {
                    total += bytes;
                    messages.push(message);
                }
                Some(Err(error)) if messages.is_empty() => return Err(error),
                Some(Err(error)) => {
                    self.lost_reports.push_front(error);
                    break;
                }
                None => break,
            }
        }
        Ok(Messages(messages))
    }

    /// The bytes the message [`pop`](Self::pop) takes next counts against
    /// the memory limit (its payload and the fixed overhead per message).
    fn next_queued_bytes(&self) -> Option<usize> {
        let shelved = self.shelf.lock();
        let n = shelved.slots.len();
        (0..n).find_map(|k| shelved.slots[(shelved.next_sub + k) % n].core.front_bytes())
    }

    /// Acks many messages: each goes to its partition's core, then each
    /// partition touched sends what its core queued (one ACK frame for its
    /// individual acks).
    pub(super) async fn ack_all(&mut self, acks: Vec<AckOne>) {
        let mut touched = Vec::new();
        for one in acks {
            let recorded = self
                .record_ack(&one.topic, one.id, one.batch_size, false, one.reply)
                .await;
            if let Some(index) = recorded.filter(|i| !touched.contains(i)) {
                touched.push(index);
            }
        }
        for index in touched {
            self.run_actions(index).await;
        }
    }
}
