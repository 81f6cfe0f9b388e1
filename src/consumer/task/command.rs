//! What the handle asks of its task: one command per call, each carrying
//! its reply.

use super::*;

pub(crate) type Reply<T> = oneshot::Sender<Result<T, ConsumerError>>;

/// Where the core keeps the message the application holds as `id`
/// ([`Message::id`]): a chunked message is held, acked one by one and
/// asked for again at its first chunk, and acked cumulatively up to its
/// last; any other message at `id` itself. Commands carry the
/// application's id, which the observers (interceptors) are told.
pub(crate) fn held_at(id: MessageId, cumulative: bool) -> MessageId {
    if cumulative {
        id.position()
    } else {
        id.start()
    }
}

/// What the handle asks of its task; each request carries its reply.
#[derive(Debug)]
pub(crate) enum Command {
    /// Hand the next message over when there is one.
    Receive(Reply<Message>),
    /// Hand the next message over if one is queued now.
    TryReceive(Reply<Option<Message>>),
    /// Hand over a batch once the batch receive policy says it is due.
    ReceiveBatch(Reply<crate::consumer::batch_receive::Messages>),
    /// Ack these messages individually, each partition's in one ACK frame.
    AckAll(Vec<super::batch::AckOne>),
    /// Ack `id` (of `topic`, in a batch of `batch_size`; the application's
    /// id, see [`held_at`]), individually or cumulatively.
    Ack {
        topic: Arc<str>,
        id: MessageId,
        batch_size: Option<u32>,
        cumulative: bool,
        /// `None`: nobody waits for the outcome.
        reply: Option<Reply<()>>,
    },
    /// Ack `id` (of `topic`) in transaction `txn`, adding the subscription
    /// to it first; `on_end` runs when the transaction ends.
    AckInTxn {
        topic: Arc<str>,
        id: MessageId,
        batch_size: Option<u32>,
        cumulative: bool,
        txn: crate::transaction::Transaction,
        on_end: Option<crate::transaction::EndHook>,
        reply: Reply<()>,
    },
    /// Ask for `id` (the application's, see [`held_at`]) again.
    Nack {
        topic: Arc<str>,
        id: MessageId,
        redelivery_count: u32,
    },
    /// Lease `id` for at most `max_total` from now (`None`: end its lease).
    Lease {
        topic: Arc<str>,
        id: MessageId,
        max_total: Option<Duration>,
    },
    /// Move the subscription.
    Seek(SeekTarget, Reply<()>),
    /// The id of the last message of the (single) topic.
    LastMessageId(Reply<MessageId>),
    /// Whether a message is there to read (see `Reader::has_message_available`).
    HasMessageAvailable(Reply<bool>),
    /// Delete the subscription, then stop.
    Unsubscribe(Reply<()>),
    /// Close the consumer, then stop.
    Close(Reply<()>),
}

impl Command {
    /// Answers the request with an error made by `error` without carrying
    /// it out (a command that waits for no answer is dropped).
    pub(crate) fn refuse(self, error: impl Fn() -> ConsumerError) {
        match self {
            Self::Receive(r) => drop(r.send(Err(error()))),
            Self::TryReceive(r) => drop(r.send(Err(error()))),
            Self::ReceiveBatch(r) => drop(r.send(Err(error()))),
            Self::AckAll(acks) => {
                for reply in acks.into_iter().filter_map(|a| a.reply) {
                    let _ = reply.send(Err(error()));
                }
            }
            Self::Ack { reply, .. } => {
                if let Some(r) = reply {
                    let _ = r.send(Err(error()));
                }
            }
            Self::AckInTxn { reply, .. }
            | Self::Seek(_, reply)
            | Self::Unsubscribe(reply)
            | Self::Close(reply) => drop(reply.send(Err(error()))),
            Self::LastMessageId(r) => drop(r.send(Err(error()))),
            Self::HasMessageAvailable(r) => drop(r.send(Err(error()))),
            Self::Nack { .. } | Self::Lease { .. } => {}
        }
    }
}

/// Which partitions are active (Failover), as ACTIVE_CONSUMER_CHANGE said.
pub(crate) type Activity = Vec<(Arc<str>, bool)>;

/// The topics (partitions) a consumer reads now, and the last ones it
/// left (deleted, or no longer matched by its pattern), as the handles see
/// them.
#[derive(Debug, Default)]
pub(crate) struct TopicsRead {
    pub(crate) read: Vec<String>,
    /// The last [`Self::LEFT_REMEMBERED`] topics left, oldest first: a
    /// message of one is still this consumer's to ack (there is nothing
    /// left to ack, so the ack is answered `Ok`). A topic left longer ago
    /// is forgotten, and an ack of its message is refused as foreign.
    pub(crate) left: VecDeque<Arc<str>>,
}

impl TopicsRead {
    /// How many of the topics left are remembered.
    pub(crate) const LEFT_REMEMBERED: usize = 1024;

    /// Whether `topic` is one this consumer reads or read: its messages
    /// are this consumer's to ack.
    pub(crate) fn knows(&self, topic: &str) -> bool {
        self.read.iter().any(|t| t == topic) || self.has_left(topic)
    }

    /// Whether `topic` is among the last topics left.
    pub(crate) fn has_left(&self, topic: &str) -> bool {
        self.left.iter().any(|t| &**t == topic)
    }

    /// Remembers that `topic` was left, forgetting the oldest one left
    /// beyond [`Self::LEFT_REMEMBERED`].
    pub(crate) fn remember_left(&mut self, topic: Arc<str>) {
        if self.left.len() >= Self::LEFT_REMEMBERED {
            self.left.pop_front();
        }
        self.left.push_back(topic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topics_left_are_remembered_up_to_a_bound_oldest_forgotten_first() {
        let mut topics = TopicsRead {
            read: vec!["now".into()],
            left: VecDeque::new(),
        };
        for i in 0..=TopicsRead::LEFT_REMEMBERED {
            topics.remember_left(format!("t{i}").into());
        }
        assert_eq!(topics.left.len(), TopicsRead::LEFT_REMEMBERED);
        assert!(!topics.knows("t0"), "the oldest is forgotten");
        assert!(topics.knows("t1") && topics.knows("now"));
        let last = format!("t{}", TopicsRead::LEFT_REMEMBERED);
        assert!(topics.has_left(&last) && !topics.has_left("now"));
    }
}
