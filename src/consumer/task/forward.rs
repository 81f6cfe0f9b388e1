//! Dead-letter forwards, off the driver's loop: each publish runs in a task
//! of its own, and its result comes back through a channel the loop
//! selects on, so acks, flow and deliveries go on while it waits. The core
//! hears the result (`on_dead_letter_result`) and only then acks the
//! original; a failure makes it redeliver the original instead.
//!
//! Memory stays bounded however slow the dead-letter topic is: at
//! [`MAX_FORWARDS_IN_FLIGHT`] the consumer grants the broker no more
//! permits (its FLOWs wait here) until forwards finish, so no more
//! messages than the receiver queue can join those in flight. A closing
//! consumer waits for the forwards in flight at most an operation timeout.

use super::*;
use crate::consumer::letters::Letters;

/// A finished dead-letter publish.
#[derive(Debug)]
pub(crate) struct Forwarded {
    /// The sub whose core asked for it.
    key: SubKey,
    /// The original message's id.
    origin: MessageId,
    /// The copy's id, or why it was not published.
    result: Result<MessageId, ConsumerError>,
}

/// Forwards in flight at which the consumer stops granting permits.
pub(crate) const MAX_FORWARDS_IN_FLIGHT: usize = 100;

/// The forwards in flight and the channel their results come back on.
#[derive(Debug)]
pub(crate) struct Forwards {
    letters: Option<Arc<Letters>>,
    // Made at the first forward; boxed: the channel allocates room for
    // 32 at once, a forward is rare and a box is pointer-wide.
    pub(super) done: LazyChannel<Box<Forwarded>>,
    in_flight: usize,
    /// The publishing tasks (from the first forward): dropped with the
    /// consumer's driver, which aborts what is still running (a producer
    /// still being created is then closed on the broker).
    tasks: Option<tokio::task::JoinSet<()>>,
    /// Permits held back while at the bound: (sub index, the consumer id
    /// they are for, permits).
    withheld: WithheldFlows,
}

impl Forwards {
    /// Forwards through `letters` (`None`: the consumer has no dead-letter
    /// policy, and every forward fails at once).
    pub(crate) fn new(letters: Option<Arc<Letters>>) -> Self {
        Self {
            letters,
            done: LazyChannel::default(),
            in_flight: 0,
            tasks: None,
            withheld: Vec::new(),
        }
    }

    /// Holds back a FLOW of `permits` for `consumer` (of sub `index`) while
    /// the forwards in flight are at the bound; false if it may go out now.
    pub(super) fn withhold(&mut self, index: usize, consumer: ConsumerId, permits: u32) -> bool {
        if self.in_flight < MAX_FORWARDS_IN_FLIGHT {
            return false;
        }
        withhold_flow(&mut self.withheld, index, consumer, permits);
        true
    }

    /// Moves the FLOWs held back to their sub's new index (`moved(old)`),
    /// dropping those of subs freed (`None`).
    pub(super) fn remap(&mut self, moved: impl Fn(usize) -> Option<usize>) {
        super::leave::remap_flows(&mut self.withheld, moved);
    }

    /// Where the copies go, and what they remember of each delivery.
    pub(super) fn letters(&self) -> Option<&Arc<Letters>> {
        self.letters.as_ref()
    }

    /// The permits held back, once the forwards in flight are below the bound.
    fn release(&mut self) -> WithheldFlows {
        if self.in_flight < MAX_FORWARDS_IN_FLIGHT {
            std::mem::take(&mut self.withheld)
        } else {
            Vec::new()
        }
    }

    /// Starts publishing the copy of `message` (for sub `key`); false if
    /// there is nowhere to publish it.
    pub(super) fn start(&mut self, key: SubKey, origin: MessageId, message: Message) -> bool {
        let Some(letters) = self.letters.clone() else {
            return false;
        };
        self.in_flight += 1;
        let done = self.done.sender();
        let tasks = self.tasks.get_or_insert_with(tokio::task::JoinSet::new);
        // Finished tasks are reaped here; their results came by `done`.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            let result = letters.forward(&message).await;
            let _ = done.send(Box::new(Forwarded {
                key,
                origin,
                result,
            }));
        });
        true
    }

    /// Closes the dead-letter and retry producers (bounded by the
    /// operation timeout).
    pub(super) async fn close(&self) {
        if let Some(letters) = &self.letters {
            letters.close().await;
        }
    }
}

impl Driver {
    /// Tells the core how a forward ended, and carries out what follows
    /// (the original's ack, or its redelivery; nothing once its sub was
    /// freed: its topic left).
    pub(super) async fn on_forwarded(&mut self, forwarded: Box<Forwarded>) {
        let forwards = &mut self.settings.forwards;
        forwards.in_flight = forwards.in_flight.saturating_sub(1);
        let Forwarded {
            key,
            origin,
            result,
        } = *forwarded;
        if let Some(index) = self.index_of(key) {
            self.settle_forward(index, origin, result).await;
        }
        let released = self.settings.forwards.release();
        self.send_withheld(released).await;
    }

    /// Tells sub `index`'s core how the forward of `origin` ended.
    async fn settle_forward(
        &mut self,
        index: usize,
        origin: MessageId,
        result: Result<MessageId, ConsumerError>,
    ) {
        let sub = &self.subs[index];
        let result = match result {
            Ok(copy) => {
                debug!(topic = %sub.name, %origin, %copy, "forwarded to the dead-letter topic");
                Ok(())
            }
            Err(e) => {
                warn!(topic = %sub.name, %origin, error = %e, "dead-letter forward failed; the message will be redelivered");
                Err(())
            }
        };
        self.shelf.lock().slots[index]
            .core
            .on_dead_letter_result(origin, result);
        self.run_actions(index).await;
    }

    /// Waits for every forward in flight and settles its original, so a
    /// closing consumer acks what it forwarded; gives up after an
    /// operation timeout (the originals not acked come back from the
    /// broker, to whoever subscribes next).
    pub(super) async fn settle_forwards(&mut self) {
        let Some(timeout) = self.settings.forwards.letters.as_ref().map(|l| l.timeout()) else {
            return;
        };
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        while self.settings.forwards.in_flight > 0 {
            tokio::select! {
                forwarded = self.settings.forwards.done.recv() => match forwarded {
                    Some(forwarded) => self.on_forwarded(forwarded).await,
                    None => return,
                },
                () = &mut deadline => {
                    warn!(in_flight = self.settings.forwards.in_flight, "closing without waiting longer for dead-letter forwards");
                    return;
                }
            }
        }
    }
}
