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
//!
//! This file: the checks' state and schedule, and the jobs they start;
//! `discover/findings.rs`: what the loop does with what they find;
//! `discover/watch.rs`: the topic-list watcher on the broker.

use std::collections::{BTreeSet, HashSet};

use super::attach::subscribe_on;
use super::resubscribe::{Attached, close_orphan};
use super::*;
use crate::client::{ClientError, TopicListing};
use crate::connection::TopicListEvent;
use crate::consumer::pattern::{RegexSubscriptionMode, TopicsPattern};
use crate::ids::WatcherId;
use watch::{close_watcher, discard, watch_topics};

mod findings;
mod watch;

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
