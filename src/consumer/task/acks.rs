//! Acks on the wire: who waits for which ACK (with receipts), ACK requests
//! in flight, and acks that wait for a subscription.
//!
//! With ack receipts an application's ack is answered only by the broker's
//! ACK_RESPONSE for the ACK that covers it:
//! - an ack the core queued is answered by the ACK frames of the next pass
//!   over the core's actions (all of them confirmed, or the first error);
//! - a batch member whose siblings are not all acked yet is answered once
//!   recorded (its entry's ACK goes with the last member's ack, which that
//!   ACK answers; with batch index ack each member has an ACK of its own),
//!   as the Java client does: an ack never waits on acks the application
//!   has not made;
//! - while the sub subscribes again nothing is sent: the acks wait in the
//!   core and their replies here, and go out under the new consumer id;
//! - an ACK request lost with its connection or consumer is sent again
//!   under the new one, and its replies wait for that answer;
//! - what cannot be sent (the consumer closed first, the subscription was
//!   lost for good) is answered with an error.
//!
//! Every ACK frame is a request, with receipts or not, so the core learns
//! which acks the broker applied: a flight's answers confirm the acks
//! recorded up to its mark ([`ConsumerCore::acks_confirmed`]), and each
//! answered frame the ids it carried ([`ConsumerCore::acks_applied`]), also
//! when a later frame of its flight is cut short by a reconnect. After a
//! reconnect the copies of applied acks are handed out (a rewind made
//! elsewhere brings them on purpose) while the others are dropped, and acks
//! waiting to be sent again are dropped if their message's ack was applied.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;

use super::*;
use crate::connection::ConnectionError;
use crate::proto::MessageIdData;

/// One ACK frame's content, without the consumer id (applied when sent).
#[derive(Debug, Clone)]
pub(super) struct WireAck {
    pub(super) ids: Vec<MessageIdData>,
    pub(super) kind: AckType,
}

/// ACK frames sent (or to send) together, and the replies they answer.
#[derive(Debug, Default)]
pub(super) struct Flight {
    pub(super) acks: Vec<WireAck>,
    pub(super) replies: Vec<Reply<()>>,
    /// The core's ack mark its answers confirm: every ack recorded up to
    /// it was sent by the time this flight's ACKs were.
    pub(super) mark: u64,
    /// With receipts, the mark at the pass before: this flight carries the
    /// acks recorded after it, so its answers confirm those alone, even
    /// before the answers of earlier flights.
    pub(super) after: Option<u64>,
    /// The ids each of its ACK frames acks individually, in the order
    /// sent (none for a cumulative one).
    pub(super) frames: Vec<Vec<MessageId>>,
    /// How many of its ACK frames the broker answered so far, in order: a
    /// flight cut short by a lost consumer has their acks applied all the
    /// same.
    pub(super) answered: Arc<AtomicUsize>,
}

impl Flight {
    /// Whether it only waits for answers to confirm its mark (ACKs sent
    /// already, nobody waiting on them): nothing to send again.
    fn confirms_only(&self) -> bool {
        self.acks.is_empty() && self.replies.is_empty()
    }
}

impl Flight {
    /// Answers every reply with `result`.
    pub(super) fn answer(self, result: impl Fn() -> Result<(), ConsumerError>) {
        for reply in self.replies {
            let _ = reply.send(result());
        }
    }
}

/// The outcome of one flight: sub key, token, result.
pub(super) type Landed = (SubKey, u64, Result<(), ConnectionError>);

/// The answer to one ACK request, with the ids it acks individually (none
/// for a cumulative ack).
pub(super) struct AckAnswer {
    pub(super) ids: Vec<MessageId>,
    pub(super) answer: BoxFuture<'static, Result<Response, ConnectionError>>,
}

/// The ids `run` acks individually: an entry, or with an `ack_set` (batch
/// index ack) the members it leaves clear (of its `batch_size`, when it
/// names one); none for a cumulative ack.
pub(super) fn individual_ids(run: &[MessageIdData], kind: AckType) -> Vec<MessageId> {
    if kind == AckType::Cumulative {
        return Vec::new();
    }
    let mut ids = Vec::with_capacity(run.len());
    for data in run {
        let id = MessageId::from_proto(data);
        if data.ack_set.is_empty() {
            ids.push(id);
            continue;
        }
        ids.extend(acked_members(data).map(|member| id.with_batch_index(member)));
    }
    ids
}

/// The members an id with an `ack_set` leaves clear: of its `batch_size`,
/// when it names one, else every bit of the set.
fn acked_members(data: &MessageIdData) -> impl Iterator<Item = i32> + '_ {
    let bits = i32::try_from(data.ack_set.len() * 64).unwrap_or(i32::MAX);
    let members = data.batch_size.map_or(bits, |size| size.clamp(0, bits));
    (0..members).filter(|&m| !crate::consumer::unpack::still_unacked(&data.ack_set, m))
}

/// Takes out of an ACK's id `data` the acks the broker applied already
/// (`applied`): an entry's id goes whole; an id with an `ack_set` gets
/// the bits of its applied members set again, and goes once it acks no
/// member. False if nothing is left to ack.
fn unapplied_part(data: &mut MessageIdData, applied: impl Fn(MessageId) -> bool) -> bool {
    let id = MessageId::from_proto(data);
    if data.ack_set.is_empty() {
        return !applied(id);
    }
    let done: Vec<i32> = acked_members(data)
        .filter(|&m| applied(id.with_batch_index(m)))
        .collect();
    for member in done {
        let (word, bit) = ((member / 64) as usize, member % 64);
        data.ack_set[word] |= 1_i64 << bit;
    }
    acked_members(data).next().is_some()
}

/// A flight's outcome once `answers` came, in order (the first error ends
/// it), counting in `answered` the ones that were successes.
fn answered_in_order<F>(
    key: SubKey,
    token: u64,
    answers: Vec<F>,
    answered: &Arc<AtomicUsize>,
) -> impl Future<Output = Landed> + Send + 'static
where
    F: Future<Output = Result<Response, ConnectionError>> + Send + 'static,
{
    let answered = answered.clone();
    async move {
        for answer in answers {
            if let Err(e) = answer.await {
                return (key, token, Err(e));
            }
            answered.fetch_add(1, Ordering::AcqRel);
        }
        (key, token, Ok(()))
    }
}

/// The flights waiting for their answers, polled by the driver alone
/// (through `&mut`). The mutex is never locked: it only makes the set
/// `Sync`, as the driver is shared by reference across awaits.
#[derive(Default)]
pub(super) struct Flights(std::sync::Mutex<FuturesUnordered<BoxFuture<'static, Landed>>>);

impl std::fmt::Debug for Flights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flights").finish_non_exhaustive()
    }
}

impl Flights {
    fn set(&mut self) -> &mut FuturesUnordered<BoxFuture<'static, Landed>> {
        self.0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&mut self, flight: impl Future<Output = Landed> + Send + 'static) {
        self.set().push(Box::pin(flight));
    }

    /// Whether no flight waits.
    pub(super) fn is_empty(&mut self) -> bool {
        self.set().is_empty()
    }

    /// The next flight answered; `None` at once when none waits.
    pub(super) async fn next(&mut self) -> Option<Landed> {
        self.set().next().await
    }
}

/// One sub's acks that someone waits for.
#[derive(Debug, Default)]
pub(super) struct AckWaiters {
    /// Replies of acks the core queued: answered by the next pass's ACKs.
    pub(super) next: Vec<Reply<()>>,
    /// Flights sent and not answered, by token.
    pub(super) in_flight: BTreeMap<u64, Flight>,
    /// Flights to send once subscribed again.
    pub(super) resend: Vec<Flight>,
    /// The core's ack mark at the end of the last pass over its actions:
    /// every ack recorded up to it is sent, or grouped to be sent.
    pub(super) passed: u64,
    /// The mark before the first of the grouped acks not flushed yet, if
    /// any: answers confirm no further until they are sent.
    pub(super) grouped_after: Option<u64>,
}

impl AckWaiters {
    /// The connection or consumer is gone: flights in flight go out again
    /// after the next subscribe (their late outcomes are ignored).
    pub(super) fn requeue_in_flight(&mut self) {
        for flight in std::mem::take(&mut self.in_flight).into_values() {
            if flight.confirms_only() {
                continue;
            }
            if flight.acks.is_empty() {
                // Every ack it carried was applied (see
                // `Driver::drop_applied_acks`).
                flight.answer(|| Ok(()));
            } else {
                self.resend.push(flight);
            }
        }
    }

    /// The mark answers to ACKs sent now confirm: the last pass's, or the
    /// one before the grouped acks still waiting.
    pub(super) fn confirmable(&self) -> u64 {
        self.grouped_after.unwrap_or(self.passed)
    }

    /// Whether anything waits here (answers that only confirm a mark aside).
    pub(super) fn is_empty(&self) -> bool {
        self.next.is_empty()
            && self.in_flight.values().all(Flight::confirms_only)
            && self.resend.is_empty()
    }

    /// Answers every waiting reply with `error()`: nothing more can be sent.
    pub(super) fn fail_all(&mut self, error: impl Fn() -> ConsumerError) {
        let replies = self
            .next
            .drain(..)
            .chain(
                std::mem::take(&mut self.in_flight)
                    .into_values()
                    .flat_map(|f| f.replies),
            )
            .chain(self.resend.drain(..).flat_map(|f| f.replies));
        for reply in replies {
            let _ = reply.send(Err(error()));
        }
    }
}

/// Whether an ACK request that failed with `error` may have missed its
/// consumer (connection or consumer gone), so it is worth sending again
/// under the next subscription.
pub(super) fn lost_with_its_consumer(error: &ConnectionError) -> bool {
    !matches!(
        error,
        ConnectionError::Server { .. } | ConnectionError::Timeout { .. }
    )
}

impl Driver {
    /// Sends `flight` on sub `index`'s connection as its consumer, each ACK
    /// as a request; the outcome comes back through the loop
    /// ([`Driver::ack_landed`]).
    pub(super) fn send_flight(&mut self, index: usize, mut flight: Flight) {
        let sub = &mut self.subs[index];
        let token = self.ack_tokens;
        self.ack_tokens += 1;
        let (conn, id, key) = (&sub.conn, sub.id, sub.key);
        // Queued now, in order with what the driver sends next (each ACK
        // frame names at most a frame's worth of ids); only the answers
        // are awaited in the set.
        let mut frames = Vec::new();
        let answers: Vec<_> = flight
            .acks
            .iter()
            .flat_map(|ack| {
                let kind = ack.kind;
                commands::split_ids(ack.ids.clone())
                    .into_iter()
                    .map(move |ids| (ids, kind))
            })
            .map(|(ids, kind)| {
                frames.push(individual_ids(&ids, kind));
                conn.queue_request("ACK", move |request| {
                    commands::ack(id, ids, kind, Some(request))
                })
            })
            .collect();
        flight.frames = frames;
        flight.answered = Arc::default();
        let landed = answered_in_order(key, token, answers, &flight.answered);
        sub.acks.in_flight.insert(token, flight);
        self.ack_flights.push(landed);
    }

    /// Confirms `mark` to sub `index`'s core once every answer in
    /// `answers` (to ACK requests sent already, in order, each with the
    /// ids it acks individually) is a success.
    pub(super) fn confirm_when_answered(
        &mut self,
        index: usize,
        answers: Vec<AckAnswer>,
        mark: u64,
    ) {
        if answers.is_empty() {
            return;
        }
        let sub = &mut self.subs[index];
        let token = self.ack_tokens;
        self.ack_tokens += 1;
        let (frames, answers): (Vec<_>, Vec<_>) =
            answers.into_iter().map(|a| (a.ids, a.answer)).unzip();
        let flight = Flight {
            mark,
            frames,
            ..Flight::default()
        };
        let landed = answered_in_order(sub.key, token, answers, &flight.answered);
        sub.acks.in_flight.insert(token, flight);
        self.ack_flights.push(landed);
    }

    /// The acks of the ACK frames of `flight` the broker answered before
    /// it was cut short (its consumer lost): they are applied, so they
    /// count as confirmed and are not sent again.
    pub(super) fn take_partial_answers(&mut self, index: usize, flight: &mut Flight) {
        let answered = flight
            .answered
            .load(Ordering::Acquire)
            .min(flight.frames.len());
        if answered == 0 {
            return;
        }
        let applied: Vec<MessageId> = flight.frames.drain(..answered).flatten().collect();
        flight.answered.store(0, Ordering::Release);
        self.shelf.lock().slots[index]
            .core
            .acks_applied(applied.iter().copied());
        let applied: std::collections::HashSet<_> = applied.into_iter().collect();
        for ack in &mut flight.acks {
            if ack.kind == AckType::Individual {
                ack.ids
                    .retain_mut(|d| unapplied_part(d, |id| applied.contains(&id)));
            }
        }
        flight.acks.retain(|ack| !ack.ids.is_empty());
    }

    /// Drops, from the acks of sub `index` that would go out again under
    /// its next subscription (grouped, or in ACK requests not answered),
    /// the individual acks of messages the broker already applied an ack
    /// of (an ack again of a dropped copy, say): sent after an outside
    /// rewind, they would ack the copies it brings back, unseen. Call it
    /// once the answers in are taken, before the core forgets which acks
    /// were applied.
    pub(super) fn drop_applied_acks(&mut self, index: usize) {
        let mut in_flight = std::mem::take(&mut self.subs[index].acks.in_flight);
        for flight in in_flight.values_mut() {
            self.take_partial_answers(index, flight);
        }
        self.subs[index].acks.in_flight = in_flight;
        let shelved = self.shelf.lock();
        let core = &shelved.slots[index].core;
        let applied = |id| core.ack_applied(id);
        let sub = &mut self.subs[index];
        sub.grouped.retain_mut(|d| unapplied_part(d, applied));
        for flight in sub.acks.in_flight.values_mut() {
            for ack in &mut flight.acks {
                if ack.kind == AckType::Individual {
                    ack.ids.retain_mut(|d| unapplied_part(d, applied));
                }
            }
            flight.acks.retain(|ack| !ack.ids.is_empty());
        }
    }

    /// The ACK requests of sub `index` sent without receipts and not
    /// answered when its consumer was lost: nothing sends them again, so
    /// their acks may be lost, and copies of their messages are acked
    /// again. Call it once the answers in are taken, before the core's
    /// reconnect.
    pub(super) fn lose_unanswered_acks(&mut self, index: usize) {
        let mut shelved = self.shelf.lock();
        let core = &mut shelved.slots[index].core;
        for flight in self.subs[index].acks.in_flight.values() {
            if flight.confirms_only() {
                let ids = flight.frames.iter().flatten().copied();
                core.acks_sent_unanswered(ids);
            }
        }
    }

    /// Takes the outcomes of the flights already answered. The connection
    /// routes an answer before the CLOSE_CONSUMER (or the loss) that
    /// follows it on the wire, so at a reconnect this confirms every ack
    /// the broker answered before it: their copies after a rewind made
    /// elsewhere are handed out, not dropped as possibly lost.
    pub(super) fn take_answered_acks(&mut self) {
        while let Some(Some(landed)) = self.ack_flights.next().now_or_never() {
            self.ack_landed(landed);
        }
    }

    /// A flight's outcome: its replies are answered, or it goes out again
    /// under the next subscription if it was lost with its consumer.
    pub(super) fn ack_landed(&mut self, (key, token, result): Landed) {
        let Some(index) = self.index_of(key) else {
            return; // its topic left: its replies were answered then
        };
        let Some(mut flight) = self.subs[index].acks.in_flight.remove(&token) else {
            return; // requeued at a reconnect: the resend answers
        };
        if result.is_err() {
            self.take_partial_answers(index, &mut flight);
        }
        let sub = &mut self.subs[index];
        match result {
            Ok(()) => {
                let core = &mut self.shelf.lock().slots[index].core;
                match flight.after {
                    Some(after) => core.acks_confirmed_between(after, flight.mark),
                    // Answers may come out of order across flights: a mark
                    // is confirmed once no older flight waits.
                    None => {
                        if sub.acks.in_flight.values().all(|f| f.mark >= flight.mark) {
                            core.acks_confirmed(flight.mark);
                        }
                        core.acks_applied(flight.frames.iter().flatten().copied());
                    }
                }
                flight.answer(|| Ok(()));
            }
            Err(e) if lost_with_its_consumer(&e) && !sub.lost => {
                debug!(topic = %sub.name, error = %e, "ACK lost with its consumer; sending it again");
                if self.resubscribes.is_running(index) || sub.conn.is_closed() {
                    sub.acks.resend.push(flight);
                } else {
                    self.send_flight(index, flight);
                }
            }
            Err(source) => {
                let topic = sub.name.to_string();
                flight.answer(|| {
                    Err(ConsumerError::Request {
                        op: "ACK",
                        topic: topic.clone(),
                        source: source.clone(),
                    })
                });
            }
        }
    }

    /// Sends the flights of sub `index` that waited for a subscription.
    pub(super) fn resend_acks(&mut self, index: usize) {
        for flight in std::mem::take(&mut self.subs[index].acks.resend) {
            self.send_flight(index, flight);
        }
    }

    /// Waits (bounded by the operation timeout) until no ACK request is in
    /// flight, so their replies get the broker's answer before a close.
    pub(super) async fn settle_acks(&mut self) {
        let after = self.settings.client.operation_timeout();
        let deadline = tokio::time::Instant::from_std(clock::after(clock::now(), after));
        let waiting = |s: &Sub| s.acks.in_flight.values().any(|f| !f.confirms_only());
        while self.subs.iter().any(waiting) {
            match tokio::time::timeout_at(deadline, self.ack_flights.next()).await {
                Ok(Some(landed)) => self.ack_landed(landed),
                Ok(None) | Err(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_acks_its_entries_or_the_members_its_ack_sets_leave_clear() {
        let entry = MessageId::new(7, 3).to_proto();
        let mut members = MessageId::new(7, 4).to_proto();
        // Members 1 and 2 of a batch of 3 acked: bit 0 stays set.
        members.ack_set = vec![0b1 | !0b111];
        let ids = individual_ids(&[entry, members], AckType::Individual);
        assert_eq!(
            ids,
            [
                MessageId::new(7, 3),
                MessageId::new(7, 4).with_batch_index(1),
                MessageId::new(7, 4).with_batch_index(2),
            ]
        );
        assert!(individual_ids(&[MessageId::new(7, 3).to_proto()], AckType::Cumulative).is_empty());
    }

    #[test]
    fn a_frame_naming_its_batch_size_acks_no_member_past_it() {
        let mut members = MessageId::new(7, 4).to_proto();
        // Member 1 of a batch of 3 acked; the bits past the batch are clear.
        members.ack_set = vec![0b101];
        members.batch_size = Some(3);
        let ids = individual_ids(&[members], AckType::Individual);
        assert_eq!(ids, [MessageId::new(7, 4).with_batch_index(1)]);
    }

    #[test]
    fn applied_acks_are_taken_out_of_a_frame_sent_again() {
        let entry = MessageId::new(7, 3);
        let mut plain = entry.to_proto();
        assert!(unapplied_part(&mut plain, |_| false));
        assert!(!unapplied_part(&mut plain, |id| id == entry));

        // Members 0 and 2 of a batch of 4 acked; member 0's ack applied.
        let mut members = MessageId::new(7, 4).to_proto();
        members.ack_set = vec![0b1010];
        members.batch_size = Some(4);
        let batch = MessageId::new(7, 4);
        assert!(unapplied_part(&mut members, |id| id == batch.with_batch_index(0)));
        assert_eq!(members.ack_set, [0b1011], "member 2 alone is left to ack");
        assert!(!unapplied_part(&mut members, |id| id == batch.with_batch_index(2)));
    }
}
