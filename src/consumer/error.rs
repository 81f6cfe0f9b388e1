//! The consumer layer's errors: [`ConsumerError`], what a consumer call can
//! fail with, and [`ConfigError`], a setting the consumer refuses before any
//! message flows. Caller misuse (a setting that cannot work, a call the
//! subscription type forbids, a closed consumer) is kept apart from what
//! the broker or the connection did. [`CoreError`] is the consumer core's
//! refusal of a call, inside the crate.

use std::time::Duration;

use crate::client::{ClientError, InvalidTopicName};
use crate::connection::ConnectionError;
use crate::message_id::MessageId;

use super::core::config::SubscriptionType;
use super::subscribe::HashRange;

/// An error of the consumer layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    // --- caller misuse: settings -------------------------------------------------
    /// No topic was given.
    #[error("a consumer needs at least one topic")]
    NoTopic,
    /// A topic that is not a valid name.
    #[error(transparent)]
    InvalidTopic(#[from] InvalidTopicName),
    /// A topics pattern that is not a regular expression this client
    /// understands, or that names no namespace.
    #[error("invalid topics pattern {pattern:?}: {problem}")]
    InvalidPattern {
        /// The pattern, as given.
        pattern: String,
        /// What is wrong with it.
        problem: super::pattern::PatternProblem,
    },
    /// A check interval (partitions, topics pattern) must be longer than zero.
    #[error("{option} must be longer than zero")]
    ZeroInterval {
        /// The setting, e.g. `"auto_update_partitions_interval"`.
        option: &'static str,
    },
    /// The subscription name is empty.
    #[error("the subscription name is empty")]
    EmptySubscription,
    /// A zero receiver queue on a consumer of several topics, of a
    /// partitioned topic or with retry letters (Java refuses it too).
    #[error(
        "a zero receiver queue needs one topic that is not partitioned; this consumer has {topics}"
    )]
    ZeroQueueNeedsOneTopic {
        /// How many topics (partitions, the retry-letter topic) it has.
        topics: usize,
    },
    /// A zero receiver queue on a pattern consumer, which may read many
    /// topics (as Java, it needs one topic that is not partitioned).
    #[error(
        "a zero receiver queue needs one topic that is not partitioned; a topics pattern may read many"
    )]
    ZeroQueueWithPattern,
    /// The bound on the receiver queues across partitions must be at least 1.
    #[error("max_total_receiver_queue_size_across_partitions must be at least 1")]
    ZeroTotalReceiverQueue,
    /// The bound on the bytes of chunked messages being assembled must be
    /// at least 1.
    #[error("max_pending_chunked_bytes must be at least 1")]
    ZeroPendingChunkedBytes,
    /// A batch receive policy without any bound: no message count, no byte
    /// size and no timeout.
    #[error("a batch receive policy needs a message count, a byte size or a timeout")]
    UnboundedBatchReceive,
    /// An ack group time, when set, must be longer than zero.
    #[error("ack_group_time, when set, must be longer than zero")]
    ZeroAckGroupTime,
    /// Priority levels start at 0 (the highest).
    #[error("priority level {level} is negative")]
    NegativePriority {
        /// The level given.
        level: i32,
    },
    /// A Key_Shared policy on a subscription of another type.
    #[error("a key_shared policy needs a KeyShared subscription, not {subscription:?}")]
    KeySharedPolicyOnOtherType {
        /// The subscription type that was set.
        subscription: SubscriptionType,
    },
    /// A sticky Key_Shared policy without any hash range.
    #[error("a sticky key_shared policy needs at least one hash range")]
    NoHashRanges,
    /// A hash range whose start is after its end.
    #[error("hash range {}..={} is empty", range.start, range.end)]
    InvalidHashRange {
        /// The range given.
        range: HashRange,
    },
    /// Two sticky hash ranges overlap.
    #[error("hash ranges {}..={} and {}..={} overlap", first.start, first.end, second.start, second.end)]
    OverlappingHashRanges {
        /// The range that starts first.
        first: HashRange,
        /// The range that starts inside it.
        second: HashRange,
    },

    /// The consumer core refused its settings (ack timeout, tick, nack or
    /// dead-letter policy).
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// [`ack_in`](super::Consumer::ack_in) could not add the subscription to
    /// the transaction, or the transaction is not open.
    #[error(transparent)]
    Transaction(#[from] crate::transaction::TransactionError),

    // --- caller misuse: calls ------------------------------------------------------
    /// Cumulative ack is only allowed on Exclusive and Failover subscriptions.
    #[error("cumulative ack is not allowed on a {subscription:?} subscription")]
    CumulativeAckNotAllowed {
        /// This consumer's subscription type.
        subscription: SubscriptionType,
    },
    /// The message did not come from this consumer.
    #[error("message from topic {topic} does not belong to this consumer")]
    ForeignMessage {
        /// The message's topic.
        topic: String,
    },
    /// A call that needs a single topic, on a consumer of several topics
    /// or partitions.
    #[error("this call needs a consumer of one topic; this one has {count}")]
    MultipleTopics {
        /// How many topics (partitions) the consumer has.
        count: usize,
    },
    /// [`Consumer::run`](super::Consumer::run) with a concurrency of 0.
    #[error("run needs a concurrency of at least 1")]
    ZeroConcurrency,
    /// `reconsume_later` on a consumer built without
    /// [`enable_retry`](super::ConsumerBuilder::enable_retry).
    #[error("reconsume_later needs a consumer built with enable_retry(true)")]
    RetryNotEnabled,
    /// A batched message reached a consumer with a zero receiver queue,
    /// which cannot take batches (as in Java). The consumer closed itself:
    /// this call and every later receive fail with this error. The batch
    /// was not acked; it stays in the subscription.
    #[error(
        "batched message {id} on {topic} reached a consumer with a zero receiver queue; the consumer is closed"
    )]
    BatchOnZeroQueue {
        /// The topic it came from.
        topic: String,
        /// The batch entry's id.
        id: crate::message_id::MessageId,
    },
    /// [`receive_batch`](super::Consumer::receive_batch) on a consumer
    /// with a zero receiver queue (it has no queue to gather a batch in).
    #[error("receive_batch needs a receiver queue; this consumer's is zero")]
    BatchReceiveOnZeroQueue,
    /// The consumer was closed (or unsubscribed); no more calls.
    #[error("the consumer is closed")]
    Closed,
    /// The consumer's task stopped without being closed: it panicked (a
    /// bug; the panic is in the log). Nothing more can be received; the
    /// messages it held return to the subscription when its connection
    /// closes.
    #[error("the consumer's task stopped unexpectedly (it panicked)")]
    TaskFailed,

    // --- the broker, the connection --------------------------------------------
    /// Finding or reaching the broker of `topic` failed.
    #[error("consumer on {topic}: {source}")]
    Client {
        /// The topic (partition).
        topic: String,
        /// Why.
        source: ClientError,
    },
    /// A request on the topic's connection failed (broker error code,
    /// timeout, lost connection).
    #[error("{op} on {topic} failed: {source}")]
    Request {
        /// The request, e.g. `"SUBSCRIBE"`.
        op: &'static str,
        /// The topic (partition).
        topic: String,
        /// Why.
        source: ConnectionError,
    },
    /// The broker answered a request with the wrong kind of response.
    #[error("{op} on {topic}: unexpected answer {got}")]
    UnexpectedResponse {
        /// The request.
        op: &'static str,
        /// The topic (partition).
        topic: String,
        /// The response that came (its protocol name).
        got: &'static str,
    },
    /// Publishing a dead-letter or retry copy failed (creating its producer
    /// or the send); the original was not acked.
    #[error("publishing a copy to {topic} failed: {source}")]
    Letter {
        /// The dead-letter or retry topic.
        topic: String,
        /// Why.
        source: Box<crate::producer::ProducerError>,
    },
    /// Creating the dead-letter policy's `initial_subscription_name` on the
    /// dead-letter topic failed; nothing was forwarded.
    #[error("creating subscription {subscription} on {topic} failed: {source}")]
    InitialSubscription {
        /// The dead-letter topic.
        topic: String,
        /// The subscription name.
        subscription: String,
        /// Why.
        source: Box<Self>,
    },
    /// With ack receipts: an ack that could not be sent and confirmed, because
    /// the consumer closed first (a batch member whose batch was not fully
    /// acked, a partition still subscribing again), or it named a batch
    /// member the consumer cannot ack without acking its siblings. The
    /// message comes back unless it is acked again.
    #[error(
        "an ack on {topic} was not sent: the consumer closed first, or its batch was never complete"
    )]
    AckNotSent {
        /// The topic (partition).
        topic: String,
    },
    /// A message this consumer cannot decode: encrypted (with
    /// [`CryptoFailureAction::Fail`](super::CryptoFailureAction::Fail)), or
    /// compressed with a codec it does not know. It was not acked: it stays
    /// in the subscription for a consumer that can read it, and comes back
    /// after the ack timeout, if set, or when this consumer closes or
    /// reconnects. Other messages keep coming.
    #[error("message {id} on {topic} cannot be read: {reason}")]
    Unreadable {
        /// The topic (partition) it came from.
        topic: String,
        /// Its id.
        id: crate::message_id::MessageId,
        /// Why.
        reason: super::Unreadable,
    },
    /// The broker refused the consumer's schema: it cannot read the
    /// topic's (its compatibility strategy).
    #[error("the broker refused the schema of the consumer on {topic}: {message}")]
    IncompatibleSchema {
        /// The topic (partition).
        topic: String,
        /// What the broker said.
        message: String,
    },
    /// The broker closed the consumer, or its connection died, and it could
    /// not subscribe again (each attempt's error is logged).
    #[error(
        "consumer on {topic} lost its subscription; {attempts} attempts to subscribe again failed"
    )]
    Lost {
        /// The topic (partition).
        topic: String,
        /// How many times it tried.
        attempts: u32,
    },
}

impl ConsumerError {
    /// Whether this is an authentication or authorization failure, and
    /// which (see [`Error::auth_failure`](crate::error::Error::auth_failure)).
    pub fn auth_failure(&self) -> Option<crate::auth::AuthFailure> {
        crate::auth::failure_in(self)
    }

    /// Whether the same call may succeed if made again later: finding,
    /// reaching or asking the broker failed for a passing reason (see
    /// [`ConnectionError::is_retryable`]), the broker answered with the
    /// wrong kind of response, or a dead-letter or retry copy could not be
    /// published for such a reason. False for misuse, a final refusal, an
    /// unreadable message, a subscription given up for good
    /// ([`Lost`](Self::Lost)), and once the consumer is
    /// [closed](Self::is_closed).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mut consumer: pulsar_wire::Consumer) {
    /// loop {
    ///     match consumer.receive().await {
    ///         Ok(msg) => { let _ = consumer.ack(&msg).await; }
    ///         Err(e) if e.is_closed() => break,
    ///         Err(e) if e.is_retryable() => continue,
    ///         Err(e) => { eprintln!("giving up: {e}"); break; }
    ///     }
    /// }
    /// # }
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Client { source, .. } => source.is_retryable(),
            Self::Request { source, .. } => source.is_retryable(),
            Self::UnexpectedResponse { .. } => true,
            Self::Letter { source, .. } => source.is_retryable(),
            Self::InitialSubscription { source, .. } => source.is_retryable(),
            _ => false,
        }
    }

    /// Whether the consumer (or the client under it) is closed, or its
    /// task is gone: every later call fails.
    pub fn is_closed(&self) -> bool {
        match self {
            Self::Closed | Self::TaskFailed | Self::BatchOnZeroQueue { .. } => true,
            Self::Client { source, .. } => source.is_closed(),
            _ => false,
        }
    }

    /// Whether subscribing for the first time tries again after this
    /// (until the operation timeout): reaching the broker or subscribing
    /// failed in a way that may pass.
    pub(crate) fn is_passing_at_creation(&self) -> bool {
        match self {
            Self::Request { source, .. } => source.is_passing_at_creation(),
            Self::Client { source, .. } => source.is_passing_at_creation(),
            _ => false,
        }
    }

    /// Whether subscribing again gives up on this: anything but a failed
    /// attempt to reach the broker or subscribe whose cause is not
    /// [final](ConnectionError::is_final).
    pub(crate) fn is_final(&self) -> bool {
        match self {
            Self::Request { source, .. } => source.is_final(),
            Self::Client { source, .. } => source.is_final(),
            Self::UnexpectedResponse { .. } => false,
            _ => true,
        }
    }

    /// Whether the broker said the topic or the subscription does not
    /// exist (deleted): nothing of the subscription is left there.
    pub(crate) fn says_subscription_gone(&self) -> bool {
        let source = match self {
            Self::Request { source, .. }
            | Self::Client {
                source: ClientError::Request { source, .. },
                ..
            } => source,
            _ => return false,
        };
        matches!(
            source,
            ConnectionError::Server {
                code: crate::proto::ServerError::TopicNotFound
                    | crate::proto::ServerError::SubscriptionNotFound,
                ..
            }
        )
    }

    /// Whether the caller, not the broker, is at fault (a setting that
    /// cannot work, a forbidden call, a closed consumer).
    pub fn is_misuse(&self) -> bool {
        !matches!(
            self,
            Self::Client { .. }
                | Self::Request { .. }
                | Self::UnexpectedResponse { .. }
                | Self::Lost { .. }
                | Self::BatchOnZeroQueue { .. }
                | Self::AckNotSent { .. }
                | Self::Letter { .. }
                | Self::InitialSubscription { .. }
                | Self::Unreadable { .. }
        )
    }
}

/// A consumer setting or policy that cannot work; found when it is
/// validated, before any message flows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The ack-timeout tick must be longer than zero.
    #[error("the ack-timeout tick must be longer than zero")]
    ZeroTick,
    /// An ack timeout, when set, must be longer than zero.
    #[error("ack_timeout, when set, must be longer than zero")]
    ZeroAckTimeout,
    /// An ack timeout or a dead-letter policy needs per-message tracking,
    /// which is off (a reader).
    #[error("an ack timeout or dead-letter policy needs per-message tracking")]
    UntrackedWithRedelivery,
    /// A redelivery backoff with `min > max`, or a multiplier that is below 1
    /// or not a finite number.
    #[error("invalid redelivery backoff: min {min:?}, max {max:?}, multiplier {multiplier}")]
    InvalidBackoff {
        /// The first delay.
        min: Duration,
        /// The largest delay.
        max: Duration,
        /// The factor per redelivery.
        multiplier: f64,
    },
    /// A dead-letter policy must allow at least one delivery.
    #[error("max_redeliver_count must be at least 1")]
    ZeroMaxRedeliverCount,
    /// A dead-letter policy (or retry letters, which imply one) on an
    /// Exclusive or Failover subscription: the broker keeps no redelivery
    /// counts there (every delivery says 0), so the policy could never act.
    #[error(
        "a dead-letter policy or retry letters need a Shared or KeyShared subscription, not {subscription:?}"
    )]
    DeadLetterNeedsSharedSubscription {
        /// The subscription type that was set.
        subscription: SubscriptionType,
    },
    /// A topic or subscription name that was given but is empty.
    #[error("{field} is set but empty")]
    EmptyName {
        /// Which setting: `dead_letter_topic`, `retry_letter_topic` or
        /// `initial_subscription_name`.
        field: &'static str,
    },
}

/// A message the consumer core refuses: a peer's inconsistent input. The
/// message is dropped (its permit is given back); the core's state is
/// otherwise unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CoreError {
    /// A message whose id names a batch member without a batch size that
    /// holds it (or a batch size on an id that is no batch member).
    #[error("message {id} has batch_size {batch_size:?}, which does not match its batch index")]
    InconsistentBatch {
        /// The message id as received.
        id: MessageId,
        /// The batch size that came with it.
        batch_size: Option<u32>,
    },
}

/// A cumulative ack the core refuses: only Exclusive and Failover
/// subscriptions allow it (on Shared and Key_Shared other consumers hold
/// messages before this one). The core's state is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CumulativeAckNotAllowed {
    /// The subscription type of this consumer.
    pub(crate) subscription: SubscriptionType,
}

impl From<CumulativeAckNotAllowed> for ConsumerError {
    fn from(refused: CumulativeAckNotAllowed) -> Self {
        Self::CumulativeAckNotAllowed {
            subscription: refused.subscription,
        }
    }
}
