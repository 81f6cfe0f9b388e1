//! Pure routing state of one connection: pending requests with their
//! deadlines, and the mailboxes of registered producers and consumers.
//!
//! The actor feeds it commands and inbound frames and asks it for its next
//! deadline; the router never awaits and never reads the clock (`now` is an
//! argument). Answers go out through the channels it holds, which never
//! block: replies are `oneshot`s and mailboxes are unbounded (the bound is
//! the protocol's: see [`Connection::register_consumer`](super::Connection::register_consumer)).

use std::collections::BTreeSet;
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::command::{ConsumerMailbox, ProducerMailbox, Reply, WatcherMailbox};
use super::{ConnectionError, ConsumerEvent, ProducerEvent, Response, TopicListEvent};
use crate::ids::{ConsumerId, IdMap, ProducerId, RequestId, WatcherId};
use crate::proto::ServerError;

struct Pending {
    op: &'static str,
    /// `None` once the broker said the answer will take as long as it takes
    /// (a producer queued for exclusive access).
    deadline: Option<Instant>,
    reply: Reply,
}

/// Requests in flight and registered producers and consumers.
pub(crate) struct Router {
    timeout: Duration,
    pending: IdMap<RequestId, Pending>,
    /// The same requests ordered by deadline, so expiry and the next
    /// deadline cost a look at the front.
    deadlines: BTreeSet<(Instant, RequestId)>,
    producers: IdMap<ProducerId, ProducerMailbox>,
    consumers: IdMap<ConsumerId, ConsumerMailbox>,
    watchers: IdMap<WatcherId, WatcherMailbox>,
    /// Per registered consumer: FLOW permits granted minus entries
    /// received. Every entry costs a compliant broker at least one permit,
    /// so below zero the broker is sending what nobody asked for.
    permits: IdMap<ConsumerId, i64>,
    /// Frames for ids nobody registered, so far (a warning per power of two).
    strays: u64,
}

/// A broker answer before it is matched to its request's `op`.
pub(super) type Outcome = Result<Response, (ServerError, String)>;

impl Router {
    /// A router whose requests time out after `timeout`.
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            pending: IdMap::default(),
            deadlines: BTreeSet::new(),
            producers: IdMap::default(),
            consumers: IdMap::default(),
            watchers: IdMap::default(),
            permits: IdMap::default(),
            strays: 0,
        }
    }

    /// Waits for the answer to request `id`, until `now` plus the timeout.
    pub(crate) fn insert_request(
        &mut self,
        now: Instant,
        id: RequestId,
        op: &'static str,
        reply: Reply,
    ) {
        let deadline = crate::clock::after(now, self.timeout);
        if let Some(old) = self.pending.insert(
            id,
            Pending {
                op,
                deadline: Some(deadline),
                reply,
            },
        ) {
            // Ids come from a counter that never repeats; keep the newer waiter.
            warn!(request = %id, op, "request id reused; the earlier waiter is dropped");
            if let Some(old) = old.deadline {
                self.deadlines.remove(&(old, id));
            }
        }
        self.deadlines.insert((deadline, id));
    }

    /// Request `id` got a first answer that says the real one comes later,
    /// with no time limit (PRODUCER_SUCCESS with `producer_ready` false: the
    /// producer waits for exclusive access). It no longer times out; its
    /// waiter withdraws it by closing the producer.
    /// Only a PRODUCER request is held: a broker cannot take another
    /// request off its timeout this way.
    pub(crate) fn hold(&mut self, id: RequestId) {
        let deadline = self
            .pending
            .get_mut(&id)
            .filter(|p| p.op == "PRODUCER")
            .and_then(|p| p.deadline.take());
        if let Some(deadline) = deadline {
            self.deadlines.remove(&(deadline, id));
        }
    }

    /// Routes producer events for `id` to `mailbox` (replacing an earlier one).
    pub(crate) fn register_producer(&mut self, id: ProducerId, mailbox: ProducerMailbox) {
        self.producers.insert(id, mailbox);
    }

    /// Routes consumer events for `id` to `mailbox` (replacing an earlier one).
    pub(crate) fn register_consumer(&mut self, id: ConsumerId, mailbox: ConsumerMailbox) {
        self.consumers.insert(id, mailbox);
        self.permits.insert(id, 0);
    }

    /// Routes topic-list updates for `id` to `mailbox`.
    pub(crate) fn register_watcher(&mut self, id: WatcherId, mailbox: WatcherMailbox) {
        self.watchers.insert(id, mailbox);
    }

    /// Stops routing to watcher `id`.
    pub(crate) fn unregister_watcher(&mut self, id: WatcherId) {
        self.watchers.remove(&id);
    }

    /// A FLOW granting `permits` to consumer `id` went out.
    pub(crate) fn on_flow(&mut self, id: ConsumerId, permits: u32) {
        if let Some(outstanding) = self.permits.get_mut(&id) {
            *outstanding += i64::from(permits);
        }
    }

    /// An entry for consumer `id` came in: takes a permit; `false` once the
    /// broker is past what it was granted (a protocol violation).
    pub(super) fn take_permit(&mut self, id: ConsumerId) -> bool {
        match self.permits.get_mut(&id) {
            Some(outstanding) => {
                *outstanding -= 1;
                *outstanding >= 0
            }
            // Unknown ids are dropped on delivery.
            None => true,
        }
    }

    /// Stops routing to producer `id`.
    pub(crate) fn unregister_producer(&mut self, id: ProducerId) {
        self.producers.remove(&id);
    }

    /// Stops routing to consumer `id`.
    pub(crate) fn unregister_consumer(&mut self, id: ConsumerId) {
        self.consumers.remove(&id);
        self.permits.remove(&id);
    }

    /// Requests waiting for an answer.
    pub(crate) fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// When the earliest pending request times out.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(deadline, _)| deadline)
    }

    /// Answers every request whose deadline is at or before `now` with
    /// [`ConnectionError::Timeout`]; returns how many expired.
    pub(crate) fn expire(&mut self, now: Instant) -> usize {
        let mut expired = 0;
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(p) = self.pending.remove(&id) {
                debug!(request = %id, op = p.op, "request timed out");
                let _ = p.reply.send(Err(ConnectionError::Timeout {
                    op: p.op,
                    after: self.timeout,
                }));
                expired += 1;
            }
        }
        expired
    }

    /// Poison: every pending request and every registered producer and
    /// consumer gets `err`, and the router is left empty.
    pub(crate) fn fail_all(&mut self, err: &ConnectionError) {
        self.deadlines.clear();
        for (_, p) in self.pending.drain() {
            let _ = p.reply.send(Err(err.clone()));
        }
        for (_, mailbox) in self.producers.drain() {
            let _ = mailbox.send(ProducerEvent::ConnectionLost(err.clone()));
        }
        for (_, mailbox) in self.consumers.drain() {
            let _ = mailbox.send(ConsumerEvent::ConnectionLost(err.clone()));
        }
        for (_, mailbox) in self.watchers.drain() {
            let _ = mailbox.send(TopicListEvent::ConnectionLost(err.clone()));
        }
        self.permits.clear();
    }

    /// Hands `outcome` to the waiter of request `id`, if it still waits.
    pub(super) fn answer(&mut self, id: RequestId, outcome: Outcome) {
        let Some(p) = self.pending.remove(&id) else {
            debug!(request = %id, "answer to an unknown or timed-out request dropped");
            return;
        };
        if let Some(deadline) = p.deadline {
            self.deadlines.remove(&(deadline, id));
        }
        let result = outcome.map_err(|(code, message)| ConnectionError::Server {
            op: p.op,
            code,
            message,
        });
        if let Err(e) = &result {
            debug!(request = %id, op = p.op, error = %e, "request refused by the broker");
        }
        let _ = p.reply.send(result);
    }

    pub(super) fn deliver_to_producer(
        &mut self,
        id: ProducerId,
        what: &str,
        event: ProducerEvent,
        last: bool,
    ) {
        let stray = deliver(&mut self.producers, id, "producer", what, event, last);
        self.count_stray(stray, "producer", what);
    }

    pub(super) fn deliver_to_consumer(
        &mut self,
        id: ConsumerId,
        what: &str,
        event: ConsumerEvent,
        last: bool,
    ) {
        let stray = deliver(&mut self.consumers, id, "consumer", what, event, last);
        self.count_stray(stray, "consumer", what);
        if !self.consumers.contains_key(&id) {
            self.permits.remove(&id);
        }
    }
}

impl Router {
    pub(super) fn deliver_to_watcher(&mut self, id: WatcherId, event: TopicListEvent) {
        let stray = deliver(
            &mut self.watchers,
            id,
            "watcher",
            "WATCH_TOPIC_UPDATE",
            event,
            false,
        );
        self.count_stray(stray, "watcher", "WATCH_TOPIC_UPDATE");
    }

    /// Counts a frame for an unknown id (`stray`); warns on the 1st, 2nd,
    /// 4th, 8th… of the connection, so a broker sending them by the
    /// thousand cannot flood the log.
    fn count_stray(&mut self, stray: bool, owner: &str, what: &str) {
        if !stray {
            return;
        }
        self.strays += 1;
        if self.strays.is_power_of_two() {
            warn!(
                owner,
                command = what,
                so_far = self.strays,
                "frames for unknown ids ignored (warned at each power of two)"
            );
        }
    }
}

/// Delivers `event` to the mailbox of `id`; `last` ends the registration
/// after it, and so does a mailbox whose receiver is gone. Returns true if
/// nobody is registered under `id` (the event is dropped).
fn deliver<K: Copy + Eq + Hash + fmt::Display, E>(
    mailboxes: &mut IdMap<K, mpsc::UnboundedSender<E>>,
    id: K,
    owner: &str,
    what: &str,
    event: E,
    last: bool,
) -> bool {
    let Some(mailbox) = mailboxes.get(&id) else {
        debug!(id = %id, owner, command = what, "for an unknown id: ignored");
        return true;
    };
    let gone = mailbox.send(event).is_err();
    if gone {
        debug!(id = %id, owner, command = what, "mailbox closed: unregistered");
    }
    if gone || last {
        mailboxes.remove(&id);
    }
    false
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
