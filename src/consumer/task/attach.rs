//! Subscribing: to every partition at the start, again after the broker
//! closed the consumer or the connection died, and detaching at the end.

use super::*;
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

/// How often a closed or lost subscription is tried again (with backoff
/// from 100 ms to 5 s, about 26 s in all) before the consumer gives it up.
pub(super) const RESUBSCRIBE_ATTEMPTS: u32 = 10;

impl Driver {
    /// Subscribes to every topic (partition); on a failure, closes those
    /// already subscribed and returns the error.
    pub(crate) async fn subscribe(
        settings: Settings,
        topics: Vec<TopicName>,
        activity: watch::Sender<Activity>,
    ) -> Result<Self, ConsumerError> {
        let mut driver = Self {
            settings,
            subs: Vec::with_capacity(topics.len()),
            events: SelectAll::new(),
            waiting: VecDeque::new(),
            next_sub: 0,
            activity,
        };
        for topic in topics {
            let core = ConsumerCore::new(driver.settings.core.clone())?;
            let name: Arc<str> = topic.as_str().into();
            let partition = topic.partition_index().map_or(-1, |p| p as i32);
            let index = driver.subs.len();
            match driver.attach(index, &topic, 0, core.consumer_epoch()).await {
                Ok((conn, id)) => driver.subs.push(Sub {
                    topic,
                    name,
                    partition,
                    conn,
                    id,
                    generation: 0,
                    core,
                    grouped: Vec::new(),
                    flush_at: None,
                    lost: false,
                }),
                Err(e) => {
                    driver.close_all().await;
                    return Err(e);
                }
            }
            let now = clock::now();
            driver.subs[index].core.on_subscribed(now);
            driver.run_actions(index, None).await;
        }
        Ok(driver)
    }

    /// Looks `topic` up, registers a fresh consumer id and subscribes.
    pub(super) async fn attach(
        &mut self,
        index: usize,
        topic: &TopicName,
        generation: u64,
        epoch: u64,
    ) -> Result<(Connection, ConsumerId), ConsumerError> {
        let name = topic.as_str();
        let conn =
            self.settings
                .client
                .lookup(topic)
                .await
                .map_err(|source| ConsumerError::Client {
                    topic: name.to_owned(),
                    source,
                })?;
        let request_failed = |source| ConsumerError::Request {
            op: "SUBSCRIBE",
            topic: name.to_owned(),
            source,
        };
        // A fresh id per attempt: a broker may still hold an old one.
        let id = conn.next_consumer_id();
        let (tx, mut rx) = mpsc::unbounded_channel();
        conn.register_consumer(id, tx)
            .await
            .map_err(request_failed)?;
        let options = &self.settings.options;
        let answer = conn
            .request("SUBSCRIBE", |request| {
                commands::subscribe(options.body(name, id, request, Some(epoch)))
            })
            .await;
        match answer {
            Ok(Response::Success(_)) => {}
            Ok(other) => {
                conn.unregister_consumer(id).await;
                return Err(ConsumerError::UnexpectedResponse {
                    op: "SUBSCRIBE",
                    topic: name.to_owned(),
                    got: other.kind(),
                });
            }
            Err(e) => {
                conn.unregister_consumer(id).await;
                return Err(request_failed(e));
            }
        }
        debug!(topic = name, consumer = id.0, "subscribed");
        let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
            .map(move |event| (index, generation, event));
        self.events.push(Box::pin(stream));
        Ok((conn, id))
    }

    /// Subscribes `index` again (fresh consumer id, the core's new epoch),
    /// retrying with backoff; after too many failures the waiting receivers
    /// get the error.
    pub(super) async fn reconnect(&mut self, index: usize) {
        let sub = &mut self.subs[index];
        sub.core.on_reconnect();
        sub.generation += 1;
        let (topic, generation, epoch) =
            (sub.topic.clone(), sub.generation, sub.core.consumer_epoch());
        let mut delay = Duration::from_millis(100);
        let mut last = None;
        for _ in 0..RESUBSCRIBE_ATTEMPTS {
            match self.attach(index, &topic, generation, epoch).await {
                Ok((conn, id)) => {
                    let sub = &mut self.subs[index];
                    sub.conn = conn;
                    sub.id = id;
                    sub.lost = false;
                    sub.core.on_subscribed(clock::now());
                    self.run_actions(index, None).await;
                    return;
                }
                Err(e) => {
                    debug!(topic = %topic.as_str(), error = %e, "resubscribe failed");
                    last = Some(e);
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
        let error = last.map(|e| e.to_string());
        warn!(topic = %topic.as_str(), ?error, "could not subscribe again");
        self.subs[index].lost = true;
    }

    /// Closes every subscription (best effort: a dead connection has closed
    /// it already) and fails the waiting receivers.
    pub(super) async fn close_all(&mut self) {
        self.detach_all(true).await;
    }

    /// Stops routing to every consumer, after CLOSE_CONSUMER if `close`
    /// (not after UNSUBSCRIBE: pulsar-lite answers a command for an unknown
    /// consumer by closing the whole shared connection).
    pub(super) async fn detach_all(&mut self, close: bool) {
        for index in 0..self.subs.len() {
            self.flush_acks(index).await;
        }
        for sub in &self.subs {
            if close {
                let _ = sub
                    .conn
                    .request("CLOSE_CONSUMER", |r| commands::close_consumer(sub.id, r))
                    .await;
            }
            sub.conn.unregister_consumer(sub.id).await;
        }
        for reply in self.waiting.drain(..) {
            let _ = reply.send(Err(ConsumerError::Closed));
        }
    }
}
