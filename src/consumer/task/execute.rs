//! Carrying out the cores' actions (flow, ack, redeliver, dead-letter
//! forward, see `forward.rs`) and the handle's
//! requests (seek, last message id, unsubscribe).

use super::*;

impl Driver {
    /// Carries out what sub `index`'s core queued. Nothing while it
    /// subscribes again: the actions wait in the core (acks are kept across
    /// a reconnect) for the new consumer id. With receipts, the ACKs of this
    /// pass answer the acks waiting for them (see `acks.rs`).
    pub(super) async fn run_actions(&mut self, index: usize) {
        self.sync_memory(index);
        let sub = &self.subs[index];
        // No consumer under its id on the broker: the actions wait (for the
        // new consumer id), or stay, for a partition given up.
        if self.resubscribes.is_running(index) || sub.removed || sub.lost {
            return;
        }
        let receipts = self.settings.ack_receipts;
        let mut flight = acks::Flight::default();
        // Individual acks of consecutive actions, sent in one ACK frame
        // (each id with its own ack_set) before anything that follows them.
        let mut individual = Vec::new();
        // The answers to the ACK requests of this pass (without receipts).
        let mut answers = Vec::new();
        let sub = &mut self.subs[index];
        let passed_before = sub.acks.passed;
        loop {
            let Some(action) = self.shelf.lock().slots[index].core.poll_action() else {
                break;
            };
            // A chunked message's ack or redelivery names all its chunks.
            let action = sub.chunks.expand(action);
            let (conn, id) = (&sub.conn, sub.id);
            let joins = matches!(
                action,
                Action::Ack {
                    cumulative: false,
                    ..
                }
            ) && !receipts;
            if !joins {
                send_individual(conn, id, &mut individual, &mut answers).await;
            }
            let sent = match action {
                Action::Flow(permits) => {
                    trace!(topic = %sub.name, permits, "FLOW");
                    let queue_empty = self.shelf.lock().slots[index].core.queued() == 0;
                    if self.settings.forwards.withhold(index, id, permits) {
                        // Too many dead-letter forwards in flight: later.
                        Ok(())
                    } else if self.memory.withhold(index, id, permits, queue_empty) {
                        // The client's memory limit is reached: later.
                        Ok(())
                    } else {
                        conn.send_control(commands::flow(id, permits)).await
                    }
                }
                Action::Ack {
                    ids,
                    cumulative,
                    ack_set,
                } => {
                    trace!(topic = %sub.name, ?ids, cumulative, "ACK");
                    let kind = if cumulative {
                        AckType::Cumulative
                    } else {
                        AckType::Individual
                    };
                    let partition = sub.partition;
                    let ack_set_is_none = ack_set.is_none();
                    let ids = ids.into_iter().map(move |m| {
                        let mut data = m.with_partition(partition).to_proto();
                        if let Some(set) = &ack_set {
                            data.ack_set.clone_from(&set.words);
                            data.batch_size = i32::try_from(set.size).ok();
                        }
                        data
                    });
                    let ids: Vec<_> = ids.collect();
                    if receipts {
                        flight.acks.push(acks::WireAck { ids, kind });
                        Ok(())
                    } else if let Some(group) = self
                        .settings
                        .ack_group_time
                        .filter(|_| kind == AckType::Individual && ack_set_is_none)
                    {
                        if sub.grouped.is_empty() {
                            sub.acks.grouped_after = Some(passed_before);
                        }
                        sub.grouped.extend(ids);
                        sub.flush_at
                            .get_or_insert_with(|| clock::after(clock::now(), group));
                        Ok(())
                    } else if kind == AckType::Individual {
                        individual.extend(ids);
                        Ok(())
                    } else {
                        send_acks(conn, id, commands::split_ids(ids), kind, &mut answers).await
                    }
                }
                Action::Redeliver(ids) => {
                    let partition = sub.partition;
                    let ids = ids.iter().map(|m| m.with_partition(partition).to_proto());
                    send_each(conn, commands::split_ids(ids.collect()), |run| {
                        commands::redeliver(id, run, None)
                    })
                    .await
                }
                Action::RedeliverAll { consumer_epoch } => {
                    let none = std::iter::empty();
                    conn.send_control(commands::redeliver(id, none, Some(consumer_epoch)))
                        .await
                }
                Action::ForwardToDeadLetter {
                    origin, message, ..
                } => {
                    // Published in a task of its own; the result comes back
                    // through the loop (`on_forwarded`).
                    if !self.settings.forwards.start(sub.key, origin, message) {
                        let mut shelved = self.shelf.lock();
                        shelved.slots[index]
                            .core
                            .on_dead_letter_result(origin, Err(()));
                    }
                    Ok(())
                }
            };
            if let Err(e) = sent {
                // The mailbox gets ConnectionLost next and resubscribes.
                debug!(topic = %sub.name, error = %e, "control command not sent");
            }
        }
        send_individual(&sub.conn, sub.id, &mut individual, &mut answers).await;
        sub.acks.passed = self.shelf.lock().slots[index].core.ack_mark();
        let mark = sub.acks.confirmable();
        self.confirm_when_answered(index, answers, mark);
        let sub = &mut self.subs[index];
        flight.mark = mark;
        flight.after = Some(passed_before);
        if flight.acks.is_empty() {
            // Nothing sent: the replies wait (they come with an ACK).
            sub.acks.next.append(&mut flight.replies);
            return;
        }
        flight.replies.append(&mut sub.acks.next);
        self.send_flight(index, flight);
    }

    /// Sends the request `build` makes to every sub that has a consumer on
    /// the broker (not one whose topic is gone, nor one given up: the
    /// broker knows no consumer under its id, and pulsar-lite closes the
    /// connection for such a command); returns each answer with its sub.
    async fn request_each(
        &mut self,
        op: &'static str,
        build: impl Fn(ConsumerId, crate::ids::RequestId) -> crate::proto::BaseCommand,
    ) -> Result<Vec<(usize, Response)>, ConsumerError> {
        // Issued while subscribing again: wait for it (bounded).
        self.settle_resubscribes(op).await?;
        let mut out = Vec::new();
        let held = self
            .subs
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.removed && !s.lost);
        for (index, sub) in held {
            let answer = sub
                .conn
                .request(op, |request| build(sub.id, request))
                .await
                .map_err(|source| ConsumerError::Request {
                    op,
                    topic: sub.name.to_string(),
                    source,
                })?;
            out.push((index, answer));
        }
        Ok(out)
    }

    /// Moves the subscription of every partition `target` names (a
    /// message id names its own partition; earliest, latest and a publish
    /// time name all). Once the broker has moved it, each such partition
    /// drops what it queued and subscribes again (see [`Self::restart_at`]).
    pub(super) async fn seek(&mut self, target: SeekTarget) -> Result<(), ConsumerError> {
        self.settle_resubscribes("SEEK").await?;
        let single = self.subs.iter().filter(|s| !s.removed).count() == 1;
        for index in 0..self.subs.len() {
            if self.subs[index].removed {
                continue;
            }
            let boundary = match target {
                SeekTarget::MessageId(id) => {
                    let everywhere = id == MessageId::EARLIEST || id == MessageId::LATEST;
                    if !(single || everywhere || id.partition == self.subs[index].partition) {
                        continue;
                    }
                    Some(id)
                }
                SeekTarget::PublishTime(_) => None,
            };
            // Earliest goes as the publish time 0: the same position, and
            // pulsar-lite drops the connection on a SEEK to (-1, -1). A
            // chunked message's id goes as its first chunk's.
            let sent = match target {
                SeekTarget::MessageId(id) if id == MessageId::EARLIEST => {
                    SeekTarget::PublishTime(0)
                }
                SeekTarget::MessageId(id) => SeekTarget::MessageId(id.start()),
                other => other,
            };
            self.flush_acks(index).await;
            let sub = &self.subs[index];
            let ack_set = boundary.map_or_else(Vec::new, |id| {
                self.shelf.lock().slots[index].position.seek_ack_set(id)
            });
            sub.conn
                .request("SEEK", |r| commands::seek(sub.id, r, sent, ack_set))
                .await
                .map_err(|source| ConsumerError::Request {
                    op: "SEEK",
                    topic: sub.name.to_string(),
                    source,
                })?;
            // A seek brings acked messages back on purpose.
            self.shelf.lock().slots[index].core.on_seek();
            self.restart_at(index, boundary).await;
        }
        Ok(())
    }

    /// After a seek of sub `index` (to `boundary`, or to a publish time):
    /// nothing queued or still in flight from before it may reach the
    /// application. Apache Pulsar closes the consumer after a seek (and
    /// removes a non-durable subscription with it), pulsar-lite keeps it
    /// attached; either way this consumer id is closed, the queue is
    /// dropped and the old consumer's messages are ignored, and the
    /// partition subscribes again from the new position as after a lost
    /// subscription: in the background, after the first delay of the
    /// partition's reconnect backoff, which a seek starts over (see
    /// `resubscribe.rs` and `crate::backoff`).
    async fn restart_at(&mut self, index: usize, boundary: Option<MessageId>) {
        let (inclusive, durable) = (
            self.settings.options.start_inclusive,
            self.settings.options.durable,
        );
        self.shelf.lock().slots[index]
            .position
            .seek(boundary, inclusive, durable);
        let sub = &mut self.subs[index];
        let (conn, id) = (sub.conn.clone(), sub.id);
        let _ = conn.close_consumer(id).await;
        // The application asked for this: no failure to back off from, so
        // the delays start over (the first, about 0.1 s, comes next).
        sub.delivered = true;
        self.reconnect(index, None, true).await;
    }

    pub(super) async fn last_message_id(&mut self) -> Result<MessageId, ConsumerError> {
        if self.subs.len() != 1 {
            return Err(ConsumerError::MultipleTopics {
                count: self.subs.len(),
            });
        }
        if self.subs[0].lost {
            return Err(self.lost_error(0));
        }
        let answer = self
            .request_each("GET_LAST_MESSAGE_ID", commands::get_last_message_id)
            .await?;
        let partition = self.subs[0].partition;
        match answer.into_iter().next().map(|(_, answer)| answer) {
            Some(Response::GetLastMessageIdResponse(r)) => {
                Ok(MessageId::from_proto(&r.last_message_id).with_partition(partition))
            }
            other => Err(ConsumerError::UnexpectedResponse {
                op: "GET_LAST_MESSAGE_ID",
                topic: self.subs[0].name.to_string(),
                got: other.map_or("nothing", |r| r.kind()),
            }),
        }
    }

    /// Whether a message is queued, or the broker holds one after what
    /// each partition handed out.
    pub(super) async fn has_message_available(&mut self) -> Result<bool, ConsumerError> {
        if self.shelf.lock().slots.iter().any(|s| s.core.queued() > 0) {
            return Ok(true);
        }
        let op = "GET_LAST_MESSAGE_ID";
        // A partition given up has nothing more to deliver.
        let answers = self.request_each(op, commands::get_last_message_id).await?;
        for (index, answer) in answers {
            let sub = &self.subs[index];
            let Response::GetLastMessageIdResponse(r) = answer else {
                return Err(ConsumerError::UnexpectedResponse {
                    op,
                    topic: sub.name.to_string(),
                    got: answer.kind(),
                });
            };
            if self.shelf.lock().slots[index]
                .position
                .has_more(MessageId::from_proto(&r.last_message_id))
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Unsubscribes every topic with a consumer on the broker. A topic
    /// given up has none to unsubscribe with: if its subscription stays
    /// there, the unsubscribe fails naming it (after the others), as the
    /// Java client's fails when a consumer is not connected.
    pub(super) async fn unsubscribe(&mut self) -> Result<(), ConsumerError> {
        self.request_each("UNSUBSCRIBE", commands::unsubscribe)
            .await?;
        let left = self
            .subs
            .iter()
            .enumerate()
            .find(|(_, s)| s.lost && s.left_behind && !s.removed);
        match left {
            Some((index, sub)) => Err(ConsumerError::Lost {
                topic: sub.name.to_string(),
                attempts: self.resubscribes.attempts(index),
            }),
            None => Ok(()),
        }
    }

    /// Sends the grouped individual acks of sub `index` in one ACK frame.
    /// Not while it subscribes again: they go out under the new consumer
    /// id once subscribed (never with the old id on the old connection);
    /// never for a sub whose topic is gone or that was given up (no
    /// consumer on the broker has its id).
    pub(super) async fn flush_acks(&mut self, index: usize) {
        let sub = &self.subs[index];
        let resubscribing = self.resubscribes.is_running(index) || sub.removed || sub.lost;
        let sub = &mut self.subs[index];
        sub.flush_at = None;
        if resubscribing {
            return;
        }
        if sub.grouped.is_empty() {
            return;
        }
        let ids = std::mem::take(&mut sub.grouped);
        let mut answers = Vec::new();
        let runs = commands::split_ids(ids);
        let sent = send_acks(&sub.conn, sub.id, runs, AckType::Individual, &mut answers);
        if let Err(e) = sent.await {
            // The broker redelivers what it did not see acked.
            debug!(topic = %sub.name, error = %e, "grouped ack not sent");
        }
        sub.acks.grouped_after = None;
        let mark = sub.acks.passed;
        self.confirm_when_answered(index, answers, mark);
    }
}

/// Sends the individual acks gathered so far (one ACK frame, more only
/// past the frame size limit); their answers go to `answers`.
async fn send_individual(
    conn: &Connection,
    consumer: ConsumerId,
    ids: &mut Vec<crate::proto::MessageIdData>,
    answers: &mut Vec<acks::AckAnswer>,
) {
    if ids.is_empty() {
        return;
    }
    let runs = commands::split_ids(std::mem::take(ids));
    let sent = send_acks(conn, consumer, runs, AckType::Individual, answers);
    if let Err(e) = sent.await {
        // The mailbox gets ConnectionLost next and resubscribes.
        debug!(error = %e, "ACK not sent");
    }
}

/// Sends one ACK request per run of ids (see [`commands::split_ids`]), in
/// order with the other commands; their answers go to `answers`. Stops at
/// the first that cannot be sent.
async fn send_acks(
    conn: &Connection,
    consumer: ConsumerId,
    runs: Vec<Vec<crate::proto::MessageIdData>>,
    kind: AckType,
    answers: &mut Vec<acks::AckAnswer>,
) -> Result<(), crate::connection::ConnectionError> {
    for run in runs {
        let ids = acks::individual_ids(&run, kind);
        let answer = conn
            .send_request("ACK", |request| {
                commands::ack(consumer, run, kind, Some(request))
            })
            .await?;
        answers.push(acks::AckAnswer {
            ids,
            answer: Box::pin(answer),
        });
    }
    Ok(())
}

/// Sends one control frame per run of ids (see [`commands::split_ids`]);
/// stops at the first that cannot be sent.
async fn send_each(
    conn: &Connection,
    runs: Vec<Vec<crate::proto::MessageIdData>>,
    build: impl Fn(Vec<crate::proto::MessageIdData>) -> crate::proto::BaseCommand,
) -> Result<(), crate::connection::ConnectionError> {
    for run in runs {
        conn.send_control(build(run)).await?;
    }
    Ok(())
}
