//! Messages on their way in: a delivery from the broker unpacked into the
//! core, and queued messages handed to waiting receivers, partitions in
//! turn.

use super::*;

impl Driver {
    /// Hands queued messages to waiting receivers, then to batch receives
    /// that are due.
    pub(super) async fn serve(&mut self) {
        self.serve_single().await;
        self.serve_batches().await;
    }

    /// What the next receiver gets in place of a message: the batch that
    /// closed a zero-queue consumer, a partition given up, an unreadable
    /// message a batch stopped before.
    pub(super) fn report_for_next_receiver(&mut self) -> Option<ConsumerError> {
        if let Some((topic, id)) = &self.closed_on_batch {
            return Some(ConsumerError::BatchOnZeroQueue {
                topic: topic.clone(),
                id: *id,
            });
        }
        self.lost_reports.pop_front()
    }

    async fn serve_single(&mut self) {
        // One clock read per pass: the messages handed over in it are
        // handed over at the same moment.
        let mut now = None;
        while let Some(reply) = self.waiting.pop_front() {
            if reply.is_closed() {
                continue;
            }
            if let Some(lost) = self.report_for_next_receiver() {
                let _ = reply.send(Err(lost));
                continue;
            }
            let at = match now {
                Some(at) => at,
                None => *now.insert(self.shelf.core_now()),
            };
            match self.pop(at).await {
                Some(message) => {
                    let _ = reply.send(message);
                }
                None => {
                    self.waiting.push_front(reply);
                    if let Some(lost) = self.all_lost() {
                        for reply in self.waiting.drain(..) {
                            let _ = reply.send(Err(lost()));
                        }
                    }
                    self.request_for_receivers().await;
                    return;
                }
            }
        }
    }

    /// When every sub gave up subscribing again: the error for receivers
    /// (nothing more can arrive, so nobody waits forever).
    pub(super) fn all_lost(&self) -> Option<impl Fn() -> ConsumerError + use<>> {
        let mut live = self.subs.iter().filter(|s| !s.removed);
        if !live.clone().all(|s| s.lost) {
            return None;
        }
        // None live (a pattern that matches nothing yet): waiting is right.
        let topic = live.next()?.name.to_string();
        let attempts = self.resubscribes.attempts(0);
        Some(move || ConsumerError::Lost {
            topic: topic.clone(),
            attempts,
        })
    }

    /// The next queued message, partitions taken in turn; in place of one
    /// the application must not get, the error naming it (the core holds
    /// it as handed out: unacked, under the ack timeout).
    pub(super) async fn pop(
        &mut self,
        now: std::time::Instant,
    ) -> Option<Result<Message, ConsumerError>> {
        let taken = self.shelf.lock().take(now);
        match taken {
            Some((index, incoming)) => {
                self.run_actions(index).await;
                Some(self.shelf.observers.hand_out(incoming.message))
            }
            None => {
                // Finding every queue empty may let a coalesced rewind go out.
                for index in 0..self.subs.len() {
                    self.run_actions(index).await;
                }
                None
            }
        }
    }

    /// Takes an event of the subscription of `generation` of sub `key`
    /// (ignored once the sub subscribed again or was freed).
    pub(super) async fn on_event(&mut self, key: SubKey, generation: u64, event: ConsumerEvent) {
        let now = self.shelf.core_now();
        let Some(index) = self.index_of(key) else {
            return;
        };
        let sub = &mut self.subs[index];
        if sub.generation != generation {
            return;
        }
        match event {
            ConsumerEvent::Message {
                message_id,
                redelivery_count,
                ack_set,
                consumer_epoch,
                payload,
            } => {
                sub.delivered = true;
                let Some(chunked::Whole {
                    id: message_id,
                    last_chunk,
                    payload,
                }) = self
                    .assemble(index, message_id, consumer_epoch, payload)
                    .await
                else {
                    return; // a chunk of a message still incomplete
                };
                if payload.metadata.num_messages_in_batch.is_some()
                    && self.settings.core.receiver_queue_size == 0
                {
                    self.close_on_batch(index, message_id).await;
                    return;
                }
                let sub = &mut self.subs[index];
                // What the broker counted against the permits.
                let permits = payload.metadata.num_messages_in_batch.unwrap_or(1).max(1) as u32;
                let max_size = chunks::decompress_limit(
                    sub.conn.max_receive_size(),
                    self.settings.client.memory().1,
                    &payload,
                );
                let delivery = Delivery {
                    topic: &sub.name,
                    partition: sub.partition,
                    message_id,
                    last_chunk,
                    redelivery_count,
                    ack_set: &ack_set,
                    payload,
                    max_size,
                    crypto: self.settings.crypto_failure_action,
                };
                let lost_permits = match unpack::unpack(delivery) {
                    Ok(mut unpacked) => {
                        trace!(topic = %sub.name, members = unpacked.messages.len(), "MESSAGE");
                        let mut shelved = self.shelf.lock();
                        let slot = &mut shelved.slots[index];
                        slot.position.retain(&mut unpacked);
                        // Members skipped (acked, or before the start), or
                        // a batch kept whole (undecoded).
                        let lost = permits.saturating_sub(unpacked.messages.len() as u32);
                        for message in unpacked.messages {
                            let incoming = Incoming {
                                id: message.0.id,
                                position: message.position(),
                                redelivery_count,
                                consumer_epoch,
                                batch_size: unpacked.batch_size,
                                message,
                            };
                            if let Err(e) = slot.core.on_message(now, incoming) {
                                warn!(topic = %sub.name, error = %e, "message refused by the consumer core");
                            }
                        }
                        if let Some(size) = unpacked.batch_size {
                            slot.core
                                .on_skipped_members(unpacked.entry, size, &unpacked.skipped);
                        }
                        lost
                    }
                    Err(e) => {
                        // Never handed out: reported to the broker (see unpack.rs).
                        warn!(topic = %sub.name, error = %e, "dropping an invalid entry");
                        let invalid = commands::ack_invalid(sub.id, e.id(), e.validation_error());
                        let _ = sub.conn.send_control(invalid).await;
                        permits
                    }
                };
                if lost_permits > 0 {
                    // Members that never reach the core: their permits go
                    // straight back to the broker.
                    let _ = sub.conn.give_back_permits(sub.id, lost_permits).await;
                }
                self.run_actions(index).await;
            }
            ConsumerEvent::ActiveConsumerChange { is_active } => {
                let name = sub.name.clone();
                self.activity
                    .send_modify(|all| match all.iter_mut().find(|(t, _)| *t == name) {
                        Some(entry) => entry.1 = is_active,
                        None => all.push((name, is_active)),
                    });
            }
            ConsumerEvent::ReachedEndOfTopic => {
                debug!(topic = %sub.name, "reached the end of the topic");
            }
            ConsumerEvent::Closed(hint) | ConsumerEvent::TopicMigrated(hint) => {
                self.reconnect(index, Some(hint), true).await;
            }
            ConsumerEvent::ConnectionLost(e) => {
                debug!(topic = %sub.name, error = %e, "connection lost");
                self.reconnect(index, None, false).await;
            }
        }
    }
}

impl Driver {
    /// Zero queue: one permit for each waiting receiver the queue and the
    /// permits granted before do not cover.
    async fn request_for_receivers(&mut self) {
        if self.subs.len() != 1 || self.settings.core.receiver_queue_size != 0 {
            return;
        }
        self.waiting.retain(|reply| !reply.is_closed());
        let waiting = self.waiting.len();
        self.shelf.lock().slots[0]
            .core
            .request_for_receivers(waiting);
        self.run_actions(0).await;
    }

    /// A batch reached a zero-queue consumer, which cannot take it (as
    /// in Java): the consumer closes on the broker (the batch stays
    /// unacked in the subscription), and this receive and every later one
    /// fail with [`ConsumerError::BatchOnZeroQueue`].
    async fn close_on_batch(&mut self, index: usize, id: MessageId) {
        let sub = &mut self.subs[index];
        warn!(topic = %sub.name, %id, "batched message on a zero receiver queue; closing the consumer");
        self.closed_on_batch = Some((sub.name.to_string(), id.with_partition(sub.partition)));
        // Its mailbox's end is ignored; nothing subscribes again.
        sub.generation += 1;
        sub.lost = true;
        let (conn, consumer) = (sub.conn.clone(), sub.id);
        let _ = conn.close_consumer(consumer).await;
    }
}
