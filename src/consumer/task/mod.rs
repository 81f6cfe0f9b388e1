//! The consumer's driver: one task per consumer. It feeds each partition's
//! [`ConsumerCore`] from the connection's mailbox and the handle's commands,
//! keeps one timer (the earliest `next_deadline`), and carries out the
//! actions the cores queue. All delivery decisions live in the cores.
//!
//! `attach.rs` subscribes (and subscribes again), `execute.rs` turns the
//! cores' actions and the handle's requests into commands on the wire.

mod acks;
mod attach;
mod chunked;
mod execute;
mod forward;
mod resubscribe;

pub(crate) use attach::expand;
pub(crate) use forward::Forwards;

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::SelectAll;
use futures::{Stream, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info, trace, warn};

use super::chunks::{self, ChunkAssembler, ChunkLimits};
use super::consumer_error::ConsumerError;
use super::message::Message;
use super::position::Position;
use super::receive::{self, Delivery};
use super::subscribe::SubscribeOptions;
use super::{Acked, Action, ConsumerCore, CoreConfig, CoreError, Incoming};
use crate::MessageId;
use crate::client::{Client, TopicName};
use crate::clock;
use crate::connection::{Connection, ConsumerEvent, Response};
use crate::ids::ConsumerId;
use crate::proto::command_ack::AckType;
use crate::wire::commands::{self, SeekTarget};

type Reply<T> = oneshot::Sender<Result<T, ConsumerError>>;

/// Commands taken from the handle's queue in one turn of the task's loop,
/// after the first.
const COMMANDS_PER_TURN: usize = 64;

/// What the handle asks of its task; each request carries its reply.
#[derive(Debug)]
pub(crate) enum Command {
    /// Hand the next message over when there is one.
    Receive(Reply<Message>),
    /// Hand the next message over if one is queued now.
    TryReceive(Reply<Option<Message>>),
    /// Ack `id` (of `topic`, in a batch of `batch_size`), individually or
    /// cumulatively.
    Ack {
        topic: Arc<str>,
        id: MessageId,
        batch_size: Option<u32>,
        cumulative: bool,
        /// `None`: nobody waits for the outcome.
        reply: Option<Reply<()>>,
    },
    /// Ask for `id` again.
    Nack {
        topic: Arc<str>,
        id: MessageId,
        redelivery_count: u32,
    },
    /// Move the subscription.
    Seek(SeekTarget, Reply<()>),
    /// The id of the last message of the (single) topic.
    LastMessageId(Reply<MessageId>),
    /// Whether a message is there to read (see `Reader::has_message_available`).
    HasMessageAvailable(Reply<bool>),
    /// Delete the subscription, then stop.
    Unsubscribe(Reply<()>),
    /// Close the consumer, then stop.
    Close(Reply<()>),
}

/// Which partitions are active (Failover), as ACTIVE_CONSUMER_CHANGE said.
pub(crate) type Activity = Vec<(Arc<str>, bool)>;

/// One subscribed topic or partition.
struct Sub {
    topic: TopicName,
    name: Arc<str>,
    partition: i32,
    conn: Connection,
    id: ConsumerId,
    /// Bumped per subscribe, so events from an older mailbox are ignored.
    generation: u64,
    core: ConsumerCore<Message>,
    /// Where its messages start (a reader's start, a seek), and the last
    /// one handed out (where a non-durable subscription resumes).
    position: Position,
    /// Chunks of messages being assembled, and the chunk ids of those
    /// handed out.
    chunks: ChunkAssembler,
    /// Individual acks held for one grouped ACK frame, and when it goes.
    grouped: Vec<crate::proto::MessageIdData>,
    flush_at: Option<std::time::Instant>,
    /// Acks someone waits for (with receipts), and ACKs to send again.
    acks: acks::AckWaiters,
    /// When the current subscription was made, and whether it delivered
    /// anything: the backoff starts over after one that lived well or did.
    subscribed_at: std::time::Instant,
    delivered: bool,
    /// Gave up subscribing again; receivers fail once every sub is lost.
    lost: bool,
}

type Events = SelectAll<Pin<Box<dyn Stream<Item = (usize, u64, ConsumerEvent)> + Send + Sync>>>;

/// The settings the task needs.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) client: Client,
    pub(crate) options: SubscribeOptions,
    pub(crate) core: CoreConfig,
    pub(crate) ack_receipts: bool,
    /// Group individual acks into one ACK frame per this interval.
    pub(crate) ack_group_time: Option<Duration>,
    /// What to do with encrypted messages.
    pub(crate) crypto_failure_action: super::CryptoFailureAction,
    /// Bounds on the chunked messages being assembled.
    pub(crate) chunks: ChunkLimits,
    /// Dead-letter forwards: where they go, and those in flight.
    pub(crate) forwards: Forwards,
}

pub(crate) struct Driver {
    settings: Settings,
    subs: Vec<Sub>,
    events: Events,
    waiting: VecDeque<Reply<Message>>,
    /// Round-robin start for handing out messages across partitions.
    next_sub: usize,
    activity: watch::Sender<Activity>,
    /// Subscribe attempts after a lost subscription (see resubscribe.rs).
    resubscribes: resubscribe::Resubscribes,
    /// When the task started: the instant the cores get when they do not
    /// use the clock (see [`Driver::core_now`]).
    started: std::time::Instant,
    /// ACK requests (with receipts): the next flight's token, and where
    /// their outcomes come back.
    ack_tokens: u64,
    acks_landed_tx: mpsc::UnboundedSender<acks::Landed>,
    acks_landed: mpsc::UnboundedReceiver<acks::Landed>,
    /// Partitions given up for good while others go on: each is reported
    /// once, to the next receiver.
    lost_reports: VecDeque<ConsumerError>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("subs", &self.subs.len())
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// The task: its loop, then `ended` set, so a handle that finds the
    /// task gone can tell a close (the flag set) from a panic (not set).
    /// The handle's queue lives until the flag is set.
    pub(crate) async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        ended: Arc<std::sync::atomic::AtomicBool>,
    ) {
        self.serve_until_stopped(&mut commands).await;
        ended.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The task's loop; ends after Close or Unsubscribe, or when every
    /// handle is gone (then it closes the consumer).
    async fn serve_until_stopped(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>) {
        // One timer for the task's life, moved only when the earliest
        // deadline changes: a fresh `Sleep` per loop turn registered and
        // removed a timer-wheel entry for every message.
        let timer = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(timer);
        let mut armed: Option<std::time::Instant> = None;
        loop {
            let deadline = self
                .subs
                .iter()
                .flat_map(|s| [s.core.next_deadline(), s.flush_at, s.chunks.next_deadline()])
                .flatten()
                .min();
            if deadline != armed {
                if let Some(at) = deadline {
                    timer.as_mut().reset(at.into());
                }
                armed = deadline;
            }
            tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => {
                        if self.on_command(command).await {
                            return;
                        }
                        // Commands already queued (the application's acks
                        // and receives) are taken in this turn, in order,
                        // each followed by a hand-over as before; a bound
                        // keeps the broker's events and timers fair.
                        for _ in 0..COMMANDS_PER_TURN {
                            let Ok(command) = commands.try_recv() else {
                                break;
                            };
                            self.serve().await;
                            if self.on_command(command).await {
                                return;
                            }
                        }
                    }
                    None => {
                        self.settle_forwards().await;
                        self.deliver_pending_acks().await;
                        self.close_all().await;
                        self.settings.forwards.close().await;
                        return;
                    }
                },
                Some((index, generation, event)) = self.events.next() => {
                    self.on_event(index, generation, event).await;
                }
                Some(forwarded) = self.settings.forwards.done.recv() => {
                    self.on_forwarded(forwarded).await;
                }
                Some(landed) = self.acks_landed.recv() => self.ack_landed(landed),
                outcome = self.resubscribes.next() => self.resubscribed(outcome).await,
                () = &mut timer, if armed.is_some() => {
                    // Set again next turn, even if the deadline stays.
                    armed = None;
                    let now = clock::now();
                    for index in 0..self.subs.len() {
                        self.subs[index].core.on_tick(now);
                        self.expire_chunks(index, now);
                        self.run_actions(index).await;
                        if self.subs[index].flush_at.is_some_and(|at| at <= now) {
                            self.flush_acks(index).await;
                        }
                    }
                }
            }
            self.serve().await;
        }
    }

    /// Returns true when the task should stop.
    async fn on_command(&mut self, command: Command) -> bool {
        match command {
            Command::Receive(reply) => self.waiting.push_back(reply),
            Command::TryReceive(reply) => {
                if let Some(lost) = self.lost_reports.pop_front() {
                    let _ = reply.send(Err(lost));
                    return false;
                }
                let answer = match (self.pop(self.core_now()).await, self.all_lost()) {
                    (None, Some(lost)) => Err(lost()),
                    (message, _) => message.transpose(),
                };
                let _ = reply.send(answer);
            }
            Command::Ack {
                topic,
                id,
                batch_size,
                cumulative,
                reply,
            } => self.ack(&topic, id, batch_size, cumulative, reply).await,
            Command::Nack {
                topic,
                id,
                redelivery_count,
            } => {
                if let Some(index) = self.find(&topic) {
                    self.subs[index]
                        .core
                        .nack(clock::now(), id, redelivery_count);
                    self.run_actions(index).await;
                }
            }
            Command::Seek(target, reply) => {
                let _ = reply.send(self.seek(target).await);
            }
            Command::LastMessageId(reply) => {
                let _ = reply.send(self.last_message_id().await);
            }
            Command::HasMessageAvailable(reply) => {
                let _ = reply.send(self.has_message_available().await);
            }
            Command::Unsubscribe(reply) => {
                let result = self.unsubscribe().await;
                let done = result.is_ok();
                let _ = reply.send(result);
                if done {
                    // The broker removed the consumers with the subscription.
                    self.detach_all(false).await;
                    self.settings.forwards.close().await;
                    return true;
                }
            }
            Command::Close(reply) => {
                self.settle_forwards().await;
                self.deliver_pending_acks().await;
                self.close_all().await;
                self.settings.forwards.close().await;
                let _ = reply.send(Ok(()));
                return true;
            }
        }
        false
    }

    fn find(&self, topic: &str) -> Option<usize> {
        self.subs.iter().position(|s| &*s.name == topic)
    }

    /// Acks `id` (of `topic`); with receipts, `reply` waits for the ACK
    /// that covers it (see `acks.rs`), otherwise it is answered once the
    /// ack is handed to the core, which keeps it until it can be sent.
    async fn ack(
        &mut self,
        topic: &str,
        id: MessageId,
        batch_size: Option<u32>,
        cumulative: bool,
        reply: Option<Reply<()>>,
    ) {
        let answer = |reply: Option<Reply<()>>, error| {
            if let Some(reply) = reply {
                let _ = reply.send(Err(error));
            }
        };
        let Some(index) = self.find(topic) else {
            let error = ConsumerError::ForeignMessage {
                topic: topic.to_owned(),
            };
            answer(reply, error);
            return;
        };
        let now = self.core_now();
        let sub = &mut self.subs[index];
        let acked = if cumulative {
            match sub.core.ack_cumulative_with_batch_size(now, id, batch_size) {
                Ok(acked) => acked,
                Err(e) => {
                    let error = match e {
                        CoreError::CumulativeAckNotAllowed { subscription } => {
                            ConsumerError::CumulativeAckNotAllowed { subscription }
                        }
                        other => ConsumerError::Core(other),
                    };
                    answer(reply, error);
                    return;
                }
            }
        } else {
            sub.core.ack_with_batch_size(now, id, batch_size)
        };
        if let Some(reply) = reply {
            match acked {
                _ if !self.settings.ack_receipts => {
                    let _ = reply.send(Ok(()));
                }
                _ if sub.lost => {
                    let _ = reply.send(Err(self.lost_error(index)));
                    return;
                }
                Acked::Queued => sub.acks.next.push(reply),
                Acked::AwaitingBatch { entry } => {
                    sub.acks.by_entry.entry(entry).or_default().push(reply);
                }
                Acked::Unrecorded => {
                    let _ = reply.send(Err(ConsumerError::AckNotSent {
                        topic: topic.to_owned(),
                    }));
                }
            }
        }
        self.run_actions(index).await;
    }

    /// The instant for the cores' calls: the clock when they use it (an
    /// ack timeout or a delayed nack), else the task's start, which they
    /// ignore; reading the clock per message cost ~3% of a consume run.
    fn core_now(&self) -> std::time::Instant {
        if self.subs.iter().any(|s| s.core.uses_clock()) {
            clock::now()
        } else {
            self.started
        }
    }

    /// Hands queued messages to waiting receivers.
    async fn serve(&mut self) {
        // One clock read per pass: the messages handed over in it are
        // handed over at the same moment.
        let mut now = None;
        while let Some(reply) = self.waiting.pop_front() {
            if reply.is_closed() {
                continue;
            }
            if let Some(lost) = self.lost_reports.pop_front() {
                let _ = reply.send(Err(lost));
                continue;
            }
            let at = match now {
                Some(at) => at,
                None => *now.insert(self.core_now()),
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
                    return;
                }
            }
        }
    }

    /// When every sub gave up subscribing again: the error for receivers
    /// (nothing more can arrive, so nobody waits forever).
    fn all_lost(&self) -> Option<impl Fn() -> ConsumerError + use<>> {
        if !self.subs.iter().all(|s| s.lost) {
            return None;
        }
        let topic = self.subs.first()?.name.to_string();
        let attempts = self.resubscribes.attempts(0);
        Some(move || ConsumerError::Lost {
            topic: topic.clone(),
            attempts,
        })
    }

    /// The next queued message, partitions taken in turn; in place of one
    /// the application must not get, the error naming it (the core holds
    /// it as handed out: unacked, under the ack timeout).
    async fn pop(&mut self, now: std::time::Instant) -> Option<Result<Message, ConsumerError>> {
        let n = self.subs.len();
        for k in 0..n {
            let index = (self.next_sub + k) % n;
            if let Some(incoming) = self.subs[index].core.pop_for_application(now) {
                self.subs[index]
                    .position
                    .handed_out(incoming.id, incoming.batch_size);
                self.next_sub = (index + 1) % n;
                self.run_actions(index).await;
                let message = incoming.message;
                return Some(match message.unreadable() {
                    None => Ok(message),
                    Some(reason) => {
                        warn!(topic = %message.topic(), id = %message.id(), %reason, "message not handed out; left unacked");
                        Err(ConsumerError::Unreadable {
                            topic: message.topic().to_owned(),
                            id: message.id(),
                            reason,
                        })
                    }
                });
            }
        }
        // Finding every queue empty may let a coalesced rewind go out.
        for index in 0..n {
            self.run_actions(index).await;
        }
        None
    }

    async fn on_event(&mut self, index: usize, generation: u64, event: ConsumerEvent) {
        let now = self.core_now();
        let Some(sub) = self.subs.get_mut(index) else {
            return;
        };
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
                let Some((message_id, payload)) = self
                    .assemble(index, message_id, consumer_epoch, payload)
                    .await
                else {
                    return; // a chunk of a message still incomplete
                };
                let sub = &mut self.subs[index];
                // What the broker counted against the permits.
                let permits = payload.metadata.num_messages_in_batch.unwrap_or(1).max(1) as u32;
                let max_size = chunks::decompress_limit(sub.conn.max_receive_size(), &payload);
                let delivery = Delivery {
                    topic: &sub.name,
                    partition: sub.partition,
                    message_id,
                    redelivery_count,
                    ack_set: &ack_set,
                    payload,
                    max_size,
                    crypto: self.settings.crypto_failure_action,
                };
                let lost_permits = match receive::unpack(delivery) {
                    Ok(mut unpacked) => {
                        sub.position.retain(&mut unpacked);
                        // Members skipped (acked, or before the start), or
                        // a batch kept whole (undecoded).
                        let lost = permits.saturating_sub(unpacked.messages.len() as u32);
                        for message in unpacked.messages {
                            let incoming = Incoming {
                                id: message.0.id,
                                redelivery_count,
                                consumer_epoch,
                                batch_size: unpacked.batch_size,
                                message,
                            };
                            if let Err(e) = sub.core.on_message(now, incoming) {
                                warn!(topic = %sub.name, error = %e, "message refused by the consumer core");
                            }
                        }
                        if let Some(size) = unpacked.batch_size {
                            sub.core
                                .on_skipped_members(unpacked.entry, size, &unpacked.skipped);
                        }
                        lost
                    }
                    Err(e) => {
                        // Never handed out: reported to the broker (see receive.rs).
                        warn!(topic = %sub.name, error = %e, "dropping an invalid entry");
                        let invalid = commands::ack_invalid(sub.id, e.id(), e.validation_error());
                        let _ = sub.conn.send_control(invalid).await;
                        permits
                    }
                };
                if lost_permits > 0 {
                    // Members that never reach the core: their permits go
                    // straight back to the broker.
                    let _ = sub
                        .conn
                        .send_control(commands::flow(sub.id, lost_permits))
                        .await;
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
                self.reconnect(index, Some(hint)).await;
            }
            ConsumerEvent::ConnectionLost(e) => {
                debug!(topic = %sub.name, error = %e, "connection lost");
                self.reconnect(index, None).await;
            }
        }
    }
}
