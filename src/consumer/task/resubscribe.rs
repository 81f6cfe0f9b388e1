//! Subscribing again in the background: each attempt is a task of its own
//! that reports on one channel, so the driver's loop keeps serving receive,
//! ack and close meanwhile. Each partition keeps its backoff; a failure is
//! retried unless it is final (`ConsumerError::is_final`, which defers to
//! `ConnectionError::is_final`); a subscription that arrives
//! after the consumer closed is closed on the broker, never left behind.

use super::attach::subscribe_on;
use super::*;
use crate::backoff::Backoff;
use crate::connection::{BrokerHint, ConnectionError};

/// A new subscription: its connection, consumer id and mailbox.
pub(super) type Attached = (
    Connection,
    ConsumerId,
    mpsc::UnboundedReceiver<ConsumerEvent>,
);

/// The outcome of one resubscribe attempt of sub `key`, generation `gen`.
pub(super) type Outcome = (SubKey, u64, Result<Attached, ConsumerError>);

/// The resubscribe attempts under way (each a task of its own, reporting
/// on one channel) and each partition's backoff.
#[derive(Default)]
pub(super) struct Resubscribes {
    // Made at the first attempt; boxed: the channel allocates room for
    // 32 at once, an attempt is rare and a box is pointer-wide.
    outcomes: LazyChannel<Box<Outcome>>,
    pub(super) backoff: HashMap<usize, Backoff>,
    /// Subs between losing their subscription and getting it back.
    pub(super) running: std::collections::HashSet<usize>,
    /// The attempts' tasks not known finished.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Resubscribes {
    /// The next finished attempt (pending while none runs).
    pub(super) async fn next(&mut self) -> Outcome {
        match self.outcomes.recv().await {
            Some(outcome) => *outcome,
            // Never: the channel holds a sender.
            None => std::future::pending().await,
        }
    }

    /// Whether sub `index` is between losing its subscription and getting
    /// it back (its connection and consumer id are stale meanwhile).
    pub(super) fn is_running(&self, index: usize) -> bool {
        self.running.contains(&index)
    }

    /// How many attempts partition `index` has made since its last success.
    pub(super) fn attempts(&self, index: usize) -> u32 {
        self.backoff.get(&index).map_or(0, Backoff::attempts)
    }

    /// Moves each sub's backoff and running attempt to its new index
    /// (`moved(old)`), dropping those of subs freed (`None`).
    pub(super) fn remap(&mut self, moved: impl Fn(usize) -> Option<usize>) {
        self.backoff = std::mem::take(&mut self.backoff)
            .into_iter()
            .filter_map(|(index, backoff)| Some((moved(index)?, backoff)))
            .collect();
        self.running = std::mem::take(&mut self.running)
            .into_iter()
            .filter_map(&moved)
            .collect();
    }

    /// No more attempts: running ones stop (or close what they make), and
    /// subscriptions that arrived but were not taken yet are closed. Waits
    /// (for at most `limit`) until the attempts under way have closed what
    /// they made: once the consumer is closed, the broker holds none of its
    /// subscriptions, so another consumer may take an Exclusive one.
    pub(super) async fn shut(&mut self, limit: Duration) {
        self.outcomes.close();
        while let Some(unclaimed) = self.outcomes.try_recv() {
            if let (_, _, Ok((conn, id, _))) = *unclaimed {
                close_orphan(&conn, id).await;
            }
        }
        let tasks = futures::future::join_all(std::mem::take(&mut self.tasks));
        if tokio::time::timeout(limit, tasks).await.is_err() {
            debug!("a subscribe attempt still under way at the close");
        }
    }

    /// Runs `attempt` of sub `index` (`key` in its outcome) after `delay`
    /// as a task. Once the consumer is gone (the channel closed) the task
    /// stops during its delay; an attempt already talking to the broker
    /// finishes and closes what it subscribed, so no consumer is left
    /// behind on the broker.
    pub(super) fn spawn(
        &mut self,
        delay: Duration,
        index: usize,
        key: SubKey,
        generation: u64,
        attempt: impl std::future::Future<Output = Result<Attached, ConsumerError>> + Send + 'static,
    ) {
        self.running.insert(index);
        self.tasks.retain(|task| !task.is_finished());
        let tx = self.outcomes.sender();
        let task = tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = tx.closed() => return,
            }
            let outcome = attempt.await;
            if let Err(mpsc::error::SendError(unsent)) =
                tx.send(Box::new((key, generation, outcome)))
            {
                if let (_, _, Ok((conn, id, _))) = *unsent {
                    close_orphan(&conn, id).await;
                }
            }
        });
        self.tasks.push(task);
    }
}

/// Closes a subscription nobody will use (made after the consumer closed,
/// or superseded).
pub(super) async fn close_orphan(conn: &Connection, id: ConsumerId) {
    debug!(
        consumer = id.0,
        "closing a subscription made after it was needed"
    );
    let _ = conn.close_consumer(id).await;
}

impl Driver {
    /// Sub `index` lost its subscription (connection lost, CLOSE_CONSUMER,
    /// TOPIC_MIGRATED): the core forgets what the old one queued and held
    /// (new epoch), events of the old one are ignored from now on, and a
    /// subscribe attempt starts in the background, at `hint`'s broker if
    /// the broker named one. `closed`: the consumer was closed (by the
    /// broker, or for a seek) rather than its connection lost.
    pub(super) async fn reconnect(&mut self, index: usize, hint: Option<BrokerHint>, closed: bool) {
        // Answers that came before the loss confirm their acks first.
        self.take_answered_acks();
        self.drop_applied_acks(index);
        self.lose_unanswered_acks(index);
        let sub = &mut self.subs[index];
        let durable = self.settings.options.durable;
        {
            let mut shelved = self.shelf.lock();
            let slot = &mut shelved.slots[index];
            // Resume at the earliest id queued (a chunked message completed
            // behind later ones starts before them), drop by the front's
            // position (the queue is in delivery order).
            let earliest = slot.core.earliest_queued_id();
            let queued = slot
                .core
                .first_queued()
                .zip(earliest)
                .map(|(q, earliest)| (earliest, q.message.position()));
            let first_chunk = sub.chunks.first_pending();
            slot.position.on_reconnect(queued, first_chunk, durable);
            // Acks past the last pass's mark, or grouped, go out under
            // the next subscription.
            let assembling = sub.chunks.pending_firsts();
            slot.core
                .on_reconnect_unsent_after(sub.acks.confirmable(), closed, assembling);
        }
        sub.chunks.restart();
        sub.generation += 1;
        // The shared rule (crate::backoff): the delays start over only
        // after a subscription that delivered messages or lived long.
        self.resubscribes.backoff.entry(index).or_default().lost(
            sub.subscribed_at,
            sub.delivered,
            clock::now(),
        );
        // ACKs in flight may have missed the consumer: sent again after the
        // subscribe, as are grouped acks (under the new consumer id).
        sub.acks.requeue_in_flight();
        sub.flush_at = None;
        if !sub.conn.is_closed() {
            // TOPIC_MIGRATED leaves the registration in place.
            sub.conn.unregister_consumer(sub.id).await;
        }
        self.resubscribe(index, hint);
    }

    /// Starts the next subscribe attempt of sub `index` after its backoff.
    fn resubscribe(&mut self, index: usize, hint: Option<BrokerHint>) {
        let sub = &self.subs[index];
        let delay = self
            .resubscribes
            .backoff
            .entry(index)
            .or_default()
            .next_delay();
        let (client, mut options) = (self.settings.client.clone(), self.settings.options.clone());
        let (start, epoch) = {
            let shelved = self.shelf.lock();
            let slot = &shelved.slots[index];
            (slot.position.start_id(), slot.core.consumer_epoch())
        };
        options.start_message_id = start.or(options.start_message_id);
        let (topic, generation) = (sub.topic.clone(), sub.generation);
        debug!(topic = %topic.as_str(), ?delay, "subscribing again");
        self.resubscribes
            .spawn(delay, index, sub.key, generation, async move {
                let name = topic.as_str();
                match client.reconnect_to(&topic, hint.as_ref()).await {
                    Ok(conn) => subscribe_on(conn, &options, name, epoch).await,
                    Err(source) => Err(ConsumerError::Client {
                        topic: name.to_owned(),
                        source,
                    }),
                }
            });
    }

    /// Takes the outcome of one subscribe attempt: the sub is live again
    /// (permits granted anew), or the next attempt starts, or it is given up.
    pub(super) async fn resubscribed(&mut self, (key, generation, outcome): Outcome) {
        let Some(index) = self.index_of(key) else {
            // Its topic left and it was freed.
            if let Ok((conn, id, _)) = outcome {
                close_orphan(&conn, id).await;
            }
            return;
        };
        let sub = &mut self.subs[index];
        if sub.generation != generation {
            if let Ok((conn, id, _)) = outcome {
                close_orphan(&conn, id).await;
            }
            return;
        }
        self.resubscribes.running.remove(&index);
        match outcome {
            Ok((conn, id, rx)) => {
                info!(topic = %sub.name, connection = %conn.id(), consumer = id.0, "subscribed again");
                sub.conn = conn;
                sub.id = id;
                sub.lost = false;
                sub.left_behind = false;
                sub.subscribed_at = clock::now();
                sub.delivered = false;
                self.shelf.lock().slots[index]
                    .core
                    .on_subscribed(sub.subscribed_at);
                self.listen(index, generation, rx);
                self.run_actions(index).await;
                self.flush_acks(index).await;
                self.resend_acks(index);
            }
            Err(e) if !e.is_final() => {
                debug!(topic = %sub.name, error = %e, "subscribing again failed; will retry");
                self.resubscribe(index, None);
            }
            Err(e) => {
                warn!(topic = %sub.name, error = %e, "subscription given up");
                sub.lost = true;
                sub.left_behind = !e.says_subscription_gone();
                // Receivers hear of it once; every receive fails once all
                // are gone (see `all_lost`).
                let others_live = self.subs.iter().any(|s| !s.lost && !s.removed);
                let sub = &mut self.subs[index];
                let attempts = self.resubscribes.attempts(index);
                let topic = sub.name.to_string();
                sub.acks.fail_all(|| ConsumerError::Lost {
                    topic: topic.clone(),
                    attempts,
                });
                if others_live {
                    self.lost_reports
                        .push_back(ConsumerError::Lost { topic, attempts });
                }
            }
        }
    }

    /// Waits until no partition is subscribing again, taking the attempts'
    /// outcomes meanwhile, for at most the operation timeout: a request
    /// (`op`) issued during a reconnect goes to the new subscription.
    ///
    /// # Errors
    /// [`ConsumerError::Request`] with a timeout if a partition is still
    /// subscribing again when the operation timeout is up.
    pub(super) async fn settle_resubscribes(
        &mut self,
        op: &'static str,
    ) -> Result<(), ConsumerError> {
        let after = self.settings.client.operation_timeout();
        let deadline = tokio::time::Instant::from_std(clock::after(clock::now(), after));
        loop {
            let waiting = (0..self.subs.len())
                .find(|&i| self.resubscribes.is_running(i) && !self.subs[i].lost);
            let Some(index) = waiting else {
                return Ok(());
            };
            match tokio::time::timeout_at(deadline, self.resubscribes.next()).await {
                Ok(outcome) => self.resubscribed(outcome).await,
                Err(_) => {
                    return Err(ConsumerError::Request {
                        op,
                        topic: self.subs[index].name.to_string(),
                        source: ConnectionError::Timeout { op, after },
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientError;
    use crate::connection::ConnectionError;
    use crate::proto::ServerError;

    /// Whether subscribing again tries once more after `err`.
    fn retryable(err: &ConsumerError) -> bool {
        !err.is_final()
    }

    fn refused(code: ServerError) -> ConsumerError {
        ConsumerError::Request {
            op: "SUBSCRIBE",
            topic: "t".into(),
            source: ConnectionError::Server {
                op: "SUBSCRIBE",
                code,
                message: String::new(),
            },
        }
    }

    #[test]
    fn passing_trouble_is_retried_and_final_refusals_are_not() {
        assert!(retryable(&refused(ServerError::ConsumerBusy)));
        assert!(retryable(&refused(ServerError::ServiceNotReady)));
        assert!(retryable(&ConsumerError::Request {
            op: "SUBSCRIBE",
            topic: "t".into(),
            source: ConnectionError::Disconnected,
        }));
        assert!(retryable(&ConsumerError::Client {
            topic: "t".into(),
            source: ClientError::Connect {
                address: "b:6650".into(),
                source: ConnectionError::Closed,
            },
        }));
        assert!(retryable(&refused(ServerError::AuthenticationError)));
        assert!(retryable(&refused(ServerError::AuthorizationError)));
        for code in [
            ServerError::TopicNotFound,
            ServerError::SubscriptionNotFound,
            ServerError::TopicTerminatedError,
        ] {
            assert!(!retryable(&refused(code)), "{code:?}");
        }
        assert!(!retryable(&ConsumerError::Client {
            topic: "t".into(),
            source: ClientError::Closed,
        }));
        assert!(!retryable(&ConsumerError::Closed));
    }
}
