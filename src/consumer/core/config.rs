//! What the consumer core needs to know: subscription type, receiver queue,
//! timers and policies (pure).

use std::time::Duration;

use crate::proto::command_subscribe::SubType;

use super::dead_letter::DeadLetterPolicy;
use super::nack::{NackPolicy, RedeliveryBackoff};
use crate::consumer::error::ConfigError;

/// How a subscription shares its messages among its consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SubscriptionType {
    /// One consumer; others are refused (the default).
    #[default]
    Exclusive,
    /// Messages spread over every consumer, each acked individually.
    Shared,
    /// One active consumer, others stand by.
    Failover,
    /// Messages spread over consumers by key; one key, one consumer.
    KeyShared,
}

impl SubscriptionType {
    /// Whether the broker keeps redelivery counts and honours the ids of a
    /// redelivery request (Shared, Key_Shared). On Exclusive and Failover it
    /// ignores them and rewinds to the first unacked message instead.
    pub fn redelivers_by_id(self) -> bool {
        matches!(self, Self::Shared | Self::KeyShared)
    }

    /// Whether cumulative ack is allowed (Exclusive, Failover).
    pub fn allows_cumulative_ack(self) -> bool {
        !self.redelivers_by_id()
    }
}

impl From<SubscriptionType> for SubType {
    fn from(kind: SubscriptionType) -> Self {
        match kind {
            SubscriptionType::Exclusive => Self::Exclusive,
            SubscriptionType::Shared => Self::Shared,
            SubscriptionType::Failover => Self::Failover,
            SubscriptionType::KeyShared => Self::KeyShared,
        }
    }
}

/// The receiver queue of each partition of a topic of `partitions`
/// partitions: `min(queue, total / partitions)`, at least 1, as Java's
/// `maxTotalReceiverQueueSizeAcrossPartitions` (a topic that is not
/// partitioned keeps `queue`).
pub(crate) fn partition_queue_size(queue: u32, total: u32, partitions: u32) -> u32 {
    if partitions == 0 {
        return queue;
    }
    queue.min(total / partitions).max(1)
}

/// The shortest time between a nack on Exclusive or Failover and the rewind
/// it leads to, by default.
pub const DEFAULT_REWIND_MIN_DELAY: Duration = Duration::from_millis(100);

/// The consumer core's settings. [`Default`] gives an Exclusive
/// subscription, a queue of 1000, no ack timeout, a 500 ms tick, immediate
/// nacks (rewinds on Exclusive and Failover at least 100 ms apart), no
/// dead-letter policy, no batch index ack. The subscription type, queue,
/// ack timeout, dead-letter policy and batch index ack are Java's
/// defaults; the tick and the nack delay are this client's own (Java's
/// `ackTimeoutTickTime` is 1 s and its `negativeAckRedeliveryDelay` 1 min).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CoreConfig {
    /// The subscription type.
    pub subscription_type: SubscriptionType,
    /// How many messages the broker may push ahead of the application;
    /// 0: none, one permit per waiting receiver (see
    /// [`ConsumerCore::request_for_receivers`](super::ConsumerCore::request_for_receivers)).
    pub receiver_queue_size: u32,
    /// Request messages held this long without an answer again; `None`:
    /// never (they return to the subscription when the consumer leaves).
    pub ack_timeout: Option<Duration>,
    /// How often the ack timeout and delayed nacks are checked.
    pub tick: Duration,
    /// Lengthens the ack timeout of redelivered messages (Java's
    /// `ackTimeoutRedeliveryBackoff`): timeout + `backoff.delay(count)`.
    pub ack_timeout_backoff: Option<RedeliveryBackoff>,
    /// When nacked messages are requested again.
    pub nack: NackPolicy,
    /// Exclusive and Failover: the shortest time between a nack and the
    /// rewind it leads to. The rewind also waits until the application has
    /// taken every message received before it (see
    /// [`ConsumerCore::nack`](super::ConsumerCore::nack)); this bounds how
    /// often a lone nacked message comes back. Default 100 ms.
    pub rewind_min_delay: Duration,
    /// Where messages delivered too often go.
    pub dead_letter: Option<DeadLetterPolicy>,
    /// Ack batch members one by one with an `ack_set` (the broker must
    /// support batch index ack); otherwise an entry is acked once all of
    /// its members are.
    pub batch_index_ack_enabled: bool,
    /// ACKs lost with their connection are sent again on the next one
    /// (ack receipts): its answers confirm them. Otherwise nothing answers
    /// them again, and their messages' copies are dropped (and acked
    /// again) until forgotten.
    pub lost_acks_resent: bool,
    /// Keep per-message state for acks (the default). Off for a reader,
    /// which never acks: the core then remembers nothing about a message
    /// once it is handed out (no held set, no batch bookkeeping), so its
    /// memory stays flat however many messages pass; acks and nacks are
    /// ignored, and an ack timeout or dead-letter policy is refused.
    pub track_messages: bool,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            subscription_type: SubscriptionType::Exclusive,
            receiver_queue_size: 1000,
            ack_timeout: None,
            tick: Duration::from_millis(500),
            ack_timeout_backoff: None,
            nack: NackPolicy::Immediate,
            rewind_min_delay: DEFAULT_REWIND_MIN_DELAY,
            dead_letter: None,
            batch_index_ack_enabled: false,
            lost_acks_resent: false,
            track_messages: true,
        }
    }
}

impl CoreConfig {
    /// Whether the instants passed to a core matter: with an ack timeout,
    /// a delayed nack, or (Exclusive, Failover) a rewind that waits its
    /// delay from the nack. Without them, a driver may pass any instant
    /// and save reading the clock per message.
    pub(crate) fn uses_clock(&self) -> bool {
        self.ack_timeout.is_some()
            || self.nack != NackPolicy::Immediate
            || (!self.subscription_type.redelivers_by_id() && !self.rewind_min_delay.is_zero())
    }

    /// Checks every setting and policy.
    ///
    /// # Errors
    /// The first problem found, as a [`ConfigError`].
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.tick.is_zero() {
            return Err(ConfigError::ZeroTick);
        }
        if self.ack_timeout.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::ZeroAckTimeout);
        }
        if let Some(backoff) = &self.ack_timeout_backoff {
            backoff.validate()?;
        }
        self.nack.validate()?;
        if let Some(policy) = &self.dead_letter {
            policy.validate()?;
        }
        if !self.track_messages && (self.ack_timeout.is_some() || self.dead_letter.is_some()) {
            return Err(ConfigError::UntrackedWithRedelivery);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_java() {
        let config = CoreConfig::default();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.receiver_queue_size, 1000);
        assert_eq!(config.tick, Duration::from_millis(500));
    }

    #[test]
    fn each_bad_setting_is_its_own_error() {
        let bad = |change: fn(&mut CoreConfig)| {
            let mut config = CoreConfig::default();
            change(&mut config);
            config.validate().unwrap_err()
        };
        assert_eq!(bad(|c| c.tick = Duration::ZERO), ConfigError::ZeroTick);
        assert_eq!(
            bad(|c| c.ack_timeout = Some(Duration::ZERO)),
            ConfigError::ZeroAckTimeout
        );
        assert!(matches!(
            bad(|c| c.nack = NackPolicy::Backoff(RedeliveryBackoff {
                multiplier: 0.0,
                ..Default::default()
            })),
            ConfigError::InvalidBackoff { .. }
        ));
        assert_eq!(
            bad(|c| c.dead_letter = Some(DeadLetterPolicy::after_redeliveries(0))),
            ConfigError::ZeroMaxRedeliverCount
        );
    }

    #[test]
    fn partitions_share_the_total_queue_as_java_does() {
        assert_eq!(partition_queue_size(1000, 50_000, 0), 1000);
        assert_eq!(partition_queue_size(1000, 50_000, 10), 1000);
        assert_eq!(partition_queue_size(1000, 50_000, 100), 500);
        assert_eq!(partition_queue_size(1000, 10, 4), 2);
        assert_eq!(partition_queue_size(1000, 10, 100), 1, "never zero");
    }

    #[test]
    fn only_shared_types_redeliver_by_id() {
        use SubscriptionType::*;
        let by_id: Vec<_> = [Exclusive, Shared, Failover, KeyShared]
            .into_iter()
            .filter(|t| t.redelivers_by_id())
            .collect();
        assert_eq!(by_id, [Shared, KeyShared]);
        assert_eq!(SubType::from(KeyShared), SubType::KeyShared);
    }

    #[test]
    fn a_shared_config_with_an_ack_timeout_is_valid() -> Result<(), Box<dyn std::error::Error>> {
        use super::{CoreConfig, SubscriptionType};
        use std::time::Duration;

        let config = CoreConfig {
            subscription_type: SubscriptionType::Shared,
            ack_timeout: Some(Duration::from_secs(30)),
            ..CoreConfig::default()
        };
        config.validate()?;
        Ok(())
    }
}
