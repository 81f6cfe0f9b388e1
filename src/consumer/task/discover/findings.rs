//! What discovery's jobs and the topic-list watcher report, taken by the
//! driver: listings and watcher updates turn into topics joined (their
//! partitions looked up and subscribed by a job) and topics left
//! (leave.rs), and new subscriptions become subs.

use super::*;

impl Driver {
    /// Takes what discovery reports.
    pub(in crate::consumer::task) async fn on_discovery(&mut self, signal: Signal) {
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
