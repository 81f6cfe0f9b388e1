//! The driver: its state per subscribed topic or partition, and the loop
//! that takes the handle's commands, the broker's events, the outcomes
//! of forwards, acks and subscribe attempts, and the one timer.

use std::task::Poll;

use super::*;

/// Commands taken from the handle's queue in one turn of the task's loop,
/// after the first.
const COMMANDS_PER_TURN: usize = 64;

/// Broker events taken in one turn of the task's loop, after the first:
/// a read from the socket brings dozens of messages at once, and the
/// turn's fixed work (the timer's deadline, the hand-over, the memory
/// budget, the shelf's state) is done once for them.
const EVENTS_PER_TURN: usize = 64;

/// One subscribed topic or partition.
pub(super) struct Sub {
    /// Names it for what comes back to the loop later (see leave.rs).
    pub(super) key: SubKey,
    pub(super) topic: TopicName,
    pub(super) name: Arc<str>,
    pub(super) partition: i32,
    pub(super) conn: Connection,
    pub(super) id: ConsumerId,
    /// Bumped per subscribe, so events from an older mailbox are ignored.
    pub(super) generation: u64,
    /// Chunks of messages being assembled, and the chunk ids of those
    /// handed out.
    pub(super) chunks: ChunkAssembler,
    /// Individual acks held for one grouped ACK frame, and when it goes.
    pub(super) grouped: Vec<crate::proto::MessageIdData>,
    pub(super) flush_at: Option<std::time::Instant>,
    /// Acks someone waits for (with receipts), and ACKs to send again.
    pub(super) acks: acks::AckWaiters,
    /// When the current subscription was made, and whether it delivered
    /// anything: the backoff starts over after one that lived well or did.
    pub(super) subscribed_at: std::time::Instant,
    pub(super) delivered: bool,
    /// Gave up subscribing again; receivers fail once every sub is lost.
    pub(super) lost: bool,
    /// Given up while its subscription stays on the broker (the broker
    /// did not say the topic or the subscription is gone): an unsubscribe
    /// cannot remove it.
    pub(super) left_behind: bool,
    /// Its topic is gone (deleted, or no longer matched by the pattern):
    /// closed, and freed at the end of the loop's turn (see leave.rs).
    pub(super) removed: bool,
}

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
    pub(crate) crypto_failure_action: crate::consumer::crypto::CryptoFailureAction,
    /// Bounds on the chunked messages being assembled.
    pub(crate) chunks: ChunkLimits,
    /// Dead-letter forwards: where they go, and those in flight.
    pub(crate) forwards: Forwards,
    /// New partitions, and a pattern's topics that come and go.
    pub(crate) discovery: discover::DiscoverySettings,
    /// The bound on the receiver queues of one partitioned topic's partitions together.
    pub(crate) max_total_receiver_queue_size: u32,
    /// What a batch receive waits for.
    pub(crate) batch_receive: crate::consumer::batch_receive::BatchReceivePolicy,
    /// Where deliveries and answers are counted.
    pub(crate) stats: Arc<ConsumerRecorder>,
    /// Told of every message handed out and of the answers to it.
    pub(crate) interceptors: Chain<dyn ConsumerInterceptor>,
}

impl Settings {
    /// The receiver queue of each of `topics`: a partition gets its share
    /// of the total across the partitions of its topic in `topics`.
    pub(super) fn queue_sizes(&self, topics: &[TopicName]) -> Vec<u32> {
        let mut partitions: HashMap<String, u32> = HashMap::new();
        let bases: Vec<Option<String>> = topics
            .iter()
            .map(|t| t.partition_index().map(|_| t.base().as_str().to_owned()))
            .collect();
        for base in bases.iter().flatten() {
            *partitions.entry(base.clone()).or_default() += 1;
        }
        let queue = self.core.receiver_queue_size;
        bases
            .iter()
            .map(|base| match base {
                None => queue,
                Some(base) => crate::consumer::core::config::partition_queue_size(
                    queue,
                    self.max_total_receiver_queue_size,
                    partitions[base],
                ),
            })
            .collect()
    }
}

pub(crate) struct Driver {
    pub(super) settings: Settings,
    pub(super) subs: Vec<Sub>,
    pub(super) events: Events,
    pub(super) waiting: VecDeque<Reply<Message>>,
    /// Each sub's core and position, shared with the handles (see shelf.rs).
    pub(super) shelf: Arc<shelf::Shelf>,
    pub(super) activity: watch::Sender<Activity>,
    /// Subscribe attempts after a lost subscription (see resubscribe.rs).
    pub(super) resubscribes: resubscribe::Resubscribes,
    /// ACK requests: the next flight's token, and the flights waiting for
    /// their answers, polled here (not spawned) so a reconnect can take
    /// the answers that came before it (see acks.rs).
    pub(super) ack_tokens: u64,
    pub(super) ack_flights: acks::Flights,
    /// Partitions given up for good while others go on, and unreadable
    /// messages a batch ended before: each is reported once, to the next
    /// receiver.
    pub(super) lost_reports: VecDeque<ConsumerError>,
    /// Partitions added, topics created and deleted (see discover.rs).
    pub(super) discovery: discover::Discovery,
    /// The topics read now, as the handles see them.
    pub(super) topics: watch::Sender<Arc<TopicsRead>>,
    /// Batch receives waiting to be due.
    pub(super) batches: VecDeque<batch::PendingBatch>,
    /// The queues' share of the client's memory limit.
    pub(super) memory: memory::MemoryShare,
    /// Zero queue: the batch that closed the consumer (topic, entry id).
    pub(super) closed_on_batch: Option<(String, MessageId)>,
    /// The key the next sub gets.
    pub(super) next_key: u64,
    /// Subs were removed this turn: freed at its end.
    pub(super) removed_to_free: bool,
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
    ///
    /// (An async block rather than an async fn: an async fn's future
    /// holds the driver twice, as its argument and as the body's local.)
    #[allow(clippy::manual_async_fn)] // see above: the block is the point
    pub(crate) fn run(
        self,
        mut commands: mpsc::UnboundedReceiver<Box<Command>>,
        ended: Arc<std::sync::atomic::AtomicBool>,
    ) -> impl Future<Output = ()> + Send {
        // Ended any other way than by its loop, the broker is told.
        let mut driver = close_on_drop::CloseSubscriptionsOnDrop::new(self);
        async move {
            // Handles waiting on the shelf are woken however the task ends.
            let _close = shelf::CloseOnDrop(driver.shelf.clone());
            driver.serve_until_stopped(&mut commands).await;
            driver.disarm();
            driver.shelf.lock().held.release_all();
            ended.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// The task's loop; ends after Close or Unsubscribe, or when every
    /// handle is gone (then it closes the consumer).
    async fn serve_until_stopped(&mut self, commands: &mut mpsc::UnboundedReceiver<Box<Command>>) {
        // One timer for the task's life, moved only when the earliest
        // deadline changes (a fresh `Sleep` per loop turn would register and
        // remove a timer-wheel entry for every message).
        let timer = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(timer);
        let mut armed: Option<std::time::Instant> = None;
        loop {
            let deadline = {
                let shelved = self.shelf.lock();
                let cores = shelved.slots.iter().map(|s| s.core.next_deadline());
                self.subs
                    .iter()
                    .flat_map(|s| [s.flush_at, s.chunks.next_deadline()])
                    .chain(cores)
                    .chain([self.discovery.next_deadline()])
                    .flatten()
                    .chain(self.batch_deadline())
                    .min()
            };
            if deadline != armed {
                if let Some(at) = deadline {
                    timer.as_mut().reset(at.into());
                }
                armed = deadline;
            }
            tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => {
                        if self.take_command(*command, commands).await {
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
                            if self.take_command(*command, commands).await {
                                return;
                            }
                        }
                    }
                    None => {
                        Box::pin(self.shut_down()).await;
                        return;
                    }
                },
                Some((key, generation, event)) = self.events.next() => {
                    self.on_event(key, generation, event).await;
                    for _ in 0..EVENTS_PER_TURN {
                        // Polled with the task's waker, as by `select!`.
                        let Poll::Ready(Some((key, generation, event))) =
                            futures::poll!(self.events.next())
                        else {
                            break;
                        };
                        self.on_event(key, generation, event).await;
                    }
                }
                Some(forwarded) = self.settings.forwards.done.recv() => {
                    self.on_forwarded(forwarded).await;
                }
                Some(landed) = self.ack_flights.next(), if !self.ack_flights.is_empty() => {
                    self.ack_landed(landed);
                }
                () = self.shelf.work.notified() => self.run_touched().await,
                outcome = self.resubscribes.next() => Box::pin(self.resubscribed(outcome)).await,
                signal = self.discovery.next() => Box::pin(self.on_discovery(signal)).await,
                () = self.memory.room() => {}
                () = &mut timer, if armed.is_some() => {
                    // Set again next turn, even if the deadline stays.
                    armed = None;
                    let now = clock::now();
                    for index in 0..self.subs.len() {
                        self.shelf.lock().slots[index].core.on_tick(now);
                        self.observe_ack_timeouts(index);
                        self.expire_chunks(index, now);
                        self.run_actions(index).await;
                        if self.subs[index].flush_at.is_some_and(|at| at <= now) {
                            self.flush_acks(index).await;
                        }
                    }
                    self.discover(now);
                }
            }
            self.serve().await;
            self.balance_memory().await;
            self.open_shelf();
            self.free_removed();
        }
    }

    /// The shelf, for the handles.
    pub(crate) fn shelf(&self) -> Arc<shelf::Shelf> {
        self.shelf.clone()
    }

    /// Closes the consumer: what handles left in the cores, dead-letter
    /// forwards and acks still to send go out first.
    async fn shut_down(&mut self) {
        self.run_touched().await;
        self.discovery.shut();
        self.settle_forwards().await;
        self.deliver_pending_acks().await;
        self.close_all().await;
        self.settings.forwards.close().await;
    }

    /// Carries out the actions handles left in the cores.
    async fn run_touched(&mut self) {
        for index in self.shelf.touched() {
            self.run_actions(index).await;
        }
    }

    /// Lets the handles take directly while no receiver, batch receive
    /// or report waits here (see shelf.rs).
    fn open_shelf(&mut self) {
        let open = self.waiting.is_empty()
            && self.batches.is_empty()
            && self.lost_reports.is_empty()
            && self.closed_on_batch.is_none()
            && self.settings.core.receiver_queue_size > 0
            && self.all_lost().is_none();
        self.shelf.set_open(open);
    }

    /// Carries out a handle's command, a close with the commands still
    /// queued (see [`Self::close`]); returns true when the task should stop.
    async fn take_command(
        &mut self,
        command: Command,
        commands: &mut mpsc::UnboundedReceiver<Box<Command>>,
    ) -> bool {
        match command {
            Command::Close(reply) => {
                Box::pin(self.close(reply, commands)).await;
                true
            }
            other => self.on_command(other).await,
        }
    }

    /// Closes the consumer. From now on the handles can neither take nor
    /// ack on the shelf nor queue a command: each such call fails with
    /// [`ConsumerError::Closed`]. What they did before goes out first: the
    /// acks, nacks and leases already queued are carried out (the calls
    /// that queued them were answered, or are waiting), and the rest is
    /// answered `Closed`; then [`Self::shut_down`] sends the acks and
    /// closes the subscriptions. An ack answered `Ok` thus reaches the
    /// broker before its consumer closes.
    async fn close(
        &mut self,
        reply: Reply<()>,
        commands: &mut mpsc::UnboundedReceiver<Box<Command>>,
    ) {
        self.shelf.closing();
        commands.close();
        let mut closers = vec![reply];
        while let Ok(command) = commands.try_recv() {
            match *command {
                Command::Close(reply) => closers.push(reply),
                command @ (Command::Ack { .. }
                | Command::AckAll(_)
                | Command::AckInTxn { .. }
                | Command::Nack { .. }
                | Command::Lease { .. }) => {
                    self.on_command(command).await;
                }
                other => {
                    other.refuse(|| ConsumerError::Closed);
                    self.shelf.command_done();
                }
            }
        }
        self.shut_down().await;
        for reply in closers {
            let _ = reply.send(Ok(()));
        }
    }

    /// Carries out a handle's command; returns true when the task should
    /// stop. Actions the handles left in the cores go first, so an ack
    /// recorded before the command goes out before it.
    async fn on_command(&mut self, command: Command) -> bool {
        self.run_touched().await;
        let stop = self.on_command_in_order(command).await;
        if !stop {
            self.open_shelf();
        }
        self.shelf.command_done();
        stop
    }

    async fn on_command_in_order(&mut self, command: Command) -> bool {
        match command {
            Command::Receive(reply) => self.waiting.push_back(reply),
            Command::ReceiveBatch(reply) => self.receive_batch(reply),
            Command::AckAll(acks) => self.ack_all(acks).await,
            Command::TryReceive(reply) => {
                if let Some(lost) = self.report_for_next_receiver() {
                    let _ = reply.send(Err(lost));
                    return false;
                }
                let answer = match (self.pop(self.shelf.core_now()).await, self.all_lost()) {
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
            } => {
                if let Some(index) = self
                    .record_ack(&topic, id, batch_size, cumulative, reply)
                    .await
                {
                    self.run_actions(index).await;
                }
            }
            Command::AckInTxn {
                topic,
                id,
                batch_size,
                cumulative,
                txn,
                on_end,
                reply,
            } => {
                let ack = txn_acks::TxnAck {
                    id,
                    batch_size,
                    cumulative,
                    txn,
                    on_end,
                };
                Box::pin(self.ack_in_txn(&topic, ack, reply)).await;
            }
            Command::Nack {
                topic,
                id,
                redelivery_count,
            } => {
                if let Some(index) = self.find(&topic) {
                    self.observe_nack(&topic, id);
                    self.shelf.lock().slots[index].core.nack(
                        clock::now(),
                        held_at(id, false),
                        redelivery_count,
                    );
                    self.run_actions(index).await;
                }
            }
            Command::Lease {
                topic,
                id,
                max_total,
            } => {
                if let Some(index) = self.find(&topic) {
                    let mut shelved = self.shelf.lock();
                    let core = &mut shelved.slots[index].core;
                    match max_total {
                        Some(max_total) => core.lease(clock::now(), id, max_total),
                        None => core.release(id),
                    }
                }
            }
            Command::Seek(target, reply) => {
                let _ = reply.send(Box::pin(self.seek(target)).await);
            }
            Command::LastMessageId(reply) => {
                let _ = reply.send(Box::pin(self.last_message_id()).await);
            }
            Command::HasMessageAvailable(reply) => {
                let _ = reply.send(Box::pin(self.has_message_available()).await);
            }
            Command::Unsubscribe(reply) => {
                let result = Box::pin(self.unsubscribe()).await;
                let done = result.is_ok();
                if done {
                    self.shelf.closing();
                }
                let _ = reply.send(result);
                if done {
                    self.discovery.shut();
                    // The broker removed the consumers with the subscription.
                    Box::pin(self.detach_all(false)).await;
                    self.settings.forwards.close().await;
                    return true;
                }
            }
            Command::Close(reply) => {
                // `take_command` and `close` take every Close first: it
                // never comes here (nothing is left to close if it did).
                let _ = reply.send(Err(ConsumerError::Closed));
            }
        }
        false
    }

    /// The sub reading `topic` now (not one whose topic is gone).
    pub(super) fn find(&self, topic: &str) -> Option<usize> {
        self.subs
            .iter()
            .position(|s| &*s.name == topic && !s.removed)
    }

    /// Acks the message the application holds as `id` (of `topic`; see
    /// [`held_at`]); with receipts, `reply` waits for the ACK
    /// that covers it (see `acks.rs`; a batch member's ack whose batch is
    /// not complete is answered once recorded), otherwise it is answered
    /// once the ack is handed to the core, which keeps it until it can be
    /// sent.
    /// Returns the sub whose core now has actions to run.
    pub(super) async fn record_ack(
        &mut self,
        topic: &str,
        id: MessageId,
        batch_size: Option<u32>,
        cumulative: bool,
        reply: Option<Reply<()>>,
    ) -> Option<usize> {
        let answer = |reply: Option<Reply<()>>, error| {
            if let Some(reply) = reply {
                let _ = reply.send(Err(error));
            }
        };
        let Some(index) = self.find(topic) else {
            if self.topics.borrow().has_left(topic) {
                // Its topic is gone: nothing left to ack.
                if let Some(reply) = reply {
                    let _ = reply.send(Ok(()));
                }
                return None;
            }
            let error = ConsumerError::ForeignMessage {
                topic: topic.to_owned(),
            };
            answer(reply, error);
            return None;
        };
        let (acked, queued) = {
            let mut shelved = self.shelf.lock();
            let now = self.shelf.core_now();
            let core = &mut shelved.slots[index].core;
            let held = held_at(id, cumulative);
            let acked = if cumulative {
                match core.ack_cumulative_with_batch_size(now, held, batch_size) {
                    Ok(acked) => acked,
                    Err(refused) => {
                        drop(shelved);
                        answer(reply, refused.into());
                        return None;
                    }
                }
            } else {
                core.ack_with_batch_size(now, held, batch_size)
            };
            (acked, core.has_queued_acks())
        };
        self.observe_ack(topic, id, cumulative);
        let sub = &mut self.subs[index];
        if let Some(reply) = reply {
            match acked {
                _ if !self.settings.ack_receipts => {
                    let _ = reply.send(Ok(()));
                }
                _ if sub.lost => {
                    let _ = reply.send(Err(self.lost_error(index)));
                    return None;
                }
                Acked::Queued => sub.acks.next.push(reply),
                // A cumulative ack up to a member of an entry not complete
                // yet went out up to the entry before: confirmed with it.
                Acked::AwaitingBatch { .. } if cumulative && queued => sub.acks.next.push(reply),
                // A member of a batch not complete yet: recorded, and its
                // entry's ack goes with the batch's last member's (as the
                // Java client: it never waits on acks not made yet).
                Acked::AwaitingBatch { entry } => {
                    trace!(topic, %entry, "member ack recorded until its batch is complete");
                    let _ = reply.send(Ok(()));
                }
                // Held back by the chunk gate with no ACK in its place:
                // recorded, as a batch member's is (waiting here could wait
                // on the application's own next receive).
                Acked::HeldBack => {
                    trace!(topic, %id, "cumulative ack held until a chunked message is handed out");
                    let _ = reply.send(Ok(()));
                }
                Acked::Unrecorded => {
                    let _ = reply.send(Err(ConsumerError::AckNotSent {
                        topic: topic.to_owned(),
                    }));
                }
            }
        }
        Some(index)
    }
}
