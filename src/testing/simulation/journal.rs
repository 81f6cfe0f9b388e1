//! What the application of a simulation saw and did, in the order it
//! happened: sends confirmed, messages handed out, acks and their answers,
//! faults. Some rules are checked as each record comes (a fragment handed
//! out, an acked message back, order); the rest at the end (`oracle.rs`).

use std::collections::{HashMap, HashSet};

use crate::consumer::Message;
use crate::message_id::MessageId;
use crate::testing::{EventKind, TestBroker};

use super::plan::FaultKind;
use super::roles::SUBSCRIPTION;

/// The shortest payload: room for any name and length.
const MIN_PAYLOAD: usize = 40;

/// A payload of the simulation: `NAME|LEN|` padded to `LEN` bytes, so a
/// fragment of one (a chunk, a cut batch) is told from the whole.
pub(crate) fn payload(name: &str, len: usize) -> Vec<u8> {
    let len = len.max(MIN_PAYLOAD);
    let head = format!("{name}|{len}|");
    let mut bytes = head.into_bytes();
    bytes.resize(len.max(bytes.len()), b'.');
    bytes
}

/// The name a whole payload carries; `None` for a fragment or a stranger.
pub(crate) fn name_of(bytes: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(bytes.get(..bytes.len().min(64))?).ok()?;
    let mut parts = text.splitn(3, '|');
    let name = parts.next()?;
    let len: usize = parts.next()?.parse().ok()?;
    (len == bytes.len()).then_some(name)
}

/// How many events `broker` has recorded so far (0 without one).
fn broker_events(broker: Option<&TestBroker>) -> usize {
    broker.map_or(0, |b| b.with_model(|m| m.events().len()))
}

/// A line of what the application did.
#[derive(Debug, Clone)]
pub(crate) struct Noted {
    /// Virtual time since the run began.
    pub(crate) at: std::time::Duration,
    /// How many events the broker had recorded by then.
    pub(crate) after: usize,
    pub(crate) line: String,
}

/// An ack that returned `Ok`.
#[derive(Debug, Clone)]
struct AckedOk {
    at: u64,
    /// The partition topic of the acked message.
    topic: String,
    instance: usize,
    /// The rewind epoch when the ack was made.
    epoch: u64,
    /// Whether a seek was running when the ack was made (it may undo the
    /// ack, until it returns).
    amid_seek: bool,
    /// Where the acked message is stored (a producer that sent it again
    /// after a failure stores another, with an id of its own).
    id: MessageId,
    /// Handed out again since (by a rewind): not acked as it stands.
    handed_since: bool,
    /// Acked by a cumulative ack that the consumer may have held back
    /// short of a chunked message at or before it not handed out yet (the
    /// chunk gate): its `Ok` promised the short ACK only, and a consumer
    /// closed before the message is handed out leaves this one to come
    /// again (docs/consumer-acks.md, "Cumulative acks").
    held_back: bool,
}

/// When an ack of the application began.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AckBegan {
    /// The consumer instance acking.
    pub(crate) consumer: usize,
    /// The rewind epoch then.
    pub(crate) epoch: u64,
    /// How many events the broker had recorded then.
    pub(crate) events: usize,
}

/// A message a cursor reset brought back, not yet handed out again.
#[derive(Debug, Clone)]
pub(crate) struct OwedCopy {
    /// The record of the reset.
    pub(crate) reset_at: u64,
    /// How many events the broker had recorded at the reset.
    pub(crate) reset_events: usize,
    /// (partition topic, where it is stored).
    pub(crate) topic: String,
    pub(crate) id: MessageId,
    /// The consumer that acked it.
    instance: usize,
    /// For a batch member, the most members of its entry that consumer
    /// acked together by acks begun before the reset.
    pub(crate) members_acked: usize,
}

/// A batch member acked `Ok` and handed out again, without batch index
/// acks: a broken rule only if the consumer that acked it had acked its
/// whole entry by then (else the broker never heard of the ack, as
/// documented), which the end of the run tells from the entry's size.
#[derive(Debug, Clone)]
pub(crate) struct MemberCopy {
    pub(crate) text: String,
    /// (partition topic, ledger, entry).
    pub(crate) entry: (String, u64, u64),
    /// The most members of the entry the acking consumer had acked
    /// within one subscription by then.
    pub(crate) acked_before: usize,
}

/// The members of one entry a consumer acked `Ok`, per copy of the entry
/// it was handed. Without batch index ack the consumer keeps its members'
/// acks until its subscription ends, and acks the entry once they are all
/// acked; the acks of one copy, with no fault ending subscriptions between
/// them, are surely kept together (a copy is handed out within one
/// subscription).
#[derive(Debug, Clone, Default)]
struct MembersAcked {
    copies: HashMap<u64, CopyAcks>,
    /// The most members of one copy surely kept together.
    most: usize,
}

/// The acks of the members of one copy of an entry.
#[derive(Debug, Clone, Default)]
struct CopyAcks {
    members: HashSet<i32>,
    /// The record of the first ack begun.
    first_at: u64,
    /// A fault ending subscriptions came between the acks: the consumer
    /// may have forgotten some before the others (not counted).
    mixed: bool,
}

/// A message the reader read.
#[derive(Debug, Clone)]
pub(crate) struct ReadMessage {
    pub(crate) topic: String,
    pub(crate) id: MessageId,
    /// Where it is delivered: its id, or a chunked message's last chunk.
    pub(crate) position: MessageId,
    pub(crate) name: String,
}

/// The journal of one seed.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    /// Records so far: orders everything else.
    clock: u64,
    /// Rewinds (seeks, cursor resets) begun so far.
    pub(crate) epoch: u64,
    /// Seeks begun and not returned yet.
    seeking: u32,
    /// Per epoch after the first, how many events the broker had recorded
    /// when it began.
    rewind_marks: Vec<usize>,
    /// Epochs begun by a seek that failed without moving the cursor: no
    /// rewind at all.
    void_epochs: HashSet<u64>,
    /// Epochs begun by a seek that failed on some partitions only: a
    /// rewind of the partitions it moved alone.
    partial_epochs: HashMap<u64, HashSet<String>>,
    /// Faults fired, with when.
    pub(crate) faults: Vec<(u64, FaultKind)>,
    /// Confirmed sends: name → the id the broker gave.
    pub(crate) confirmed: HashMap<String, MessageId>,
    /// Names the application consumed (acked `Ok`, or a handler's `Ack`).
    pub(crate) consumed: HashSet<String>,
    /// Names the application called `ack` (or `ack_cumulative`) for,
    /// whatever the answer.
    pub(crate) attempted: HashSet<String>,
    /// Per name, the rewind epoch of the application's last hand-out of
    /// it.
    pub(crate) handed_epoch: HashMap<String, u64>,
    /// Per name, when each individual ack of it by the application began
    /// (whatever the answer).
    pub(crate) ack_began: HashMap<String, Vec<AckBegan>>,
    /// The application's cumulative acks, whatever the answer: (partition
    /// topic, up to, when it began).
    pub(crate) cumulative_acks: Vec<(String, MessageId, AckBegan)>,
    /// How many events the broker had recorded at each cut of every
    /// connection (answers on the wire then may be lost).
    pub(crate) cut_marks: Vec<usize>,
    /// How many events the broker had recorded at each fault that ends
    /// consumers' subscriptions (a cut, an unload, closes, a rejoin, a
    /// rewind): an ACK not applied by then is lost with its consumer.
    pub(crate) loss_marks: Vec<usize>,
    acked_ok: HashMap<String, AckedOk>,
    /// With receipts: messages acked `Ok` (so applied by the broker)
    /// before a cursor reset and not handed out since. The reset brings
    /// them back, so each is owed a hand-out (name → the reset's record).
    pub(crate) owed_after_reset: HashMap<String, OwedCopy>,
    /// Per instance and entry: the batch indexes acked `Ok`.
    members_acked: HashMap<(usize, String, u64, u64), MembersAcked>,
    /// The records of the faults that end subscriptions: without batch
    /// index ack a consumer forgets its members' acks at each.
    session_marks: Vec<u64>,
    /// Per instance and entry: the copy of the entry handed out last (a
    /// member handed out at or below the last one's index starts a copy)
    /// and the last member's index.
    copies_handed: HashMap<(usize, String, u64, u64), (u64, i32)>,
    /// Per instance and name: the copy it was handed out from last.
    copy_of: HashMap<(usize, String), u64>,
    /// Batch members handed out again after an ack, judged at the end.
    pub(crate) member_copies: Vec<MemberCopy>,
    /// Whether members are acked one by one on the broker.
    pub(crate) batch_index_ack: bool,
    /// Whether the broker counts redeliveries (Shared, Key_Shared): then
    /// each copy of an entry carries a count of its own.
    pub(crate) counted: bool,
    /// Per instance and epoch: names seen, and the last id first seen per
    /// order key.
    seen: HashMap<(usize, u64), HashSet<String>>,
    last: HashMap<(usize, u64, String), MessageId>,
    /// The order slots (after a rewind) that stepped back once already.
    stepped_back: HashSet<(usize, u64, String)>,
    /// Names nacked or left for the ack timeout: their copies may come out
    /// of order.
    pub(crate) asked_again: HashMap<String, u32>,
    /// Every entry a member of which the application was handed:
    /// (partition topic, ledger, entry).
    pub(crate) handed_entries: HashSet<(String, u64, u64)>,
    /// The first chunks of the chunked messages handed out, by consumer
    /// instance and rewind epoch.
    handed_chunks: HashSet<(usize, u64, String, (u64, u64))>,
    /// Per instance: the messages handed out and not yet acked, for a
    /// cumulative ack (partition topic → ids with names).
    pub(crate) open: HashMap<(usize, String), Vec<(MessageId, String)>>,
    /// What the reader read: (partition topic, id, name).
    pub(crate) read: Vec<ReadMessage>,
    /// Hand-outs in all.
    pub(crate) handed: u64,
    /// The id of every message stored, once the run ended.
    pub(crate) stored: Vec<MessageId>,
    pub(crate) violations: Vec<String>,
    /// Whether an ack `Ok` without receipts may be undone by a fault (then
    /// a copy after a fault, to another consumer, is allowed).
    pub(crate) receipts: bool,
    /// The order keys are partitions (Exclusive, Failover) or keys
    /// (Key_Shared); `None`: no order promised (Shared).
    pub(crate) order: Option<OrderBy>,
    /// When traced: what the application did, with the virtual time.
    log: Option<(tokio::time::Instant, Vec<Noted>)>,
    /// The broker, to count the copies of an entry it sent out.
    broker: Option<TestBroker>,
}

/// What order the subscription type promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OrderBy {
    Partition,
    Key,
}

fn key_of(id: &MessageId) -> (u64, u64, i32) {
    (id.ledger_id, id.entry_id, id.batch_index)
}

impl Journal {
    /// An empty journal: `receipts` and `batch_index_ack` as the
    /// consumers' settings, `order` as their subscription type promises.
    pub(crate) fn new(receipts: bool, batch_index_ack: bool, order: Option<OrderBy>) -> Self {
        Self {
            receipts,
            batch_index_ack,
            order,
            ..Self::default()
        }
    }

    /// Counts the copies the broker sends from now on.
    pub(crate) fn watch(&mut self, broker: TestBroker) {
        self.broker = Some(broker);
    }

    /// Whether the broker sent out a copy of the entry of `id` on `topic`
    /// after it learnt of the ack of `id` and while it kept it (a cursor
    /// moved since forgets the ack and the copies sent before the move;
    /// `None`: it has not learnt of it), and
    /// before the application received the message (when the broker had
    /// recorded `received` events). With `count`, only copies carrying that
    /// redelivery count (on Shared and Key_Shared each copy carries its
    /// own) are the one in question.
    fn sent_after_ack(
        &self,
        topic: &str,
        id: &MessageId,
        count: Option<u32>,
        received: usize,
    ) -> Option<bool> {
        let broker = self.broker.as_ref()?;
        let same = |e: &MessageId| (e.ledger_id, e.entry_id) == (id.ledger_id, id.entry_id);
        broker.with_model(|m| {
            let mut knew = None;
            let mut forgot = false;
            let events = m.events().iter().enumerate();
            for (index, e) in events.filter(|(_, e)| e.topic == topic) {
                match &e.kind {
                    EventKind::Delivered {
                        subscription,
                        id: entry,
                        redelivery_count,
                    } if subscription == SUBSCRIPTION
                        && same(entry)
                        && knew.is_some()
                        && index < received
                        && count.is_none_or(|c| c == *redelivery_count) =>
                    {
                        knew = Some(true);
                    }
                    EventKind::Acked {
                        subscription,
                        id: entry,
                    } if subscription == SUBSCRIPTION && same(entry) => {
                        knew = knew.or(Some(false));
                    }
                    // The move forgets the ack: what comes after it is
                    // the move's to send.
                    EventKind::CursorMoved { subscription, .. }
                        if subscription == SUBSCRIPTION && knew.is_some() =>
                    {
                        knew = None;
                        forgot = true;
                    }
                    EventKind::MembersAcked {
                        subscription,
                        id: entry,
                        members,
                    } if subscription == SUBSCRIPTION
                        && same(entry)
                        && members.contains(&id.batch_index) =>
                    {
                        knew = knew.or(Some(false));
                    }
                    _ => {}
                }
            }
            knew.or(forgot.then_some(false))
        })
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Keeps a line of what the application did, when traced.
    pub(crate) fn note(&mut self, what: impl FnOnce() -> String) {
        let Some((started, log)) = &mut self.log else {
            return;
        };
        let after = broker_events(self.broker.as_ref());
        log.push(Noted {
            at: started.elapsed(),
            after,
            line: format!("#{} {}", self.clock, what()),
        });
    }

    /// Keeps a log of what the application does from now on.
    pub(crate) fn keep_log(&mut self) {
        self.log = Some((tokio::time::Instant::now(), Vec::new()));
    }

    /// The log kept (empty unless [`keep_log`](Self::keep_log) was called).
    pub(crate) fn take_log(&mut self) -> Vec<Noted> {
        self.log.take().map(|(_, log)| log).unwrap_or_default()
    }

    pub(crate) fn fault(&mut self, kind: FaultKind) {
        let at = self.tick();
        self.note(|| format!("fault {kind:?}"));
        if kind.rewinds() {
            self.next_epoch();
        }
        if kind == FaultKind::Seek {
            self.seeking += 1;
        }
        if kind == FaultKind::ResetCursor && self.receipts {
            self.owe_acked(at);
        }
        let mark = self.broker_events();
        if kind == FaultKind::Cut {
            self.cut_marks.push(mark);
        }
        if kind.ends_subscriptions() {
            self.loss_marks.push(mark);
            self.session_marks.push(at);
        }
        self.faults.push((at, kind));
    }

    /// Records fault `kind` that found nothing to act on (a seek or a
    /// rejoin while no consumer is live): it rewinds and ends nothing.
    pub(crate) fn fault_idle(&mut self, kind: FaultKind) {
        let at = self.tick();
        self.note(|| format!("fault {kind:?}: no live consumer"));
        self.faults.push((at, kind));
    }

    /// Records, at the cursor reset of record `at`, every message acked
    /// `Ok` as owed a hand-out.
    fn owe_acked(&mut self, at: u64) {
        let reset_events = self.broker_events();
        for (name, ack) in &self.acked_ok {
            if ack.handed_since || ack.amid_seek {
                continue;
            }
            let topic = ack.topic.clone();
            let members_acked = self
                .members_acked
                .get(&(
                    ack.instance,
                    topic.clone(),
                    ack.id.ledger_id,
                    ack.id.entry_id,
                ))
                .map_or(0, |acked| acked.most);
            self.owed_after_reset.insert(
                name.clone(),
                OwedCopy {
                    reset_at: at,
                    reset_events,
                    topic,
                    id: ack.id,
                    instance: ack.instance,
                    members_acked,
                },
            );
        }
    }

    pub(crate) fn violation(&mut self, text: String) {
        self.violations.push(text);
    }

    /// A message handed to the application by consumer `instance`;
    /// returns its name (`None`: not a whole message of this simulation,
    /// already reported).
    pub(crate) fn handed_out(&mut self, instance: usize, msg: &Message) -> Option<String> {
        // Received now: every event the broker recorded so far came before.
        self.handed_out_received(instance, msg, usize::MAX)
    }

    /// How many events the broker has recorded so far.
    pub(crate) fn broker_events(&self) -> usize {
        broker_events(self.broker.as_ref())
    }

    /// As [`handed_out`](Self::handed_out), for a message the application
    /// received when the broker had recorded `received` events (a batch
    /// receive hands its messages over one by one later): a copy the
    /// broker sent after that is not the one handed out.
    pub(crate) fn handed_out_received(
        &mut self,
        instance: usize,
        msg: &Message,
        received: usize,
    ) -> Option<String> {
        let at = self.tick();
        self.handed += 1;
        let id = msg.id();
        let Some(name) = name_of(msg.payload()).map(str::to_owned) else {
            self.violation(format!(
                "consumer {instance} was handed a fragment or a stranger at {id}: {} bytes starting {:?}",
                msg.payload().len(),
                String::from_utf8_lossy(&msg.payload()[..msg.payload().len().min(24)])
            ));
            return None;
        };
        let topic = msg.topic().to_owned();
        self.note(|| format!("consumer {instance} handed {name} {id}"));
        if !self.owed_after_reset.is_empty() {
            self.owed_after_reset.remove(&name);
        }
        self.handed_entries
            .insert((topic.clone(), id.ledger_id, id.entry_id));
        if id.is_batch_member() {
            let handed = self
                .copies_handed
                .entry((instance, topic.clone(), id.ledger_id, id.entry_id))
                .or_insert((0, -1));
            if id.batch_index <= handed.1 {
                handed.0 += 1;
            }
            handed.1 = id.batch_index;
            self.copy_of.insert((instance, name.clone()), handed.0);
        }
        if let Some(first) = id.first_chunk() {
            self.handed_chunks.insert((
                instance,
                self.epoch,
                topic.clone(),
                (first.ledger_id, first.entry_id),
            ));
        }
        self.handed_epoch.insert(name.clone(), self.epoch);
        let acked = self.acked_ok.get(&name).cloned();
        if let Some(ack) = self.acked_ok.get_mut(&name) {
            ack.handed_since = true;
        }
        if let Some(ack) = acked.filter(|a| key_of(&a.id) == key_of(&id)) {
            // A copy the broker sent before it learnt of the ack is one
            // the ack could not stop; without receipts the ack may still
            // be on its way (grouped, or lost in a cut).
            let count = self.counted.then(|| msg.redelivery_count());
            let knew = self.sent_after_ack(&topic, &id, count, received);
            let excused = ack.epoch < self.epoch
                || ack.amid_seek
                || ack.held_back
                || match knew {
                    Some(sent_after) => !sent_after,
                    None => !self.receipts,
                };
            if !excused {
                let text = format!(
                    "{name} ({id}) was acked Ok by consumer {} (record {}) and handed to consumer {instance} again (record {at}){}",
                    ack.instance,
                    ack.at,
                    if self.receipts {
                        ", with ack receipts on"
                    } else {
                        ""
                    }
                );
                // A member acked alone the broker only hears of with
                // its whole entry.
                if id.is_batch_member() && !self.batch_index_ack && knew.is_none() {
                    let entry = (topic.clone(), id.ledger_id, id.entry_id);
                    let acked_before = self
                        .members_acked
                        .get(&(ack.instance, entry.0.clone(), entry.1, entry.2))
                        .map_or(0, |acked| acked.most);
                    self.member_copies.push(MemberCopy {
                        text,
                        entry,
                        acked_before,
                    });
                } else {
                    self.violation(text);
                }
            }
        }
        let epoch = self.epoch;
        let seen = self.seen.entry((instance, epoch)).or_default();
        let first = seen.insert(name.clone());
        if first && !self.asked_again.contains_key(&name) {
            if let Some(by) = self.order {
                let order_key = match by {
                    OrderBy::Partition => topic.clone(),
                    OrderBy::Key => format!("{topic}/{}", msg.key().unwrap_or("")),
                };
                let slot = (instance, epoch, order_key);
                // A chunked message is delivered where its last chunk is.
                let position = msg.position();
                if let Some(before) = self.last.get(&slot) {
                    // After a rewind the messages received before it may
                    // still come first: one step back is the rewind.
                    let back = key_of(&position) <= key_of(before);
                    if back && !(epoch > 0 && self.stepped_back.insert(slot.clone())) {
                        self.violation(format!(
                            "consumer {instance} was handed {name} ({id}) after {before}: out of order on {}",
                            slot.2
                        ));
                    }
                }
                self.last.insert(slot, position);
            }
        }
        self.open
            .entry((instance, topic))
            .or_default()
            .push((id, name.clone()));
        Some(name)
    }

    /// The record an ack starts at, and the epoch then (pass both to
    /// [`acked`](Self::acked)).
    fn ack_begins(&mut self) -> (u64, u64) {
        (self.tick(), self.epoch)
    }

    /// An ack of the application, by consumer `consumer`, begins now.
    fn ack_began(&self, consumer: usize) -> AckBegan {
        AckBegan {
            consumer,
            epoch: self.epoch,
            events: self.broker_events(),
        }
    }

    /// The application begins an individual ack of `name` on consumer
    /// `instance`.
    pub(crate) fn ack_attempted(&mut self, instance: usize, name: &str) -> (u64, u64) {
        self.attempted.insert(name.to_owned());
        let began = self.ack_began(instance);
        self.ack_began
            .entry(name.to_owned())
            .or_default()
            .push(began);
        self.ack_begins()
    }

    /// The handler of consumer `instance` returned `Ack` for `name`.
    pub(crate) fn handler_acked(&mut self, instance: usize, name: String) {
        self.note(|| format!("the handler acked {name}"));
        let began = self.ack_began(instance);
        self.ack_began.entry(name.clone()).or_default().push(began);
        self.consumed.insert(name);
    }

    /// The application begins a cumulative ack up to `id` of `topic` on
    /// consumer `instance`.
    pub(crate) fn cumulative_attempted(
        &mut self,
        instance: usize,
        topic: &str,
        id: MessageId,
    ) -> (u64, u64) {
        let began = self.ack_began(instance);
        self.cumulative_acks.push((topic.to_owned(), id, began));
        self.ack_begins()
    }

    /// How many events the broker had recorded when each rewind epoch
    /// after the first began.
    pub(crate) fn rewind_marks(&self) -> &[usize] {
        &self.rewind_marks
    }

    /// An ack of `name`, handed out at `id` of `topic`, by consumer
    /// `instance` returned `Ok`.
    pub(crate) fn acked(
        &mut self,
        instance: usize,
        name: &str,
        (topic, id): (&str, MessageId),
        begun: (u64, u64),
    ) {
        let (at, epoch) = begun;
        self.note(|| format!("consumer {instance} acked {name} Ok (begun #{at})"));
        // An ack begun before a cursor reset and answered after it was
        // applied after it (its consumer's subscription ended first): it
        // acks the reset's copy, by the application's word before the
        // reset, as the Java client sends its pending acks on a reconnect.
        if self
            .owed_after_reset
            .get(name)
            .is_some_and(|owed| owed.reset_at > at)
        {
            self.owed_after_reset.remove(name);
        }
        self.attempted.insert(name.to_owned());
        self.consumed.insert(name.to_owned());
        if let Some(&copy) = self.copy_of.get(&(instance, name.to_owned())) {
            let now = self.clock;
            let faults_between =
                |from: u64| self.session_marks.iter().any(|&m| m > from && m <= now);
            let acked = self
                .members_acked
                .entry((instance, topic.to_owned(), id.ledger_id, id.entry_id))
                .or_default();
            let acks = acked.copies.entry(copy).or_insert_with(|| CopyAcks {
                first_at: at,
                ..CopyAcks::default()
            });
            acks.mixed |= faults_between(acks.first_at.min(at));
            acks.members.insert(id.batch_index);
            if !acks.mixed {
                acked.most = acked.most.max(acks.members.len());
            }
            // An ack begun before a reset and answered after it may have
            // completed the batch before the consumer learnt of the reset
            // (its entry ACK then goes out again after it): the reset's
            // members of that batch may be acked by it.
            let most = acked.most.max(acks.members.len());
            for owed in self.owed_after_reset.values_mut() {
                if owed.reset_at > at
                    && owed.instance == instance
                    && owed.topic == topic
                    && (owed.id.ledger_id, owed.id.entry_id) == (id.ledger_id, id.entry_id)
                {
                    owed.members_acked = owed.members_acked.max(most);
                }
            }
        }
        self.acked_ok.insert(
            name.to_owned(),
            AckedOk {
                at,
                topic: topic.to_owned(),
                instance,
                epoch,
                amid_seek: self.seeking > 0,
                id,
                handed_since: false,
                held_back: false,
            },
        );
    }

    /// A cumulative ack up to `id` on `topic` returned `Ok`: every message
    /// the instance was handed there up to it is acked.
    pub(crate) fn acked_cumulative(
        &mut self,
        instance: usize,
        topic: &str,
        id: MessageId,
        begun: (u64, u64),
    ) {
        let open = self
            .open
            .remove(&(instance, topic.to_owned()))
            .unwrap_or_default();
        let (upto, rest): (Vec<_>, Vec<_>) = open
            .into_iter()
            .partition(|(i, _)| key_of(i) <= key_of(&id));
        // The first chunk of the earliest chunked message at or before
        // the ack not handed to this consumer since the last rewind, or
        // handed to it and not acked (delivered past the ack): the chunk
        // gate may hold the ack back short of it.
        let held = rest
            .iter()
            .filter_map(|(i, _)| i.first_chunk())
            .map(|first| (first.ledger_id, first.entry_id))
            .filter(|first| *first <= (id.ledger_id, id.entry_id));
        let in_the_way = self
            .chunk_in_the_way(instance, topic, &id)
            .into_iter()
            .chain(held)
            .min();
        for (at, name) in upto {
            self.acked(instance, &name, (topic, at), begun);
            if in_the_way.is_some_and(|first| (at.ledger_id, at.entry_id) >= first) {
                if let Some(ack) = self.acked_ok.get_mut(&name) {
                    ack.held_back = true;
                }
            }
        }
        if !rest.is_empty() {
            self.open.insert((instance, topic.to_owned()), rest);
        }
        // A cumulative ack the application began after a cursor reset
        // acks, by its own word, every message before it, also one the
        // reset brought back that it has not been handed again (as in the
        // Java client, and on the broker: a property of cumulative acks).
        if !self.owed_after_reset.is_empty() {
            self.owed_after_reset.retain(|_, owed| {
                owed.topic != topic || owed.reset_at >= begun.0 || key_of(&owed.id) > key_of(&id)
            });
        }
    }

    /// The first chunk, at or before `upto` on `topic`, of the earliest
    /// chunked message the broker stored that consumer `instance` was not
    /// handed since the last rewind.
    fn chunk_in_the_way(
        &self,
        instance: usize,
        topic: &str,
        upto: &MessageId,
    ) -> Option<(u64, u64)> {
        let broker = self.broker.as_ref()?;
        let handed = |first: (u64, u64)| {
            self.handed_chunks
                .contains(&(instance, self.epoch, topic.to_owned(), first))
        };
        broker.with_model(|m| {
            m.topic(topic)?
                .entries
                .iter()
                .filter(|e| {
                    e.metadata.chunk_id == Some(0) && e.metadata.num_chunks_from_msg > Some(1)
                })
                .map(|e| (e.id.ledger_id, e.id.entry_id))
                .filter(|first| *first <= (upto.ledger_id, upto.entry_id) && !handed(*first))
                .min()
        })
    }

    /// The application nacked `name` or left it for the ack timeout.
    pub(crate) fn asked_again(&mut self, name: &str) {
        self.note(|| format!("asked again for {name}"));
        *self.asked_again.entry(name.to_owned()).or_default() += 1;
    }

    /// How often the application asked for `name` again.
    pub(crate) fn times_asked_again(&self, name: &str) -> u32 {
        self.asked_again.get(name).copied().unwrap_or(0)
    }

    /// The reader read `msg`.
    pub(crate) fn read(&mut self, msg: &Message) {
        self.tick();
        let id = msg.id();
        match name_of(msg.payload()) {
            Some(name) => self.read.push(ReadMessage {
                topic: msg.topic().to_owned(),
                id,
                position: msg.position(),
                name: name.to_owned(),
            }),
            None => self.violation(format!(
                "the reader was handed a fragment or a stranger at {id} ({} bytes)",
                msg.payload().len()
            )),
        }
    }

    /// Names acked `Ok` and not rewound since that were also
    /// dead-lettered (the same copy, where the letter names its original),
    /// other than before the rewind that handed them out anew. `dead_at`
    /// says, per dead-lettered name, the original's id and how many events
    /// the broker had recorded when it stored the letter.
    pub(crate) fn acked_and_dead_lettered(
        &self,
        dead_at: &HashMap<String, Vec<(Option<String>, usize)>>,
    ) -> Vec<&str> {
        let mut both: Vec<&str> = self
            .acked_ok
            .iter()
            .filter(|(_, a)| a.epoch == self.epoch)
            .filter(|(name, a)| {
                let before_the_rewind = |at: usize| {
                    a.epoch
                        .checked_sub(1)
                        .and_then(|e| self.rewind_marks.get(e as usize))
                        .is_some_and(|&mark| at < mark)
                };
                let acked = a.id.to_string();
                dead_at.get(name.as_str()).is_some_and(|letters| {
                    letters.iter().any(|(origin, at)| {
                        origin.as_ref().is_none_or(|o| *o == acked)
                            && !before_the_rewind(*at)
                            && !self.forwarded_before_a_move(&a.id, *at)
                    })
                })
            })
            .map(|(name, _)| name.as_str())
            .collect();
        both.sort_unstable();
        both
    }

    /// Whether the dead letter of `id` stored at broker event `at` was
    /// made of a copy sent before the cursor last moved (a forward under
    /// way when a seek or reset came): every copy redelivered before the
    /// letter came before the move.
    fn forwarded_before_a_move(&self, id: &MessageId, at: usize) -> bool {
        let Some(broker) = &self.broker else {
            return false;
        };
        broker.with_model(|m| {
            let (mut moved, mut redelivered) = (None, None);
            for (index, e) in m.events().iter().enumerate().take(at) {
                match &e.kind {
                    EventKind::CursorMoved { subscription, .. } if subscription == SUBSCRIPTION => {
                        moved = Some(index);
                    }
                    EventKind::Delivered {
                        subscription,
                        id: entry,
                        redelivery_count,
                    } if subscription == SUBSCRIPTION
                        && *redelivery_count > 0
                        && (entry.ledger_id, entry.entry_id) == (id.ledger_id, id.entry_id) =>
                    {
                        redelivered = Some(index);
                    }
                    _ => {}
                }
            }
            matches!((redelivered, moved), (Some(copy), Some(move_at)) if copy < move_at)
        })
    }

    /// A rewind the application asked for (a seek, which began epoch
    /// `began`) returned: acks made while it went on may be undone by it
    /// too. A seek that failed (a SEEK the broker refused, say) and left
    /// the cursor where it was is no rewind: its epoch is void.
    pub(crate) fn rewound(&mut self, began: u64, failed: Option<crate::ConsumerError>) {
        self.seeking = self.seeking.saturating_sub(1);
        let Some(error) = failed else {
            self.note(|| "the seek returned".to_owned());
            self.next_epoch();
            return;
        };
        let since = began
            .checked_sub(1)
            .and_then(|e| self.rewind_marks.get(e as usize))
            .copied()
            .unwrap_or(0);
        let moved: HashSet<String> = self
            .broker
            .as_ref()
            .map(|broker| {
                broker.with_model(|m| {
                    m.events()
                        .iter()
                        .skip(since)
                        .filter(|e| {
                            matches!(&e.kind, EventKind::CursorMoved { subscription, .. } if subscription == SUBSCRIPTION)
                        })
                        .map(|e| e.topic.clone())
                        .collect()
                })
            })
            .unwrap_or_default();
        self.note(|| format!("the seek failed ({error}); the cursors moved: {moved:?}"));
        if moved.is_empty() {
            self.void_epochs.insert(began);
        } else {
            self.next_epoch();
            self.partial_epochs.insert(began, moved.clone());
            self.partial_epochs.insert(self.epoch, moved);
        }
    }

    /// The latest rewind epoch at or before `epoch` that rewound `topic`
    /// (0: none did).
    pub(crate) fn real_epoch(&self, mut epoch: u64, topic: &str) -> u64 {
        while epoch > 0
            && (self.void_epochs.contains(&epoch)
                || self
                    .partial_epochs
                    .get(&epoch)
                    .is_some_and(|moved| !moved.contains(topic)))
        {
            epoch -= 1;
        }
        epoch
    }

    /// A rewind begins (or a seek returns): acks and order start over.
    fn next_epoch(&mut self) {
        let mark = self.broker_events();
        self.rewind_marks.push(mark);
        self.epoch += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_names_itself_only_whole() {
        let bytes = payload("p0-17", 100);
        assert_eq!(bytes.len(), 100);
        assert_eq!(name_of(&bytes), Some("p0-17"));
        assert_eq!(name_of(&bytes[..60]), None);
        assert_eq!(name_of(b"junk"), None);
        let short = payload("p1-2", 3);
        assert_eq!((short.len(), name_of(&short)), (MIN_PAYLOAD, Some("p1-2")));
    }
}
