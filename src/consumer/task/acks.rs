//! Acks on the wire: who waits for which ACK (with receipts), ACK requests
//! in flight, and acks that wait for a subscription.
//!
//! With ack receipts an application's ack is answered only by the broker's
//! ACK_RESPONSE for the ACK that covers it:
//! - an ack the core queued is answered by the ACK frames of the next pass
//!   over the core's actions (all of them confirmed, or the first error);
//! - a batch member whose siblings are not all acked yet is answered once
//!   recorded (its entry's ACK goes with the last member's ack, which that
//!   ACK answers; with batch index ack each member has an ACK of its own),
//!   as the Java client does: an ack never waits on acks the application
//!   has not made;
//! - while the sub subscribes again nothing is sent: the acks wait in the
//!   core and their replies here, and go out under the new consumer id;
//! - an ACK request lost with its connection or consumer is sent again
//!   under the new one, and its replies wait for that answer;
//! - what cannot be sent (the consumer closed first, the subscription was
//!   lost for good) is answered with an error.

use std::collections::HashMap;

use super::*;
use crate::connection::ConnectionError;
use crate::proto::MessageIdData;

/// One ACK frame's content, without the consumer id (applied when sent).
#[derive(Debug, Clone)]
pub(super) struct WireAck {
    pub(super) ids: Vec<MessageIdData>,
    pub(super) kind: AckType,
}

/// ACK frames sent (or to send) together, and the replies they answer.
#[derive(Debug, Default)]
pub(super) struct Flight {
    pub(super) acks: Vec<WireAck>,
    pub(super) replies: Vec<Reply<()>>,
}

impl Flight {
    /// Answers every reply with `result`.
    pub(super) fn answer(self, result: impl Fn() -> Result<(), ConsumerError>) {
        for reply in self.replies {
            let _ = reply.send(result());
        }
    }
}

/// The outcome of one flight: sub key, token, result.
pub(super) type Landed = (SubKey, u64, Result<(), ConnectionError>);

/// One sub's acks that someone waits for.
#[derive(Debug, Default)]
pub(super) struct AckWaiters {
    /// Replies of acks the core queued: answered by the next pass's ACKs.
    pub(super) next: Vec<Reply<()>>,
    /// Flights sent and not answered, by token.
    pub(super) in_flight: HashMap<u64, Flight>,
    /// Flights to send once subscribed again.
    pub(super) resend: Vec<Flight>,
}

impl AckWaiters {
    /// The connection or consumer is gone: flights in flight go out again
    /// after the next subscribe (their late outcomes are ignored).
    pub(super) fn requeue_in_flight(&mut self) {
        self.resend.extend(self.in_flight.drain().map(|(_, f)| f));
    }

    /// Whether anything waits here.
    pub(super) fn is_empty(&self) -> bool {
        self.next.is_empty() && self.in_flight.is_empty() && self.resend.is_empty()
    }

    /// Answers every waiting reply with `error()`: nothing more can be sent.
    pub(super) fn fail_all(&mut self, error: impl Fn() -> ConsumerError) {
        let replies = self
            .next
            .drain(..)
            .chain(self.in_flight.drain().flat_map(|(_, f)| f.replies))
            .chain(self.resend.drain(..).flat_map(|f| f.replies));
        for reply in replies {
            let _ = reply.send(Err(error()));
        }
    }
}

/// Whether an ACK request that failed with `error` may have missed its
/// consumer (connection or consumer gone), so it is worth sending again
/// under the next subscription.
pub(super) fn lost_with_its_consumer(error: &ConnectionError) -> bool {
    !matches!(
        error,
        ConnectionError::Server { .. } | ConnectionError::Timeout { .. }
    )
}

impl Driver {
    /// Sends `flight` on sub `index`'s connection as its consumer, each ACK
    /// as a request; the outcome comes back through the loop
    /// ([`Driver::ack_landed`]).
    pub(super) fn send_flight(&mut self, index: usize, flight: Flight) {
        let sub = &mut self.subs[index];
        let token = self.ack_tokens;
        self.ack_tokens += 1;
        let (conn, id, acks, key) = (sub.conn.clone(), sub.id, flight.acks.clone(), sub.key);
        sub.acks.in_flight.insert(token, flight);
        let landed = self.acks_landed.sender();
        tokio::spawn(async move {
            let mut result = Ok(());
            // Each ACK frame names at most a frame's worth of ids.
            let frames = acks.into_iter().flat_map(|ack| {
                let kind = ack.kind;
                commands::split_ids(ack.ids)
                    .into_iter()
                    .map(move |ids| (ids, kind))
            });
            for (ids, kind) in frames {
                let answer = conn
                    .request("ACK", |request| commands::ack(id, ids, kind, Some(request)))
                    .await;
                if let Err(e) = answer {
                    result = Err(e);
                    break;
                }
            }
            let _ = landed.send(Box::new((key, token, result)));
        });
    }

    /// A flight's outcome: its replies are answered, or it goes out again
    /// under the next subscription if it was lost with its consumer.
    pub(super) fn ack_landed(&mut self, (key, token, result): Landed) {
        let Some(index) = self.index_of(key) else {
            return; // its topic left: its replies were answered then
        };
        let sub = &mut self.subs[index];
        let Some(flight) = sub.acks.in_flight.remove(&token) else {
            return; // requeued at a reconnect: the resend answers
        };
        match result {
            Ok(()) => flight.answer(|| Ok(())),
            Err(e) if lost_with_its_consumer(&e) && !sub.lost => {
                debug!(topic = %sub.name, error = %e, "ACK lost with its consumer; sending it again");
                if self.resubscribes.is_running(index) || sub.conn.is_closed() {
                    sub.acks.resend.push(flight);
                } else {
                    self.send_flight(index, flight);
                }
            }
            Err(source) => {
                let topic = sub.name.to_string();
                flight.answer(|| {
                    Err(ConsumerError::Request {
                        op: "ACK",
                        topic: topic.clone(),
                        source: source.clone(),
                    })
                });
            }
        }
    }

    /// Sends the flights of sub `index` that waited for a subscription.
    pub(super) fn resend_acks(&mut self, index: usize) {
        for flight in std::mem::take(&mut self.subs[index].acks.resend) {
            self.send_flight(index, flight);
        }
    }

    /// Waits (bounded by the operation timeout) until no ACK request is in
    /// flight, so their replies get the broker's answer before a close.
    pub(super) async fn settle_acks(&mut self) {
        let after = self.settings.client.operation_timeout();
        let deadline = tokio::time::Instant::from_std(clock::after(clock::now(), after));
        while self.subs.iter().any(|s| !s.acks.in_flight.is_empty()) {
            match tokio::time::timeout_at(deadline, self.acks_landed.recv()).await {
                Ok(Some(landed)) => self.ack_landed(*landed),
                Ok(None) | Err(_) => return,
            }
        }
    }
}
