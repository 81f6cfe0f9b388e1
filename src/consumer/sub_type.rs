//! Temporary: the subscription type, until the consumer core (which owns it) is merged.

use crate::proto::command_subscribe::SubType;

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
