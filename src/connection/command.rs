//! The messages a [`Connection`](super::Connection) handle sends its actor.
//!
//! Every variant carries the channel its outcome goes to: a request its
//! reply `oneshot`, a registration its mailbox (which gets
//! [`ConnectionLost`](super::ProducerEvent::ConnectionLost) if the
//! connection dies), a close its completion signal. Control frames are
//! fire-and-forget by design (acks, flow and redeliveries get no answer).
//! Because a request carries its own reply, registering it and sending it
//! happen in one step, in the actor: there is no window in which a response
//! can arrive for a request the actor does not know.

use tokio::sync::{mpsc, oneshot};

use super::{ConnectionError, ConsumerEvent, ProducerEvent, Response, TopicListEvent};
use crate::ids::{ConsumerId, ProducerId, RequestId, WatcherId};
use crate::proto::BaseCommand;

/// The reply channel of one request.
pub(crate) type Reply = oneshot::Sender<Result<Response, ConnectionError>>;

/// A producer's mailbox (unbounded: see [`Connection::register_producer`](super::Connection::register_producer)).
pub(crate) type ProducerMailbox = mpsc::UnboundedSender<ProducerEvent>;

/// A consumer's mailbox (unbounded: see [`Connection::register_consumer`](super::Connection::register_consumer)).
pub(crate) type ConsumerMailbox = mpsc::UnboundedSender<ConsumerEvent>;

/// A topic-list watcher's mailbox (a few updates at most between reads).
pub(crate) type WatcherMailbox = mpsc::UnboundedSender<TopicListEvent>;

/// One instruction for the connection actor, on the control lane.
///
/// Deliberately not `Debug`: a command may carry credentials, and nothing
/// should be able to print one whole.
pub(crate) enum Command {
    /// Write `command` and route the answer for `id` to `reply`.
    Request {
        id: RequestId,
        op: &'static str,
        command: BaseCommand,
        reply: Reply,
    },
    /// Write `command`; no answer is expected (ack, flow, redeliver).
    Control(BaseCommand),
    /// Write a FLOW of `permits` for `consumer`: what the broker charged
    /// for one entry that never reached the application. The router's
    /// count gets back the one permit that entry took, no more.
    GiveBack { consumer: ConsumerId, permits: u32 },
    /// Route receipts and send errors for `id` to `mailbox`.
    RegisterProducer {
        id: ProducerId,
        mailbox: ProducerMailbox,
    },
    /// Route messages and consumer notifications for `id` to `mailbox`.
    RegisterConsumer {
        id: ConsumerId,
        mailbox: ConsumerMailbox,
    },
    /// Route topic-list updates for watcher `id` to `mailbox`.
    RegisterWatcher {
        id: WatcherId,
        mailbox: WatcherMailbox,
    },
    /// Stop routing to watcher `id`.
    UnregisterWatcher(WatcherId),
    /// Stop routing to producer `id`.
    UnregisterProducer(ProducerId),
    /// Stop routing to consumer `id`.
    UnregisterConsumer(ConsumerId),
    /// Flush what is queued, close the socket, fail everyone with
    /// [`ConnectionError::Closed`], then signal `done`.
    Close { done: oneshot::Sender<()> },
}

impl Command {
    /// Answers this command with `err`, because the connection is gone.
    pub(crate) fn fail(self, err: &ConnectionError) {
        match self {
            Self::Request { reply, .. } => {
                let _ = reply.send(Err(err.clone()));
            }
            Self::RegisterProducer { mailbox, .. } => {
                let _ = mailbox.send(ProducerEvent::ConnectionLost(err.clone()));
            }
            Self::RegisterConsumer { mailbox, .. } => {
                let _ = mailbox.send(ConsumerEvent::ConnectionLost(err.clone()));
            }
            Self::RegisterWatcher { mailbox, .. } => {
                let _ = mailbox.send(TopicListEvent::ConnectionLost(err.clone()));
            }
            Self::Close { done } => {
                let _ = done.send(());
            }
            Self::Control(_)
            | Self::GiveBack { .. }
            | Self::UnregisterProducer(_)
            | Self::UnregisterConsumer(_)
            | Self::UnregisterWatcher(_) => {}
        }
    }
}
