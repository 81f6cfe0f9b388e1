//! Topics that change under a consumer: partitions added to a partitioned
//! topic, and for a pattern consumer, topics created and deleted in its
//! namespace.
//!
//! The IO runs in background jobs, one at a time, whose findings come back
//! through the driver's loop ([`Found`]), so receive, ack and close keep
//! working meanwhile:
//! - every `partitions_every` (60 s by default) PARTITIONED_METADATA for
//!   each partitioned topic followed; no check while none is partitioned.
//!   A count that shrank, or an error, is logged and ignored;
//! - every `pattern_every` (60 s) GET_TOPICS_OF_NAMESPACE with the last
//!   topics hash (the broker lists nothing when it is still the same), and
//!   where the broker supports it a topic-list watcher (WATCH_TOPIC_LIST)
//!   whose WATCH_TOPIC_UPDATEs are taken at once;
//! - new partitions and new topics are subscribed from the earliest message
//!   (everything in them was published after the consumer subscribed) and
//!   become subs at the end of the driver's list; a deleted topic's subs
//!   are closed, and freed at the end of the loop's turn (see leave.rs).

use std::collections::{BTreeSet, HashSet};

use super::attach::subscribe_on;
use super::resubscribe::{Attached, close_orphan};
use super::*;
use crate::client::{ClientError, TopicListing};
use crate::connection::TopicListEvent;
use crate::consumer::pattern::{RegexSubscriptionMode, TopicsPattern};
use crate::ids::WatcherId;

/// The default interval of both checks, as Java's
/// `autoUpdatePartitionsInterval` and `patternAutoDiscoveryPeriod`.
pub(crate) const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(60);

/// How a consumer follows topics that change (from the builder).
#[derive(Debug, Clone)]
pub(crate) struct DiscoverySettings {
    /// How often partitioned topics are checked for new partitions (`None`: never).
    pub(crate) partitions_every: Option<Duration>,
    /// A pattern consumer's pattern, and how often it lists its namespace.
    pub(crate) pattern: Option<(TopicsPattern, Duration)>,
}

/// A topic-list watcher the broker accepted.
pub(super) struct Watching {
    conn: Connection,
    id: WatcherId,
    events: mpsc::UnboundedReceiver<TopicListEvent>,
    /// The topics matched now; `None` when the hash asked with is still
    /// the broker's (it lists nothing then).
    topics: Option<Vec<String>>,
    hash: String,
}

/// What a background job found.
pub(super) enum Found {
    /// A listing, asked when the consumer's list was at `version`.
    Listing {
        version: u64,
        listing: Result<TopicListing, ClientError>,
    },
    /// `Ok(None)`: the broker has no topic-list watchers.
    Watching(Result<Option<Watching>, ClientError>),
    Subscribed {
        counts: Vec<(TopicName, Result<u32, ClientError>)>,
        added: Vec<(TopicName, Result<Attached, ConsumerError>)>,
    },
}

/// What the loop hears from discovery.
pub(super) enum Signal {
    Found(Found),
    /// A job ended without a finding.
    Nothing,
    Watch(TopicListEvent),
}

pub(super) struct Discovery {
    settings: DiscoverySettings,
    /// Partition counts of the topics followed (0: not partitioned).
    counts: PartitionCounts,
    /// Pattern consumer: the names last listed, their hash, what matched.
    listed: BTreeSet<String>,
    hash: Option<String>,
    matched: BTreeSet<TopicName>,
    /// Counts the changes to `listed`: a listing asked before the last
    /// change (a watcher's update came meanwhile) is stale.
    version: u64,
    /// Topics to subscribe at the next chance, and after a failure at the
    /// next check.
    waiting: BTreeSet<TopicName>,
    retry: BTreeSet<TopicName>,
    next_partitions: Option<std::time::Instant>,
    next_listing: Option<std::time::Instant>,
    /// The background job running (one at a time), where its finding comes.
    job: Option<oneshot::Receiver<Found>>,
    watcher: Option<(Connection, WatcherId)>,
    watch_events: Option<mpsc::UnboundedReceiver<TopicListEvent>>,
    /// The broker said it has no watchers: poll only.
    no_watchers: bool,
}

/// Partition counts by topic, in a vector sorted by topic: a consumer of
/// one topic keeps one entry (120 bytes) where a map's first node takes
/// 1.3 KiB.
#[derive(Default)]
struct PartitionCounts(Vec<(TopicName, u32)>);

impl PartitionCounts {
    fn search(&self, topic: &TopicName) -> Result<usize, usize> {
        self.0.binary_search_by(|(t, _)| t.cmp(topic))
    }

    /// The count of `topic`, inserted as `n` if it has none.
    fn get_or_insert(&mut self, topic: TopicName, n: u32) -> &mut u32 {
        let i = self.search(&topic).unwrap_or_else(|i| {
            self.0.insert(i, (topic, n));
            i
        });
        &mut self.0[i].1
    }

    fn get(&self, topic: &TopicName) -> Option<u32> {
        self.search(topic).ok().map(|i| self.0[i].1)
    }

    fn contains(&self, topic: &TopicName) -> bool {
        self.search(topic).is_ok()
    }

    fn remove(&mut self, topic: &TopicName) {
        if let Ok(i) = self.search(topic) {
            self.0.remove(i);
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&TopicName, u32)> {
        self.0.iter().map(|(t, n)| (t, *n))
    }
}

impl Discovery {
    /// Discovery over the subscribed `topics` (partitions), the pattern's
    /// first listing `listing` for a pattern consumer.
    pub(super) fn new(
        settings: DiscoverySettings,
        topics: &[TopicName],
        listing: Option<TopicListing>,
        now: std::time::Instant,
    ) -> Self {
        let mut counts = PartitionCounts::default();
        for t in topics {
            let n = counts.get_or_insert(t.base(), 0);
            if t.partition_index().is_some() {
                *n += 1;
            }
        }
        counts.0.shrink_to_fit();
        let mut discovery = Self {
            counts,
            listed: BTreeSet::new(),
            hash: None,
            matched: BTreeSet::new(),
            version: 0,
            waiting: BTreeSet::new(),
            retry: BTreeSet::new(),
            next_partitions: None,
            next_listing: None,
            job: None,
            watcher: None,
            watch_events: None,
            no_watchers: false,
            settings,
        };
        if let (Some((pattern, every)), Some(listing)) = (&discovery.settings.pattern, listing) {
            discovery.matched = pattern.select(listing.topics.iter().map(String::as_str));
            discovery.listed = listing.topics.into_iter().collect();
            discovery.hash = listing.hash;
            // The first check tries a watcher at once, to hear of topics
            // made from now on.
            discovery.next_listing =
                Some(if pattern.mode == RegexSubscriptionMode::PersistentOnly {
                    now
                } else {
                    clock::after(now, *every)
                });
        }
        discovery.schedule_partitions(now);
        discovery
    }

    fn schedule_partitions(&mut self, now: std::time::Instant) {
        let partitioned = self.counts.iter().any(|(_, n)| n > 0) || !self.retry.is_empty();
        self.next_partitions = match self.settings.partitions_every {
            Some(every) if partitioned => Some(clock::after(now, every)),
            _ => None,
        };
    }

    /// When the next check is due; none while a job runs.
    pub(super) fn next_deadline(&self) -> Option<std::time::Instant> {
        if self.job.is_some() {
            return None;
        }
        match (self.next_partitions, self.next_listing) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next finding or watcher update (pending while there is none).
    pub(super) async fn next(&mut self) -> Signal {
        let (job, watch_events) = (&mut self.job, &mut self.watch_events);
        let found = async {
            match job {
                Some(finding) => finding.await,
                None => std::future::pending().await,
            }
        };
        let watch = async {
            match watch_events {
                Some(events) => events.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            found = found => {
                self.job = None;
                // A job that ended without a finding (it panicked) found
                // nothing; the next check runs as usual.
                found.map_or(Signal::Nothing, Signal::Found)
            }
            event = watch => Signal::Watch(event.unwrap_or(TopicListEvent::ConnectionLost(
                crate::connection::ConnectionError::Closed,
            ))),
        }
    }

    /// Stops the watcher, if any (in the background).
    pub(super) fn shut(&mut self) {
        self.watch_events = None;
        // Found but not taken: nothing may stay behind on the broker (a
        // job that finds later undoes its finding itself).
        if let Some(mut job) = self.job.take() {
            job.close();
            if let Ok(found) = job.try_recv() {
                tokio::spawn(discard(found));
            }
        }
        if let Some((conn, id)) = self.watcher.take() {
            tokio::spawn(close_watcher(conn, id));
        }
    }

    /// The new listing `names` (hash `hash`): returns the topics no longer
    /// matched; those newly matched wait to be subscribed.
    fn relist(&mut self, names: BTreeSet<String>, hash: Option<String>) -> Vec<TopicName> {
        let Some((pattern, _)) = &self.settings.pattern else {
            return Vec::new();
        };
        let matched = pattern.select(names.iter().map(String::as_str));
        let gone: Vec<TopicName> = self.matched.difference(&matched).cloned().collect();
        let new = matched.difference(&self.matched).cloned();
        self.waiting.extend(new);
        self.waiting.append(&mut self.retry);
        for t in &gone {
            self.counts.remove(t);
            self.waiting.remove(t);
        }
        self.matched = matched;
        self.listed = names;
        self.hash = hash;
        self.version += 1;
        gone
    }
}

impl Driver {
    /// Starts the check that is due at `now`, if no job runs.
    pub(super) fn discover(&mut self, now: std::time::Instant) {
        let d = &mut self.discovery;
        if d.job.is_some() {
            return;
        }
        if let (Some(at), Some((pattern, every))) = (d.next_listing, &d.settings.pattern) {
            if at <= now {
                d.next_listing = Some(clock::after(now, *every));
                let (client, pattern, hash, version) = (
                    self.settings.client.clone(),
                    pattern.clone(),
                    d.hash.clone(),
                    d.version,
                );
                let watch = d.watcher.is_none()
                    && !d.no_watchers
                    && pattern.mode == RegexSubscriptionMode::PersistentOnly;
                self.spawn_job(async move {
                    if watch {
                        Found::Watching(watch_topics(&client, &pattern, hash.as_deref()).await)
                    } else {
                        let listing = client.topics_of_namespace(
                            &pattern.namespace,
                            pattern.mode.wire(),
                            Some(&pattern.wire),
                            hash.as_deref(),
                        );
                        Found::Listing {
                            version,
                            listing: listing.await,
                        }
                    }
                });
                return;
            }
        }
        if d.next_partitions.is_some_and(|at| at <= now) {
            let bases: BTreeSet<TopicName> = d
                .counts
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(t, _)| t.clone())
                .chain(d.retry.iter().cloned())
                .collect();
            d.retry.clear();
            d.schedule_partitions(now);
            self.expand_and_subscribe(bases.into_iter().collect());
        }
    }

    fn spawn_job(&mut self, job: impl std::future::Future<Output = Found> + Send + 'static) {
        let (tx, finding) = oneshot::channel();
        self.discovery.job = Some(finding);
        tokio::spawn(async move {
            if let Err(found) = tx.send(job.await) {
                discard(found).await;
            }
        });
    }

    /// Looks up the partitions of `bases` and subscribes those not
    /// subscribed yet, from the earliest message.
    fn expand_and_subscribe(&mut self, bases: Vec<TopicName>) {
        if bases.is_empty() {
            return;
        }
        let subscribed: HashSet<String> = self
            .subs
            .iter()
            .filter(|s| !s.removed)
            .map(|s| s.name.to_string())
            .collect();
        let client = self.settings.client.clone();
        let options = self.settings.options_for_new_topics();
        self.spawn_job(async move {
            let mut counts = Vec::new();
            let mut added = Vec::new();
            for base in bases {
                let count = client.partitioned_topic_metadata(&base).await;
                let names: Vec<TopicName> = match &count {
                    Ok(0) => vec![base.clone()],
                    Ok(n) => (0..*n).map(|i| base.partition(i)).collect(),
                    Err(_) => Vec::new(),
                };
                counts.push((base, count));
                for name in names
                    .into_iter()
                    .filter(|n| !subscribed.contains(n.as_str()))
                {
                    let attached = match client.lookup(&name).await {
                        // A new core's epoch is 0.
                        Ok(conn) => subscribe_on(conn, &options, name.as_str(), 0).await,
                        Err(source) => Err(ConsumerError::Client {
                            topic: name.as_str().to_owned(),
                            source,
                        }),
                    };
                    added.push((name, attached));
                }
            }
            Found::Subscribed { counts, added }
        });
    }

    /// Takes what discovery reports.
    pub(super) async fn on_discovery(&mut self, signal: Signal) {
        match signal {
            Signal::Found(found) => self.on_found(found).await,
            Signal::Nothing => {}
            Signal::Watch(TopicListEvent::Update {
                added,
                deleted,
                hash,
            }) => {
                debug!(
                    added = added.len(),
                    deleted = deleted.len(),
                    "topic list update"
                );
                let mut names = self.discovery.listed.clone();
                names.extend(added);
                for d in &deleted {
                    names.remove(d);
                }
                let gone = self.discovery.relist(names, Some(hash));
                self.remove_topics(&gone);
            }
            Signal::Watch(TopicListEvent::ConnectionLost(e)) => {
                debug!(error = %e, "topic list watcher lost; watching again");
                self.discovery.watcher = None;
                self.discovery.watch_events = None;
                // At once, with the last hash: what changed meanwhile comes
                // with the answer. If that fails, at the next check.
                self.discovery.next_listing = Some(clock::now());
            }
        }
        let d = &mut self.discovery;
        if d.job.is_none() && !d.waiting.is_empty() {
            let bases = std::mem::take(&mut d.waiting).into_iter().collect();
            self.expand_and_subscribe(bases);
        }
    }

    async fn on_found(&mut self, found: Found) {
        match found {
            Found::Listing { version, .. } if version != self.discovery.version => {
                debug!("a topic list update came while listing; the listing is stale");
            }
            Found::Listing {
                listing: Ok(listing),
                ..
            } => {
                if listing.changed {
                    let gone = self
                        .discovery
                        .relist(listing.topics.into_iter().collect(), listing.hash);
                    self.remove_topics(&gone);
                } else {
                    let retry = std::mem::take(&mut self.discovery.retry);
                    self.discovery.waiting.extend(retry);
                }
            }
            Found::Listing {
                listing: Err(e), ..
            } => {
                warn!(error = %e, "listing the topics of the pattern failed; trying again at the next check");
            }
            Found::Watching(Ok(Some(w))) => {
                debug!(watcher = w.id.0, "watching the pattern's topics");
                self.discovery.watcher = Some((w.conn, w.id));
                self.discovery.watch_events = Some(w.events);
                if let Some(topics) = w.topics {
                    let gone = self
                        .discovery
                        .relist(topics.into_iter().collect(), Some(w.hash));
                    self.remove_topics(&gone);
                }
            }
            Found::Watching(Ok(None)) => {
                debug!("the broker has no topic-list watchers; polling");
                self.discovery.no_watchers = true;
                // Poll now instead.
                self.discovery.next_listing = Some(clock::now());
            }
            Found::Watching(Err(e)) => {
                warn!(error = %e, "watching the pattern's topics failed; polling, and trying again at the next check");
            }
            Found::Subscribed { counts, added } => self.on_subscribed(counts, added).await,
        }
    }

    async fn on_subscribed(
        &mut self,
        counts: Vec<(TopicName, Result<u32, ClientError>)>,
        added: Vec<(TopicName, Result<Attached, ConsumerError>)>,
    ) {
        let pattern = self.discovery.settings.pattern.is_some();
        for (base, count) in counts {
            let followed = !pattern
                || self.discovery.matched.contains(&base)
                || self.discovery.counts.contains(&base);
            match count {
                Ok(n) if followed => {
                    let known = self.discovery.counts.get_or_insert(base.clone(), n);
                    if n < *known {
                        warn!(topic = %base, known = *known, now = n, "partition count shrank; ignored");
                    } else {
                        *known = n;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    warn!(topic = %base, error = %e, "checking for new partitions failed; ignored until the next check");
                    self.discovery.retry.insert(base);
                }
            }
        }
        let mut changed = false;
        for (name, attached) in added {
            let base = name.base();
            let followed = !pattern
                || self.discovery.matched.contains(&base)
                || self.discovery.counts.contains(&base);
            let wanted = followed && self.find(name.as_str()).is_none();
            match attached {
                Ok((conn, id, _)) if !wanted => close_orphan(&conn, id).await,
                Ok((conn, id, rx)) => {
                    info!(topic = %name, consumer = id.0, "subscribed to a new topic or partition");
                    self.adopt(name, conn, id, rx).await;
                    changed = true;
                }
                Err(e) => {
                    warn!(topic = %name, error = %e, "subscribing to a new topic or partition failed; trying again at the next check");
                    self.discovery.retry.insert(base);
                }
            }
        }
        if changed {
            self.publish_topics();
        }
        let now = clock::now();
        if self.discovery.next_partitions.is_none() {
            self.discovery.schedule_partitions(now);
        }
    }

    /// A new sub for `name`, subscribed as consumer `id` on `conn`.
    async fn adopt(
        &mut self,
        name: TopicName,
        conn: Connection,
        id: ConsumerId,
        rx: mpsc::UnboundedReceiver<ConsumerEvent>,
    ) {
        // A new partition's share of the total queue, over the partitions
        // its topic has now (those read already keep theirs, as in Java).
        let partitions = match name.partition_index() {
            Some(_) => self.discovery.counts.get(&name.base()).unwrap_or(0),
            None => 0,
        };
        let receiver_queue_size = crate::consumer::core::config::partition_queue_size(
            self.settings.core.receiver_queue_size,
            self.settings.max_total_receiver_queue_size,
            partitions,
        );
        let config = CoreConfig {
            receiver_queue_size,
            ..self.settings.core.clone()
        };
        let core = match ConsumerCore::new(config) {
            Ok(core) => core,
            Err(e) => {
                // The same settings made the first subs: cannot happen.
                warn!(topic = %name, error = %e, "consumer core refused its settings");
                close_orphan(&conn, id).await;
                return;
            }
        };
        let index = self.subs.len();
        let start = self
            .settings
            .options
            .start_message_id
            .map(|_| MessageId::EARLIEST);
        self.add_sub(name, conn, id, core, start);
        self.listen(index, 0, rx);
        self.shelf.lock().slots[index]
            .core
            .on_subscribed(clock::now());
        self.run_actions(index).await;
    }
}

impl Settings {
    /// Subscribe options for a partition or topic that appeared after the
    /// consumer subscribed: everything in it is new to the subscription.
    fn options_for_new_topics(&self) -> SubscribeOptions {
        let mut options = self.options.clone();
        options.initial_position = super::super::subscribe::InitialPosition::Earliest;
        options.start_message_id = options.start_message_id.map(|_| MessageId::EARLIEST);
        options
    }
}

/// Closes watcher `id` on `conn` and stops routing its updates.
async fn close_watcher(conn: Connection, id: WatcherId) {
    let _ = conn
        .request("WATCH_TOPIC_LIST_CLOSE", |r| {
            commands::watch_topic_list_close(id, r)
        })
        .await;
    conn.unregister_watcher(id).await;
}

/// Undoes what a finding nobody takes set up on the broker (the consumer
/// is gone): closes the consumers it subscribed and its watcher.
async fn discard(found: Found) {
    match found {
        Found::Subscribed { added, .. } => {
            for (_, attached) in added {
                if let Ok((conn, id, _)) = attached {
                    close_orphan(&conn, id).await;
                }
            }
        }
        Found::Watching(Ok(Some(w))) => {
            close_watcher(w.conn, w.id).await;
        }
        Found::Listing { .. } | Found::Watching(_) => {}
    }
}

/// Sets up a topic-list watcher for `pattern` at a host of the service URL.
async fn watch_topics(
    client: &Client,
    pattern: &TopicsPattern,
    hash: Option<&str>,
) -> Result<Option<Watching>, ClientError> {
    const OP: &str = "WATCH_TOPIC_LIST";
    let conn = client.service_connection().await?;
    if !conn.supports_topic_watchers() {
        return Ok(None);
    }
    let failed = |source| ClientError::Request {
        op: OP,
        topic: pattern.given.clone(),
        source,
    };
    let id = conn.next_watcher_id();
    let (tx, events) = mpsc::unbounded_channel();
    conn.register_watcher(id, tx).await.map_err(failed)?;
    let answer = conn
        .request(OP, |r| {
            commands::watch_topic_list(id, &pattern.namespace, &pattern.wire, hash, r)
        })
        .await;
    match answer {
        Ok(Response::WatchTopicListSuccess(s)) => Ok(Some(Watching {
            conn,
            id,
            events,
            topics: (hash != Some(s.topics_hash.as_str())).then_some(s.topic),
            hash: s.topics_hash,
        })),
        other => {
            conn.unregister_watcher(id).await;
            match other {
                Err(source) => Err(failed(source)),
                Ok(got) => Err(ClientError::UnexpectedResponse {
                    op: OP,
                    topic: pattern.given.clone(),
                    got: got.kind(),
                }),
            }
        }
    }
}
