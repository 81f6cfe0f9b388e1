//! The consumer layer's errors: a configuration that cannot work, and a
//! call the caller should not have made.

use std::time::Duration;

use crate::MessageId;

use super::config::SubscriptionType;

/// A consumer setting or policy that cannot work; found when it is
/// validated, before any message flows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The receiver queue must hold at least one message.
    #[error("receiver_queue_size must be at least 1")]
    ZeroReceiverQueue,
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

/// A call the consumer core refuses: caller misuse or a peer's inconsistent
/// input. The core's state is unchanged by the refused call, except that a
/// refused incoming message is dropped (its permit is given back).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// Cumulative ack is only allowed on Exclusive and Failover
    /// subscriptions: on Shared and Key_Shared other consumers hold
    /// messages before this one.
    #[error("cumulative ack is not allowed on a {subscription:?} subscription")]
    CumulativeAckNotAllowed {
        /// The subscription type of this consumer.
        subscription: SubscriptionType,
    },
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
