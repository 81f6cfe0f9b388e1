//! What a consume-side fault test checks about acks: every delivery and
//! every ack's result, against the faults the test makes, and at the end
//! that the subscription holds nothing more.
//!
//! The test calls [`Faults::begin`] right before each fault, and tells the
//! [`AckBook`] of each delivery and of each ack's result as it comes. The
//! fault count read after an event says which faults came before it: an
//! ack whose result is recorded with count `e` returned before fault
//! `e + 1` began (reading the count late only moves an event to a later
//! fault, never an earlier one). A message whose ack returned Ok and that
//! reaches the application again is the loss these tests look for. The one
//! such return the book allows is after a `kill -9` of the broker: a killed
//! broker loses the acks it had not persisted yet (Apache Pulsar persists a
//! cursor at most once a second by default). A cut connection leaves the
//! acks in the broker's memory, so they survive the cut but not a later
//! kill; an unload or move has the old owner persist the cursor as it
//! closes the topic, so acks made before it survive any later fault. Tests
//! that can say more (the consumer drops copies of the acks it remembers,
//! so none reaches the application) assert that on top.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use pulsar_wire::consumer::{InitialPosition, SubscriptionType};
use pulsar_wire::{Client, ConsumerError, MessageId};

/// A fault a test makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The connection is cut or closed: the broker keeps the acks it
    /// applied, in memory.
    Cut,
    /// The topic is unloaded or moved to another broker: its old owner
    /// persists the cursor as it closes the topic.
    Move,
    /// The broker process is killed with SIGKILL: acks it had not
    /// persisted are lost.
    Kill,
}

/// The faults made so far, shared by the test and its consumer tasks.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<Vec<Fault>>>);

impl Faults {
    /// Call right before making a fault.
    pub fn begin(&self, fault: Fault) {
        self.0.lock().expect("faults").push(fault);
    }

    /// How many faults have begun.
    pub fn count(&self) -> usize {
        self.0.lock().expect("faults").len()
    }

    /// Fault number `k` (counted from 1).
    fn kind(&self, k: usize) -> Option<Fault> {
        self.0
            .lock()
            .expect("faults")
            .get(k.checked_sub(1)?)
            .copied()
    }

    /// How many kills there were.
    pub fn kills(&self) -> usize {
        let all = self.0.lock().expect("faults");
        all.iter().filter(|f| **f == Fault::Kill).count()
    }
}

/// A message that reached the application again.
#[derive(Debug, Clone, Copy)]
pub struct Return {
    /// The message's payload number.
    pub number: u64,
    /// Its id.
    pub id: MessageId,
    /// The fault count when it was handed out before.
    pub handed_out_at: usize,
    /// The fault count when its ack returned Ok, if it did since then.
    pub acked_at: Option<usize>,
    /// The fault count when it came again.
    pub back_at: usize,
}

/// An entry (a batch, or one message): its ledger, entry and partition.
type Entry = (u64, u64, i32);

/// What happened to a message, at which fault count.
#[derive(Debug, Clone, Copy)]
enum Mark {
    HandedOut(usize),
    Acked(usize),
}

fn entry_of(id: MessageId) -> Entry {
    (id.ledger_id, id.entry_id, id.partition)
}

/// Every delivery and ack result of the consumers of one subscription.
///
/// While the run goes on, a message that comes again is put down to one
/// of these causes:
/// - its entry holds a message the application nacked: without batch index
///   ack the broker sends the whole entry again;
/// - its ack returned Ok, and then a kill came before any move (the killed
///   broker had not persisted the ack);
/// - a fault was under way: the ack had not returned Ok, or returned it
///   while a fault's effect could still come after it. A fault takes effect
///   some time after the test began it, the consumer notices later still,
///   and the copy the broker sent may sit in another consumer's queue
///   while more faults begin, so the fault counts cannot order a copy
///   against the ack exactly. Tests with one consumer that acks each
///   message before it takes the next assert that no copy comes at all.
///
/// A copy with none of these causes (before any fault, no nack) fails the
/// book. What the subscription still holds after the run, once every
/// consumer is closed, is judged exactly ([`left`](Self::left)): a message
/// whose ack returned Ok must not be there, unless a kill came after that
/// ack before any move, or it is a member of a batch whose other members
/// are there unacked (without batch index ack a member's ack returns Ok
/// once recorded, as in the Java client, and the entry's ACK goes with its
/// last member's: the books must not be used with batch index ack).
#[derive(Debug)]
pub struct AckBook {
    faults: Faults,
    /// Per id: the fault count when it was last handed out.
    handed_out: HashMap<MessageId, usize>,
    /// Per id: the fault count when its last ack returned Ok.
    acked: HashMap<MessageId, usize>,
    /// Per id, in order: the fault counts of its hand-outs and of its acks
    /// that returned Ok.
    marks: HashMap<MessageId, Vec<Mark>>,
    /// Per payload number: the ids it was delivered under.
    ids: HashMap<u64, HashSet<MessageId>>,
    /// Entries holding a nacked message.
    nacked: HashSet<Entry>,
    failed_acks: Vec<(MessageId, String)>,
    deliveries: u64,
    /// Copies that came while faults were under way (see above).
    during_faults: Vec<Return>,
    /// Copies explained by a nacked message in their entry.
    after_nack: u64,
    /// Copies of acked messages, explained by a kill.
    after_kill: Vec<Return>,
    /// Copies with no cause.
    unexplained: Vec<Return>,
    /// Messages acked Ok and left after the run (see [`left`](Self::left)).
    left_acked: Vec<Return>,
    /// Entries left after the run with a member whose ack never returned Ok.
    left_unacked: HashSet<Entry>,
    /// Messages left in the subscription after the run.
    left: u64,
}

impl AckBook {
    /// An empty book judged against `faults`.
    pub fn new(faults: Faults) -> Self {
        Self {
            faults,
            handed_out: HashMap::new(),
            acked: HashMap::new(),
            marks: HashMap::new(),
            ids: HashMap::new(),
            nacked: HashSet::new(),
            failed_acks: Vec::new(),
            deliveries: 0,
            during_faults: Vec::new(),
            after_nack: 0,
            after_kill: Vec::new(),
            unexplained: Vec::new(),
            left_acked: Vec::new(),
            left_unacked: HashSet::new(),
            left: 0,
        }
    }

    /// Message `number` (its payload's) was handed to the application under `id`.
    pub fn delivered(&mut self, number: u64, id: MessageId) {
        let now = self.faults.count();
        self.deliveries += 1;
        self.ids.entry(number).or_default().insert(id);
        self.marks.entry(id).or_default().push(Mark::HandedOut(now));
        let Some(before) = self.handed_out.insert(id, now) else {
            return;
        };
        if self.nacked.contains(&entry_of(id)) {
            self.after_nack += 1;
            return;
        }
        let acked_at = self.acked.get(&id).copied().filter(|a| *a >= before);
        let back = Return {
            number,
            id,
            handed_out_at: before,
            acked_at,
            back_at: now,
        };
        if self.lost_to_a_kill(acked_at, now) {
            self.after_kill.push(back);
        } else if now >= 1 {
            self.during_faults.push(back);
        } else {
            self.unexplained.push(back);
        }
    }

    /// Message `number` was found under `id` in the subscription after the
    /// run, every consumer closed: its ack never took effect. That must not
    /// be so for a message whose ack returned Ok, unless a kill came after
    /// the ack before any move.
    pub fn left(&mut self, number: u64, id: MessageId) {
        let now = self.faults.count();
        self.left += 1;
        let Some(&acked_at) = self.acked.get(&id) else {
            self.left_unacked.insert(entry_of(id));
            return;
        };
        if !self.lost_to_a_kill(Some(acked_at), now) {
            self.left_acked.push(Return {
                number,
                id,
                handed_out_at: self.handed_out.get(&id).copied().unwrap_or(acked_at),
                acked_at: Some(acked_at),
                back_at: now,
            });
        }
    }

    /// Whether an ack that returned Ok at fault count `acked_at` may have
    /// been lost by fault count `now`: the first fault from `acked_at` on
    /// that is not a cut is a kill. Fault `acked_at` counts too: it began
    /// before the ack returned, but a kill takes effect later (the process
    /// dies after the test asked), so the killed broker may have applied
    /// the ack and then lost it.
    fn lost_to_a_kill(&self, acked_at: Option<usize>, now: usize) -> bool {
        let Some(a) = acked_at else {
            return false;
        };
        let first = (a..=now)
            .filter_map(|k| self.faults.kind(k))
            .find(|f| *f != Fault::Cut);
        first == Some(Fault::Kill)
    }

    /// The application's ack of `id` returned `result`.
    pub fn acked(&mut self, id: MessageId, result: Result<(), ConsumerError>) {
        let now = self.faults.count();
        match result {
            Ok(()) => {
                self.acked.insert(id, now);
                self.marks.entry(id).or_default().push(Mark::Acked(now));
            }
            Err(e) => self.failed_acks.push((id, e.to_string())),
        }
    }

    /// The application nacked `id`: its whole entry may come again.
    pub fn nacked(&mut self, id: MessageId) {
        self.nacked.insert(entry_of(id));
    }

    /// Deliveries, duplicates included.
    pub fn deliveries(&self) -> u64 {
        self.deliveries
    }

    /// The payload numbers delivered at least once.
    pub fn numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.ids.keys().copied()
    }

    /// How many payload numbers were delivered at least once.
    pub fn distinct(&self) -> usize {
        self.ids.len()
    }

    /// Deliveries of a message id delivered before (the consumer's duplicates).
    pub fn redeliveries(&self) -> u64 {
        self.deliveries - self.handed_out.len() as u64
    }

    /// Payloads stored under more than one id (the producer's resends
    /// stored twice), counting each extra id.
    pub fn stored_twice(&self) -> u64 {
        self.ids.values().map(|ids| ids.len() as u64 - 1).sum()
    }

    /// Acks that returned an error, with the error.
    pub fn failed_acks(&self) -> &[(MessageId, String)] {
        &self.failed_acks
    }

    /// Messages acked Ok before a kill and delivered again after it.
    pub fn returned_after_kill(&self) -> &[Return] {
        &self.after_kill
    }

    /// Copies that came while faults were under way, not put down to a
    /// kill or a nack.
    pub fn during_faults(&self) -> &[Return] {
        &self.during_faults
    }

    /// The copies that came while faults were under way, but for the
    /// members of a batch acked in part when their fault began: a member
    /// of an entry with another member not acked Ok since it was last
    /// handed out before that fault (or never handed out before it).
    /// Without batch index ack, a consumer the broker closes (an unload, a
    /// move) forgets the acks of such members, the broker having heard of
    /// none, and hands them out again as the Java client does: the broker
    /// closes a consumer for an operator's reset in the same way, and the
    /// reset's copy must come whole. Any other copy is one the consumer
    /// should have dropped. A member acked after its fault began but before
    /// the close took effect counts as not acked, so this errs on the
    /// side of forgiving.
    pub fn copies_beyond_batches_acked_in_part(&self) -> Vec<Return> {
        let mut members: HashMap<Entry, Vec<MessageId>> = HashMap::new();
        for id in self.handed_out.keys().filter(|id| id.batch_index >= 0) {
            members.entry(entry_of(*id)).or_default().push(*id);
        }
        let acked_before = |id: &MessageId, fault: usize| {
            let mut acked = false;
            for mark in self.marks.get(id).into_iter().flatten() {
                match *mark {
                    Mark::HandedOut(at) if at < fault => acked = false,
                    Mark::Acked(at) if at < fault => acked = true,
                    _ => break,
                }
            }
            acked
        };
        self.during_faults
            .iter()
            .filter(|r| {
                let siblings = members.get(&entry_of(r.id)).into_iter().flatten();
                let in_part = r.id.batch_index >= 0
                    && siblings
                        .filter(|s| **s != r.id)
                        .any(|s| !acked_before(s, r.back_at));
                !in_part
            })
            .copied()
            .collect()
    }

    /// Messages found in the subscription after the run.
    pub fn left_count(&self) -> u64 {
        self.left
    }

    /// Copies explained by a nacked message in their entry.
    pub fn after_nack(&self) -> u64 {
        self.after_nack
    }

    /// Fails unless every message that came again has a cause, and no
    /// message whose ack returned Ok was left in the subscription without a
    /// kill to explain it (see [`AckBook`]).
    pub fn assert_acks_held(&self, what: &str) {
        let unexplained: Vec<&Return> = self
            .unexplained
            .iter()
            .chain(self.left_acked.iter().filter(|r| {
                !(r.id.batch_index >= 0 && self.left_unacked.contains(&entry_of(r.id)))
            }))
            .collect();
        assert!(
            unexplained.is_empty(),
            "{what}: {} messages came again with no fault or nack to explain it, or were left \
             in the subscription though acked Ok (fault counts: handed out, acked Ok, back or \
             found; first 10: {:?})",
            unexplained.len(),
            &unexplained[..unexplained.len().min(10)]
        );
    }
}

/// Sends `marker` to `topic` from a producer of its own, then reads
/// `subscription` with a new consumer (of type `kind`) up to the marker, acking
/// everything; returns what came before it (payload and id): what the
/// subscription still held. Call it once every consumer of `subscription`
/// is closed.
pub async fn left_before(
    client: &Client,
    topic: &str,
    subscription: &str,
    kind: SubscriptionType,
    marker: &str,
) -> Vec<(Bytes, MessageId)> {
    let producer = client
        .producer(topic)
        .create()
        .await
        .expect("marker producer");
    let sent = producer.send(marker.to_owned()).await.expect("queued");
    sent.await.expect("marker stored");
    producer.close().await.expect("close the marker producer");
    let mut consumer = client
        .consumer(topic, subscription)
        .subscription_type(kind)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe to check what is left");
    let mut left = Vec::new();
    super::guard("read the subscription up to the marker", async {
        loop {
            let m = consumer.receive().await.expect("receive");
            consumer.ack(&m).await.expect("ack");
            if m.payload().as_ref() == marker.as_bytes() {
                break;
            }
            left.push((m.payload().clone(), m.id()));
        }
    })
    .await;
    consumer.close().await.expect("close the check's consumer");
    left
}

/// [`left_before`], failing unless the marker comes first: the
/// subscription held nothing else, so every message sent before the marker
/// was acked and the broker kept the ack.
pub async fn assert_nothing_left_before(
    client: &Client,
    topic: &str,
    subscription: &str,
    marker: &str,
) {
    let left = left_before(
        client,
        topic,
        subscription,
        SubscriptionType::Shared,
        marker,
    )
    .await;
    let shown: Vec<_> = left
        .iter()
        .take(20)
        .map(|(payload, id)| format!("{id} {}", String::from_utf8_lossy(payload)))
        .collect();
    assert!(
        left.is_empty(),
        "{} messages still in subscription {subscription} of {topic}: their acks never \
         took effect (first 20: {shown:?})",
        left.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(index: i32) -> MessageId {
        MessageId::new(1, 2).with_batch_index(index)
    }

    #[test]
    fn an_acked_member_left_beside_unacked_members_of_its_entry_is_excused() {
        let mut book = AckBook::new(Faults::default());
        book.acked(member(0), Ok(()));
        book.left(1, member(0));
        book.left(2, member(1));
        book.assert_acks_held("a batch left part acked");
    }

    #[test]
    #[should_panic(expected = "left in the subscription though acked Ok")]
    fn an_acked_message_left_alone_is_not() {
        let mut book = AckBook::new(Faults::default());
        book.acked(member(0), Ok(()));
        book.left(1, member(0));
        book.assert_acks_held("a batch left acked");
    }
}
