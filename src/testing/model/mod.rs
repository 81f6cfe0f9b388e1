//! The test broker's model (pure): frames and `now` in, frames out. It
//! never does IO, never sleeps and never reads the clock; the broker task
//! (`testing/broker.rs`) feeds it what each connection sends and writes
//! out what it answers, and calls [`Model::on_tick`] at
//! [`Model::next_deadline`].

pub(crate) mod replies;
pub(crate) mod topic;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::message_id::MessageId;
use crate::proto::base_command::Type;
use crate::proto::command_ack::AckType;
use crate::proto::command_subscribe::{InitialPosition, SubType};
use crate::proto::{MessageMetadata, ServerError};
use crate::wire::Frame;

use super::record::{Event, EventKind, StoredMessage};
use topic::{Attached, ConnId, Entry, Subscription, Topic};

/// What the broker task must do.
#[derive(Debug)]
pub(crate) enum Out {
    /// Write `frame` to connection `conn`.
    Frame(ConnId, Box<Frame>),
    /// Close connection `conn`.
    Close(ConnId),
}

#[derive(Debug, Default)]
struct Conn {
    producers: HashMap<u64, String>,
    /// Consumer id → (topic, subscription).
    consumers: HashMap<u64, (String, String)>,
}

/// A SEND held back by a slow-topic fault, stored when due.
#[derive(Debug)]
struct HeldSend {
    at: Instant,
    conn: ConnId,
    producer_id: u64,
    sequence_id: u64,
    highest: u64,
    topic: String,
    metadata: MessageMetadata,
    data: Bytes,
}

/// The broker's whole state.
#[derive(Debug)]
pub(crate) struct Model {
    url: String,
    origin: Instant,
    topics: BTreeMap<String, Topic>,
    partitioned: BTreeMap<String, u32>,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: ConnId,
    next_ledger: u64,
    events: Vec<Event>,
    /// The name each consumer gave in its SUBSCRIBE, by connection and id.
    consumer_names: HashMap<(ConnId, u64), String>,
    /// Per ack event (its index in `events`), the name of the consumer
    /// whose ACK it records.
    acked_by: HashMap<usize, String>,
    failing: HashMap<String, VecDeque<ServerError>>,
    slow: HashMap<String, Duration>,
    /// Each chunk after a message's first is stored this long after the
    /// SEND before it of its producer, as from a producer on a slow link:
    /// other producers' messages are stored between the chunks.
    chunk_pace: Option<Duration>,
    /// When the last SEND of each producer (connection, id) is due: a
    /// paced producer's SENDs are stored in order.
    due_after: HashMap<(ConnId, u64), Instant>,
    held: Vec<HeldSend>,
    out: Vec<Out>,
    /// What CONNECTED announces.
    max_message_size: i32,
}

impl Model {
    /// A broker answering lookups with `url`, started at `origin`.
    pub(crate) fn new(url: String, origin: Instant) -> Self {
        Self {
            url,
            origin,
            topics: BTreeMap::new(),
            partitioned: BTreeMap::new(),
            conns: BTreeMap::new(),
            next_conn: 1,
            next_ledger: 100,
            events: Vec::new(),
            consumer_names: HashMap::new(),
            acked_by: HashMap::new(),
            failing: HashMap::new(),
            slow: HashMap::new(),
            chunk_pace: None,
            due_after: HashMap::new(),
            held: Vec::new(),
            out: Vec::new(),
            max_message_size: replies::DEFAULT_MAX_MESSAGE_SIZE,
        }
    }

    /// A new connection.
    pub(crate) fn connect(&mut self) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(id, Conn::default());
        id
    }

    /// What to write and close, oldest first.
    pub(crate) fn take_output(&mut self) -> Vec<Out> {
        std::mem::take(&mut self.out)
    }

    /// Every event so far.
    pub(crate) fn events(&self) -> &[Event] {
        &self.events
    }

    /// The name of the consumer whose ACK the ack event at `index` (of
    /// [`events`](Self::events)) records, if it gave one.
    pub(crate) fn acked_by(&self, index: usize) -> Option<&str> {
        self.acked_by.get(&index).map(String::as_str)
    }

    /// Makes `topic` a partitioned topic of `partitions` partitions.
    pub(crate) fn create_partitioned(&mut self, topic: &str, partitions: u32) {
        self.partitioned.insert(topic.to_owned(), partitions);
    }

    /// Announces `bytes` as the broker's message size to connections made
    /// from now on.
    pub(crate) fn set_max_message_size(&mut self, bytes: i32) {
        self.max_message_size = bytes;
    }

    /// A topic, by its full name.
    pub(crate) fn topic(&self, name: &str) -> Option<&Topic> {
        self.topics.get(name)
    }

    /// How many partitions `topic` has (0: not partitioned).
    pub(crate) fn partitions(&self, topic: &str) -> u32 {
        self.partitioned.get(topic).copied().unwrap_or(0)
    }

    /// The next `count` SENDs to `topic` fail with `code`.
    pub(crate) fn fail_sends(&mut self, topic: &str, count: usize, code: ServerError) {
        let queue = self.failing.entry(topic.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(code, count));
    }

    /// SENDs to `topic` are stored and confirmed `delay` after they arrive.
    pub(crate) fn slow_sends(&mut self, topic: &str, delay: Duration) {
        if delay.is_zero() {
            self.slow.remove(topic);
        } else {
            self.slow.insert(topic.to_owned(), delay);
        }
    }

    /// Stores each chunk after a message's first `pace` after its
    /// producer's SEND before it (`None`: at once, as it arrives).
    pub(crate) fn pace_chunks(&mut self, pace: Option<Duration>) {
        self.chunk_pace = pace;
    }

    /// Closes every connection (clients reconnect). As in a broker
    /// restart they all go at once: no consumer is sent, on its way out,
    /// what another connection's consumers held.
    pub(crate) fn disconnect_all(&mut self, now: Instant) {
        let conns: Vec<_> = std::mem::take(&mut self.conns).into_iter().collect();
        self.held.clear();
        for (conn, _) in &conns {
            self.out.push(Out::Close(*conn));
        }
        let mut topics = std::collections::BTreeSet::new();
        for (conn, state) in conns {
            for (id, (topic, sub)) in state.consumers {
                self.leave(conn, id, &topic, &sub);
                topics.insert(topic);
            }
        }
        for topic in topics {
            self.dispatch_topic(now, &topic);
        }
    }

    /// Closes, from the broker's side, every consumer of `topic` (a full
    /// name; each partition's own name) that belongs to `subscription`, or
    /// every consumer of it when `subscription` is `None`: CLOSE_CONSUMER
    /// goes out and what they held is delivered again.
    pub(crate) fn close_consumers(
        &mut self,
        now: Instant,
        topic: &str,
        subscription: Option<&str>,
    ) {
        let mut closed = Vec::new();
        for (conn, state) in self.conns.iter_mut() {
            state.consumers.retain(|id, (t, s)| {
                let hit = t == topic && subscription.is_none_or(|want| want == s);
                if hit {
                    closed.push((*conn, *id, s.clone()));
                }
                !hit
            });
        }
        // All leave before anything is dispatched again, as on a broker,
        // whose redelivery of what they held reads the entries first: none
        // goes to a consumer about to be closed.
        for (conn, id, sub) in &closed {
            self.reply(*conn, replies::close_consumer(*id));
            self.leave(*conn, *id, topic, sub);
        }
        if !closed.is_empty() {
            self.dispatch_topic(now, topic);
        }
    }

    /// Closes, from the broker's side, every producer of `topic`.
    pub(crate) fn close_producers(&mut self, topic: &str) {
        let mut closed = Vec::new();
        for (conn, state) in self.conns.iter_mut() {
            state.producers.retain(|id, t| {
                let hit = t == topic;
                if hit {
                    closed.push((*conn, *id));
                }
                !hit
            });
        }
        self.held
            .retain(|h| !(h.topic == topic && closed.contains(&(h.conn, h.producer_id))));
        for (conn, id) in closed {
            self.reply(conn, replies::close_producer(id));
        }
    }

    /// Moves `subscription` of `topic` back to its first entry, as an
    /// administrator's cursor reset does. Like Apache Pulsar, the broker
    /// first closes the subscription's consumers, which subscribe again,
    /// then moves the cursor: no consumer is sent a message from the new
    /// position before it learns that its subscription was closed (what a
    /// consumer closed last is sent meanwhile, as the others leave, is
    /// from the old position).
    pub(crate) fn reset_cursor(&mut self, now: Instant, topic: &str, subscription: &str) {
        if self.sub_mut(topic, subscription).is_none() {
            return;
        }
        self.close_consumers(now, topic, Some(subscription));
        let Some(sub) = self.sub_mut(topic, subscription) else {
            return;
        };
        sub.reset(0);
        let moved = EventKind::CursorMoved {
            subscription: subscription.to_owned(),
            from: 0,
        };
        self.event(now, topic, moved);
    }

    /// The messages stored in `topic`.
    pub(crate) fn messages(&self, topic: &str) -> Vec<StoredMessage> {
        let Some(t) = self.topics.get(topic) else {
            return Vec::new();
        };
        t.entries
            .iter()
            .flat_map(|e| stored(e, self.origin))
            .collect()
    }

    /// Entries of `topic` not acked on `subscription`.
    pub(crate) fn backlog(&self, topic: &str, subscription: &str) -> Option<u64> {
        let t = self.topics.get(topic)?;
        let sub = t.subscriptions.get(subscription)?;
        Some(sub.unacked(t.entries.len() as u64))
    }

    /// The topics that exist.
    pub(crate) fn topic_names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }

    /// When [`on_tick`](Self::on_tick) has work.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let held = self.held.iter().map(|h| h.at).min();
        let delayed = self
            .topics
            .values()
            .flat_map(|t| t.subscriptions.values())
            .filter_map(Subscription::next_due)
            .min();
        held.into_iter().chain(delayed).min()
    }

    /// Time passed: held sends and delayed messages that are due go out.
    pub(crate) fn on_tick(&mut self, now: Instant) {
        let (due, later): (Vec<HeldSend>, Vec<HeldSend>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.at <= now);
        self.held = later;
        for send in due {
            if self.conns.contains_key(&send.conn) {
                self.store(now, send);
            }
        }
        let names: Vec<String> = self.topics.keys().cloned().collect();
        for name in names {
            if let Some(t) = self.topics.get_mut(&name) {
                for sub in t.subscriptions.values_mut() {
                    sub.release_due(now);
                }
            }
            self.dispatch_topic(now, &name);
        }
    }

    /// Connection `conn` is gone: its consumers' messages go to others,
    /// its producers and held sends are dropped.
    pub(crate) fn on_disconnect(&mut self, now: Instant, conn: ConnId) {
        let Some(state) = self.conns.remove(&conn) else {
            return;
        };
        self.held.retain(|h| h.conn != conn);
        self.due_after.retain(|(c, _), _| *c != conn);
        let mut topics = std::collections::BTreeSet::new();
        for (id, (topic, sub)) in state.consumers {
            self.leave(conn, id, &topic, &sub);
            topics.insert(topic);
        }
        for topic in topics {
            self.dispatch_topic(now, &topic);
        }
    }

    /// One frame from connection `conn`.
    pub(crate) fn on_frame(&mut self, now: Instant, conn: ConnId, frame: Frame) {
        let c = &frame.command;
        match c.r#type() {
            Type::Connect => self.reply(conn, replies::connected(self.max_message_size)),
            Type::Ping => self.reply(conn, replies::pong()),
            Type::Lookup => {
                if let Some(l) = &c.lookup_topic {
                    let url = self.url.clone();
                    self.reply(conn, replies::lookup(l.request_id, &url));
                }
            }
            Type::PartitionedMetadata => {
                if let Some(p) = &c.partition_metadata {
                    let n = self.partitioned.get(&p.topic).copied().unwrap_or(0);
                    self.reply(conn, replies::partitions(p.request_id, n));
                }
            }
            Type::Producer => {
                if let Some(p) = &c.producer {
                    self.ensure_topic(&p.topic);
                    let name = p
                        .producer_name
                        .clone()
                        .unwrap_or_else(|| format!("test-producer-{conn}-{}", p.producer_id));
                    if let Some(state) = self.conns.get_mut(&conn) {
                        state.producers.insert(p.producer_id, p.topic.clone());
                    }
                    self.reply(conn, replies::producer_success(p.request_id, name));
                }
            }
            Type::Send => self.on_send(now, conn, frame),
            Type::CloseProducer => {
                if let Some(p) = &c.close_producer {
                    if let Some(state) = self.conns.get_mut(&conn) {
                        state.producers.remove(&p.producer_id);
                    }
                    self.reply(conn, replies::success(p.request_id));
                }
            }
            Type::Subscribe => self.on_subscribe(conn, &frame),
            Type::Flow => {
                if let Some(f) = &c.flow {
                    if let Some((topic, sub)) = self.consumer(conn, f.consumer_id) {
                        if let Some(s) = self.sub_mut(&topic, &sub) {
                            for a in s.consumers.iter_mut() {
                                if (a.conn, a.id) == (conn, f.consumer_id) {
                                    a.permits = a.permits.saturating_add(f.message_permits);
                                }
                            }
                        }
                        self.dispatch_topic(now, &topic);
                    }
                }
            }
            Type::Ack => self.on_ack(now, conn, &frame),
            Type::RedeliverUnacknowledgedMessages => self.on_redeliver(now, conn, &frame),
            Type::Seek => self.on_seek(now, conn, &frame),
            Type::Unsubscribe => {
                if let Some(u) = &c.unsubscribe {
                    self.on_unsubscribe(conn, u.consumer_id, u.request_id);
                }
            }
            Type::CloseConsumer => {
                if let Some(cc) = &c.close_consumer {
                    let found = self
                        .conns
                        .get_mut(&conn)
                        .and_then(|s| s.consumers.remove(&cc.consumer_id));
                    if let Some((topic, sub)) = found {
                        self.detach(now, conn, cc.consumer_id, &topic, &sub);
                    }
                    self.reply(conn, replies::success(cc.request_id));
                }
            }
            Type::GetLastMessageId => {
                if let Some(g) = &c.get_last_message_id {
                    let answer = self.last_message_id(conn, g.consumer_id);
                    let frame = match answer {
                        Some((last, mark)) => replies::last_message_id(g.request_id, last, mark),
                        None => replies::error(
                            g.request_id,
                            ServerError::ConsumerNotFound,
                            "unknown consumer".into(),
                        ),
                    };
                    self.reply(conn, frame);
                }
            }
            // Schemas, transactions, namespaces' topic lists, auth
            // challenges: not modelled; the client sees its timeout.
            _ => {}
        }
    }

    fn reply(&mut self, conn: ConnId, frame: Frame) {
        self.out.push(Out::Frame(conn, Box::new(frame)));
    }

    fn event(&mut self, now: Instant, topic: &str, kind: EventKind) {
        self.events.push(Event {
            at: now.saturating_duration_since(self.origin),
            topic: topic.to_owned(),
            kind,
        });
    }

    fn ensure_topic(&mut self, name: &str) -> &mut Topic {
        let ledger = &mut self.next_ledger;
        self.topics.entry(name.to_owned()).or_insert_with(|| {
            *ledger += 1;
            Topic::new(*ledger, partition_of(name))
        })
    }

    fn consumer(&self, conn: ConnId, id: u64) -> Option<(String, String)> {
        self.conns.get(&conn)?.consumers.get(&id).cloned()
    }

    fn sub_mut(&mut self, topic: &str, sub: &str) -> Option<&mut Subscription> {
        self.topics.get_mut(topic)?.subscriptions.get_mut(sub)
    }

    fn on_send(&mut self, now: Instant, conn: ConnId, frame: Frame) {
        let (Some(send), Some(payload)) = (frame.command.send, frame.payload) else {
            return;
        };
        let topic = self
            .conns
            .get(&conn)
            .and_then(|c| c.producers.get(&send.producer_id))
            .cloned();
        let Some(topic) = topic else {
            let frame = replies::send_error(
                send.producer_id,
                send.sequence_id,
                ServerError::UnknownError,
            );
            self.reply(conn, frame);
            return;
        };
        if let Some(code) = self.failing.get_mut(&topic).and_then(VecDeque::pop_front) {
            self.event(
                now,
                &topic,
                EventKind::SendFailed {
                    sequence_id: send.sequence_id,
                },
            );
            self.reply(
                conn,
                replies::send_error(send.producer_id, send.sequence_id, code),
            );
            return;
        }
        let mut at = now + self.slow.get(&topic).copied().unwrap_or_default();
        if let Some(pace) = self.chunk_pace {
            let producer = (conn, send.producer_id);
            at = at.max(self.due_after.get(&producer).copied().unwrap_or(at));
            if payload.metadata.chunk_id.unwrap_or(0) > 0 {
                at += pace;
            }
            self.due_after.insert(producer, at);
        }
        let held = HeldSend {
            at,
            conn,
            producer_id: send.producer_id,
            sequence_id: send.sequence_id,
            highest: send.highest_sequence_id.unwrap_or(send.sequence_id),
            topic,
            metadata: payload.metadata,
            data: payload.data,
        };
        if held.at > now {
            self.held.push(held);
        } else {
            self.store(now, held);
        }
    }

    /// Stores a SEND and confirms it.
    fn store(&mut self, now: Instant, send: HeldSend) {
        // The producer computed deliver_at_time from its wall clock at
        // publish time: the delay is their difference, on this clock.
        let deliver_at = send.metadata.deliver_at_time.map(|at| {
            let delay = u64::try_from(at)
                .unwrap_or(0)
                .saturating_sub(send.metadata.publish_time);
            now + Duration::from_millis(delay)
        });
        let t = self.ensure_topic(&send.topic);
        let entry = t.entries.len() as u64;
        let id = t.id(entry);
        t.entries.push(Entry {
            id,
            metadata: send.metadata,
            data: send.data,
            stored_at: now,
            deliver_at,
        });
        self.event(now, &send.topic, EventKind::Published { id });
        let receipt = replies::receipt(send.producer_id, send.sequence_id, send.highest, id);
        self.reply(send.conn, receipt);
        self.dispatch_topic(now, &send.topic);
    }

    fn on_subscribe(&mut self, conn: ConnId, frame: &Frame) {
        let Some(s) = &frame.command.subscribe else {
            return;
        };
        if let Some(name) = &s.consumer_name {
            self.consumer_names
                .insert((conn, s.consumer_id), name.clone());
        }
        let kind = s.sub_type();
        let durable = s.durable.unwrap_or(true);
        let t = self.ensure_topic(&s.topic);
        let end = t.entries.len() as u64;
        let start = match (&s.start_message_id, s.initial_position()) {
            (Some(id), _) if !durable => t.start_at(&MessageId::from_proto(id)),
            (_, InitialPosition::Earliest) => 0,
            (_, InitialPosition::Latest) => end,
        };
        let sub = t
            .subscriptions
            .entry(s.subscription.clone())
            .or_insert_with(|| Subscription::new(kind, durable, start));
        let refusal = if !sub.consumers.is_empty() && sub.kind != kind {
            Some((ServerError::ConsumerBusy, "subscription is of another type"))
        } else if kind == SubType::Exclusive && !sub.consumers.is_empty() {
            Some((
                ServerError::ConsumerBusy,
                "exclusive consumer is already connected",
            ))
        } else {
            None
        };
        if let Some((code, text)) = refusal {
            self.reply(conn, replies::error(s.request_id, code, text.into()));
            return;
        }
        if sub.consumers.is_empty() {
            sub.kind = kind;
        }
        sub.kept_for_seek = false;
        sub.consumers.push(Attached {
            conn,
            id: s.consumer_id,
            permits: 0,
            epoch: s.consumer_epoch,
        });
        let failover = (kind == SubType::Failover).then(|| {
            sub.consumers
                .iter()
                .enumerate()
                .map(|(i, a)| (a.conn, a.id, i == 0))
                .collect::<Vec<_>>()
        });
        if let Some(state) = self.conns.get_mut(&conn) {
            state
                .consumers
                .insert(s.consumer_id, (s.topic.clone(), s.subscription.clone()));
        }
        self.reply(conn, replies::success(s.request_id));
        for (c, id, active) in failover.unwrap_or_default() {
            self.reply(c, replies::active_consumer_change(id, active));
        }
    }

    fn detach(&mut self, now: Instant, conn: ConnId, id: u64, topic: &str, sub: &str) {
        self.leave(conn, id, topic, sub);
        self.dispatch_topic(now, topic);
    }

    /// Consumer `id` of `conn` leaves `sub` of `topic`; what it held is
    /// dispatched anew by the caller.
    fn leave(&mut self, conn: ConnId, id: u64, topic: &str, sub: &str) {
        let Some(t) = self.topics.get_mut(topic) else {
            return;
        };
        let Some(s) = t.subscriptions.get_mut(sub) else {
            return;
        };
        let was_active = s
            .consumers
            .first()
            .is_some_and(|a| (a.conn, a.id) == (conn, id));
        s.detach(conn, id);
        if s.consumers.is_empty() && !s.durable && !s.kept_for_seek {
            t.subscriptions.remove(sub);
            return;
        }
        if was_active && s.kind == SubType::Failover {
            if let Some(next) = s.consumers.first() {
                let (c, i) = (next.conn, next.id);
                self.reply(c, replies::active_consumer_change(i, true));
            }
        }
    }

    fn on_ack(&mut self, now: Instant, conn: ConnId, frame: &Frame) {
        let Some(a) = &frame.command.ack else {
            return;
        };
        let Some((topic, sub)) = self.consumer(conn, a.consumer_id) else {
            return;
        };
        let mut acked = Vec::new();
        let mut members_acked = Vec::new();
        let mut key_shared = false;
        if let Some(t) = self.topics.get_mut(&topic) {
            // A batch index ack names the members left unacked in its
            // `ack_set`; the entry is acked once none is left.
            let ledger_entries: Vec<(u64, u32, &[i64])> = a
                .message_id
                .iter()
                .filter_map(|m| {
                    let id = MessageId::from_proto(m);
                    let e = t.entry_of(&id)?;
                    Some((e, t.entries[e as usize].permits(), m.ack_set.as_slice()))
                })
                .collect();
            let ids: Vec<MessageId> = (0..t.entries.len() as u64).map(|e| t.id(e)).collect();
            if let Some(s) = t.subscriptions.get_mut(&sub) {
                key_shared = s.kind == SubType::KeyShared;
                for (entry, members, ack_set) in ledger_entries {
                    let partial = ack_set.iter().any(|w| *w != 0);
                    if a.ack_type() == AckType::Cumulative {
                        let whole = if partial { entry } else { entry + 1 };
                        for e in s.mark..whole {
                            if s.ack(e) {
                                acked.push(ids[e as usize]);
                            }
                        }
                    }
                    let done = if partial {
                        s.ack_members(entry, members, ack_set)
                    } else {
                        a.ack_type() != AckType::Cumulative && s.ack(entry)
                    };
                    if done {
                        acked.push(ids[entry as usize]);
                    } else if partial {
                        let members = (0..members as i32)
                            .filter(|i| {
                                let word = ack_set.get(*i as usize / 64).copied().unwrap_or(0);
                                word & (1 << (i % 64)) == 0
                            })
                            .collect();
                        members_acked.push((ids[entry as usize], members));
                    }
                }
            }
        }
        // On Key_Shared an entry acked may free a key held for its new
        // consumer.
        let frees_keys = key_shared && !acked.is_empty();
        let by = self.consumer_names.get(&(conn, a.consumer_id)).cloned();
        let first = self.events.len();
        for id in acked {
            self.event(
                now,
                &topic,
                EventKind::Acked {
                    subscription: sub.clone(),
                    id,
                },
            );
        }
        for (id, members) in members_acked {
            self.event(
                now,
                &topic,
                EventKind::MembersAcked {
                    subscription: sub.clone(),
                    id,
                    members,
                },
            );
        }
        if let Some(by) = by {
            for index in first..self.events.len() {
                self.acked_by.insert(index, by.clone());
            }
        }
        if let Some(request_id) = a.request_id {
            self.reply(conn, replies::ack_response(a.consumer_id, request_id));
        }
        if frees_keys {
            self.dispatch_topic(now, &topic);
        }
    }

    fn on_redeliver(&mut self, now: Instant, conn: ConnId, frame: &Frame) {
        let Some(r) = &frame.command.redeliver_unacknowledged_messages else {
            return;
        };
        let Some((topic, sub)) = self.consumer(conn, r.consumer_id) else {
            return;
        };
        let mut moved = Vec::new();
        if let Some(t) = self.topics.get_mut(&topic) {
            let named: Vec<u64> = r
                .message_ids
                .iter()
                .filter_map(|m| t.entry_of(&MessageId::from_proto(m)))
                .collect();
            let ids: Vec<MessageId> = (0..t.entries.len() as u64).map(|e| t.id(e)).collect();
            if let Some(s) = t.subscriptions.get_mut(&sub) {
                if let Some(epoch) = r.consumer_epoch {
                    for a in s
                        .consumers
                        .iter_mut()
                        .filter(|a| (a.conn, a.id) == (conn, r.consumer_id))
                    {
                        a.epoch = Some(epoch);
                    }
                }
                let by_id =
                    matches!(s.kind, SubType::Shared | SubType::KeyShared) && !named.is_empty();
                let entries = s.redeliver(conn, r.consumer_id, by_id.then_some(&named[..]));
                moved.extend(entries.into_iter().map(|e| ids[e as usize]));
            }
        }
        for id in moved {
            self.event(
                now,
                &topic,
                EventKind::RedeliveryRequested {
                    subscription: sub.clone(),
                    id,
                },
            );
        }
        self.dispatch_topic(now, &topic);
    }

    fn on_seek(&mut self, now: Instant, conn: ConnId, frame: &Frame) {
        let Some(s) = &frame.command.seek else {
            return;
        };
        let Some((topic, sub)) = self.consumer(conn, s.consumer_id) else {
            let frame = replies::error(
                s.request_id,
                ServerError::ConsumerNotFound,
                "unknown consumer".into(),
            );
            self.reply(conn, frame);
            return;
        };
        if let Some(t) = self.topics.get_mut(&topic) {
            let start = match (&s.message_id, s.message_publish_time) {
                (Some(id), _) => t.start_at(&MessageId::from_proto(id)),
                (None, Some(time)) => t
                    .entries
                    .iter()
                    .position(|e| e.metadata.publish_time >= time)
                    .map_or(t.entries.len() as u64, |p| p as u64),
                (None, None) => 0,
            };
            // Like Apache Pulsar, the broker closes the subscription's
            // consumers (the seeking one too) before it moves the cursor,
            // so none is sent a message from the new position on its old
            // session; a non-durable subscription outlives them.
            if let Some(s) = t.subscriptions.get_mut(&sub) {
                s.kept_for_seek = !s.durable;
            }
            self.close_consumers(now, &topic, Some(&sub));
            let moved = self.sub_mut(&topic, &sub).map(|s| {
                s.reset(start);
                EventKind::CursorMoved {
                    subscription: sub.clone(),
                    from: start,
                }
            });
            if let Some(moved) = moved {
                self.event(now, &topic, moved);
            }
        }
        self.reply(conn, replies::success(s.request_id));
        self.dispatch_topic(now, &topic);
    }

    fn on_unsubscribe(&mut self, conn: ConnId, consumer: u64, request_id: u64) {
        let Some((topic, sub)) = self.consumer(conn, consumer) else {
            let frame = replies::error(
                request_id,
                ServerError::ConsumerNotFound,
                "unknown consumer".into(),
            );
            self.reply(conn, frame);
            return;
        };
        let others = self
            .topics
            .get(&topic)
            .and_then(|t| t.subscriptions.get(&sub))
            .is_some_and(|s| {
                s.consumers
                    .iter()
                    .any(|a| (a.conn, a.id) != (conn, consumer))
            });
        if others {
            let frame = replies::error(
                request_id,
                ServerError::ConsumerBusy,
                "other consumers are connected".into(),
            );
            self.reply(conn, frame);
            return;
        }
        if let Some(t) = self.topics.get_mut(&topic) {
            t.subscriptions.remove(&sub);
        }
        if let Some(state) = self.conns.get_mut(&conn) {
            state.consumers.remove(&consumer);
        }
        self.reply(conn, replies::success(request_id));
    }

    fn last_message_id(
        &self,
        conn: ConnId,
        consumer: u64,
    ) -> Option<(MessageId, Option<MessageId>)> {
        let (topic, sub) = self.consumer(conn, consumer)?;
        let t = self.topics.get(&topic)?;
        let last = match t.entries.len() {
            0 => MessageId::new(t.ledger, u64::MAX).with_partition(t.partition),
            n => t.id(n as u64 - 1),
        };
        let mark = t
            .subscriptions
            .get(&sub)
            .and_then(|s| s.mark.checked_sub(1))
            .map(|e| t.id(e));
        Some((last, mark))
    }

    /// Sends what each subscription of `topic` can deliver now.
    fn dispatch_topic(&mut self, now: Instant, topic: &str) {
        let Some(t) = self.topics.get_mut(topic) else {
            return;
        };
        let mut sent = Vec::new();
        for (name, sub) in t.subscriptions.iter_mut() {
            for d in sub.dispatch(now, &t.entries) {
                let e = &t.entries[d.entry as usize];
                let mut frame = replies::message(
                    d.consumer,
                    e.id,
                    d.redelivery_count,
                    d.epoch,
                    e.metadata.clone(),
                    e.data.clone(),
                );
                if let Some(m) = frame.command.message.as_mut() {
                    m.ack_set = d.ack_set;
                }
                sent.push((name.clone(), d.conn, e.id, d.redelivery_count, frame));
            }
        }
        for (subscription, conn, id, redelivery_count, frame) in sent {
            self.event(
                now,
                topic,
                EventKind::Delivered {
                    subscription,
                    id,
                    redelivery_count,
                },
            );
            self.reply(conn, frame);
        }
    }
}

/// The partition index in a partition's name (`…-partition-N`), else -1.
fn partition_of(topic: &str) -> i32 {
    topic
        .rsplit_once("-partition-")
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(-1)
}

/// The messages of one entry, a batch's members one by one.
pub(crate) fn stored(entry: &Entry, origin: Instant) -> Vec<StoredMessage> {
    let m = &entry.metadata;
    let data = crate::compression::Compression::from_proto(m.compression.unwrap_or(0))
        .and_then(|c| {
            c.decompress(
                entry.data.clone(),
                m.uncompressed_size.unwrap_or(0),
                usize::MAX,
            )
        })
        .unwrap_or_else(|_| entry.data.clone());
    let stored_at = entry.stored_at.saturating_duration_since(origin);
    let deliver_after = entry
        .deliver_at
        .map(|at| at.saturating_duration_since(entry.stored_at));
    let props = |kvs: &[crate::proto::KeyValue]| {
        kvs.iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect()
    };
    let Some(count) = m.num_messages_in_batch else {
        return vec![StoredMessage {
            id: entry.id,
            payload: data,
            key: m.partition_key.clone(),
            properties: props(&m.properties),
            event_time: m.event_time,
            stored_at,
            deliver_after,
        }];
    };
    crate::wire::batch::members(data, count)
        .filter_map(Result::ok)
        .map(|member| StoredMessage {
            id: entry.id.with_batch_index(member.index),
            payload: member.payload,
            key: member.metadata.partition_key.clone(),
            properties: props(&member.metadata.properties),
            event_time: member.metadata.event_time,
            stored_at,
            deliver_after,
        })
        .collect()
}
