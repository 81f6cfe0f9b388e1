//! Subscribing: to every partition at the start, again after the broker
//! closed the consumer or the connection died, and detaching at the end.
//!
//! Subscribing again runs in the background ([`Resubscribes`], polled by the
//! driver's loop), so receive, ack and close keep working meanwhile: one
//! attempt at a time per partition, a fresh consumer id each time, the
//! shared backoff of `crate::backoff` (100 ms doubling to 60 s, jittered;
//! it starts over only after a subscription that delivered messages or
//! lived 10 s, so a broker that closes every new subscription at once is
//! not asked again every 100 ms) and no limit on attempts while the
//! consumer is open. Only a final refusal (topic or subscription gone, not allowed)
//! gives a partition up: the next receiver gets [`ConsumerError::Lost`]
//! for it once, and once all are given up, every receiver does. A
//! SUBSCRIBE that times out, or whose `subscribe()` is dropped half-way, is
//! followed by CLOSE_CONSUMER for its id (and a dropped `subscribe()` closes
//! what it already made), so a late success holds nothing on the broker.

use super::resubscribe::{Attached, Resubscribes, close_orphan};
use super::*;
use crate::connection::ConnectionError;

/// The partitions behind `topics` (a topic with no partitions is itself).
pub(crate) async fn expand(
    client: &Client,
    topics: Vec<TopicName>,
) -> Result<Vec<TopicName>, ConsumerError> {
    let mut out = Vec::new();
    for topic in topics {
        let n = client
            .partitioned_topic_metadata(&topic)
            .await
            .map_err(|source| ConsumerError::Client {
                topic: topic.as_str().to_owned(),
                source,
            })?;
        if n == 0 {
            out.push(topic);
        } else {
            out.extend((0..n).map(|i| topic.partition(i)));
        }
    }
    Ok(out)
}

/// Registers a fresh consumer id on `conn` and subscribes it.
pub(super) async fn subscribe_on(
    conn: Connection,
    options: &SubscribeOptions,
    name: &str,
    epoch: u64,
) -> Result<Attached, ConsumerError> {
    let request_failed = |source| ConsumerError::Request {
        op: "SUBSCRIBE",
        topic: name.to_owned(),
        source,
    };
    // A fresh id per attempt: a broker may still hold an old one.
    let id = conn.next_consumer_id();
    let (tx, rx) = mpsc::unbounded_channel();
    conn.register_consumer(id, tx)
        .await
        .map_err(request_failed)?;
    // Armed while the SUBSCRIBE may still succeed on the broker unseen:
    // after a timeout, or when this future is dropped half-way.
    let mut orphan = OrphanGuard {
        conn: Some(conn.clone()),
        id,
    };
    let answer = conn
        .request("SUBSCRIBE", |request| {
            commands::subscribe(options.body(name, id, request, Some(epoch)))
        })
        .await;
    match answer {
        Ok(Response::Success(_)) => {}
        Err(e @ ConnectionError::Timeout { .. }) => return Err(request_failed(e)),
        Ok(other) => {
            orphan.conn = None;
            conn.unregister_consumer(id).await;
            return Err(ConsumerError::UnexpectedResponse {
                op: "SUBSCRIBE",
                topic: name.to_owned(),
                got: other.kind(),
            });
        }
        Err(e) => {
            orphan.conn = None;
            conn.unregister_consumer(id).await;
            return Err(request_failed(e));
        }
    }
    orphan.conn = None;
    debug!(topic = name, consumer = id.0, "subscribed");
    Ok((conn, id, rx))
}

/// The subscriptions a `subscribe()` made so far: closed in the background
/// if it is dropped before it finished (emptied once it did).
struct SubscribedGuard(Vec<(Connection, ConsumerId)>);

impl Drop for SubscribedGuard {
    fn drop(&mut self) {
        let made = std::mem::take(&mut self.0);
        if made.is_empty() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for (conn, id) in made {
                    close_orphan(&conn, id).await;
                }
            });
        }
    }
}

/// A subscription the broker may make without the consumer knowing (its
/// SUBSCRIBE timed out, or its caller went away): while armed (`conn` set),
/// dropping it closes consumer `id` on `conn` in the background, after the
/// late SUBSCRIBE on the same connection, so it holds nothing on the broker
/// (an Exclusive subscription least of all).
struct OrphanGuard {
    conn: Option<Connection>,
    id: ConsumerId,
}

impl Drop for OrphanGuard {
    fn drop(&mut self) {
        let (Some(conn), id) = (self.conn.take(), self.id) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { close_orphan(&conn, id).await });
        }
    }
}

impl Driver {
    /// Subscribes to every topic (partition); on a failure, closes those
    /// already subscribed and returns the error.
    /// `listing` is a pattern consumer's first listing of its namespace;
    /// `topics` hears of the topics read as they change.
    pub(crate) async fn subscribe(
        settings: Settings,
        topics: Vec<TopicName>,
        listing: Option<crate::client::TopicListing>,
        activity: watch::Sender<Activity>,
        names: watch::Sender<Arc<TopicsRead>>,
    ) -> Result<Self, ConsumerError> {
        let discovery =
            discover::Discovery::new(settings.discovery.clone(), &topics, listing, clock::now());
        let observers = shelf::Observers {
            stats: settings.stats.clone(),
            letters: settings.forwards.letters().cloned(),
            interceptors: settings.interceptors.clone(),
        };
        let budget = settings.client.queue_memory().clone();
        let shelf = Arc::new(shelf::Shelf::new(budget.clone(), observers, &settings.core));
        let queue_sizes = settings.queue_sizes(&topics);
        let mut driver = Self {
            settings,
            subs: Vec::with_capacity(topics.len()),
            events: Events::default(),
            waiting: VecDeque::new(),
            shelf,
            activity,
            resubscribes: Resubscribes::default(),
            ack_tokens: 0,
            ack_flights: acks::Flights::default(),
            lost_reports: VecDeque::new(),
            discovery,
            topics: names,
            batches: VecDeque::new(),
            memory: super::memory::MemoryShare::new(budget),
            closed_on_batch: None,
            next_key: 0,
            removed_to_free: false,
        };
        // If this future is dropped half-way, what it subscribed is closed.
        let mut made = SubscribedGuard(Vec::new());
        for (topic, receiver_queue_size) in topics.into_iter().zip(queue_sizes) {
            let core = ConsumerCore::new(CoreConfig {
                receiver_queue_size,
                ..driver.settings.core.clone()
            })?;
            let index = driver.subs.len();
            match driver.attach(&topic, core.consumer_epoch()).await {
                Ok((conn, id, rx)) => {
                    let start = driver.settings.options.start_message_id;
                    driver.add_sub(topic, conn, id, core, start);
                    driver.listen(index, 0, rx);
                }
                Err(e) => {
                    made.0.clear();
                    driver.close_all().await;
                    return Err(e);
                }
            }
            let sub = &driver.subs[index];
            made.0.push((sub.conn.clone(), sub.id));
            let now = clock::now();
            driver.shelf.lock().slots[index].core.on_subscribed(now);
            driver.run_actions(index).await;
        }
        made.0.clear();
        driver.publish_topics();
        Ok(driver)
    }

    /// Adds a sub for `topic`, subscribed as consumer `id` on `conn`,
    /// reading from `start` (a reader's start id), and its slot on the shelf.
    pub(super) fn add_sub(
        &mut self,
        topic: TopicName,
        conn: Connection,
        id: ConsumerId,
        core: ConsumerCore<Message>,
        start: Option<MessageId>,
    ) {
        let track = core.config().track_messages;
        let name: Arc<str> = topic.as_str().into();
        self.shelf.lock().slots.push(shelf::Slot {
            name: name.clone(),
            core,
            position: Position::new(start, self.settings.options.start_inclusive, !track),
            removed: false,
        });
        let key = SubKey(self.next_key);
        self.next_key += 1;
        self.subs.push(Sub {
            key,
            name,
            partition: topic.partition_index().map_or(-1, |p| p as i32),
            topic,
            conn,
            id,
            generation: 0,
            chunks: if track {
                ChunkAssembler::new(self.settings.chunks)
            } else {
                ChunkAssembler::forgetting(self.settings.chunks)
            },
            grouped: Vec::new(),
            flush_at: None,
            acks: Default::default(),
            subscribed_at: clock::now(),
            delivered: false,
            lost: false,
            left_behind: false,
            removed: false,
        });
    }

    /// Looks `topic` up, registers a fresh consumer id and subscribes; a
    /// failure that may pass (a cut connection, a broker not ready) is
    /// tried again until the operation timeout.
    async fn attach(&self, topic: &TopicName, epoch: u64) -> Result<Attached, ConsumerError> {
        let name = topic.as_str();
        let client = &self.settings.client;
        let attempt = || async {
            let conn = client
                .lookup(topic)
                .await
                .map_err(|source| ConsumerError::Client {
                    topic: name.to_owned(),
                    source,
                })?;
            subscribe_on(conn, &self.settings.options, name, epoch).await
        };
        client
            .retry_passing(
                topic,
                "SUBSCRIBE",
                attempt,
                ConsumerError::is_passing_at_creation,
            )
            .await
    }

    /// Reads `rx`, the mailbox of sub `index`'s subscription of
    /// `generation`, with the other subs' events.
    pub(super) fn listen(
        &mut self,
        index: usize,
        generation: u64,
        mut rx: mpsc::UnboundedReceiver<ConsumerEvent>,
    ) {
        // A mailbox that ends without a word (the connection's task
        // panicked) ends as a lost connection: the partition subscribes
        // again instead of waiting forever. After a reconnect or a seek the
        // generation has moved on and this is ignored.
        let ended = ConsumerEvent::ConnectionLost(ConnectionError::Closed);
        let key = self.subs[index].key;
        let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
            .chain(futures::stream::once(std::future::ready(ended)))
            .map(move |event| (key, generation, event));
        self.events.push(Box::pin(stream));
    }

    /// Closes every subscription (best effort: a dead connection has closed
    /// it already) and fails the waiting receivers.
    pub(super) async fn close_all(&mut self) {
        self.detach_all(true).await;
    }

    /// Before a close: acks still to send wait (bounded by the operation
    /// timeout) for a partition that subscribes again, so they go out under
    /// its new consumer id; then ACK requests in flight get their answers.
    pub(super) async fn deliver_pending_acks(&mut self) {
        let waiting = self.subs.iter().enumerate().any(|(index, sub)| {
            self.resubscribes.is_running(index)
                && !sub.lost
                && !sub.removed
                && (!sub.grouped.is_empty()
                    || !sub.acks.is_empty()
                    || self.shelf.lock().slots[index].core.has_queued_acks())
        });
        if waiting {
            if let Err(e) = self.settle_resubscribes("ACK").await {
                debug!(error = %e, "acks not sent before the close");
            }
        }
        self.settle_acks().await;
    }

    /// The error for sub `index` once it lost its subscription for good.
    pub(super) fn lost_error(&self, index: usize) -> ConsumerError {
        ConsumerError::Lost {
            topic: self.subs[index].name.to_string(),
            attempts: self.resubscribes.attempts(index),
        }
    }

    /// Stops routing to every consumer, after CLOSE_CONSUMER if `close`
    /// (not after UNSUBSCRIBE: pulsar-lite answers a command for an unknown
    /// consumer by closing the whole shared connection).
    pub(super) async fn detach_all(&mut self, close: bool) {
        // A subscribe under way takes at most the operation timeout, and
        // so does closing what it made.
        let limit = self.settings.client.operation_timeout().saturating_mul(2);
        self.resubscribes.shut(limit).await;
        for index in 0..self.subs.len() {
            self.flush_acks(index).await;
        }
        // Every partition at once: against a broker that does not answer,
        // closing takes one operation timeout, not one per partition.
        let detaching = self
            .subs
            .iter()
            .enumerate()
            // Nothing registered on the broker or the connection for these.
            .filter(|(index, sub)| {
                !(self.resubscribes.is_running(*index) || sub.lost || sub.removed)
            })
            .map(|(_, sub)| async move {
                if close {
                    let _ = sub.conn.close_consumer(sub.id).await;
                } else {
                    sub.conn.unregister_consumer(sub.id).await;
                }
            });
        futures::future::join_all(detaching).await;
        for sub in &mut self.subs {
            let topic = sub.name.to_string();
            sub.acks.fail_all(|| ConsumerError::AckNotSent {
                topic: topic.clone(),
            });
        }
        for reply in self.waiting.drain(..) {
            let _ = reply.send(Err(ConsumerError::Closed));
        }
    }
}
