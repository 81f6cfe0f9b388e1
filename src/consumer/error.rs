//! The consumer layer's errors.

use std::time::Duration;

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
    /// A topic or subscription name that was given but is empty.
    #[error("{field} is set but empty")]
    EmptyName {
        /// Which setting: `dead_letter_topic`, `retry_letter_topic` or
        /// `initial_subscription_name`.
        field: &'static str,
    },
}
