//! What a subscription asks of the broker, and the `CommandSubscribe` body
//! built from it (pure).

use crate::ids::{ConsumerId, RequestId};
use crate::message_id::MessageId;
use crate::proto::command_subscribe::{InitialPosition as ProtoPosition, SubType};
use crate::proto::{self, KeySharedMode};

use super::core::config::SubscriptionType;
use super::error::ConsumerError;

/// Where a new subscription starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InitialPosition {
    /// After the last message published so far (the default).
    #[default]
    Latest,
    /// At the oldest message still stored.
    Earliest,
}

/// A range of key hashes `start..=end` (within `0..=65535`) a Key_Shared
/// consumer takes with [`KeySharedPolicy::Sticky`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashRange {
    /// First hash, inclusive.
    pub start: u16,
    /// Last hash, inclusive.
    pub end: u16,
}

/// How a Key_Shared consumer gets its keys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KeySharedPolicy {
    /// The broker splits the hash space among the consumers (the default).
    #[default]
    AutoSplit,
    /// This consumer takes exactly these hash ranges; they must not
    /// overlap each other (nor, on the broker, another consumer's).
    Sticky(Vec<HashRange>),
}

/// The subscription settings that go into every SUBSCRIBE.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct SubscribeOptions {
    pub(crate) subscription: String,
    pub(crate) subscription_type: SubscriptionType,
    pub(crate) key_shared: Option<KeySharedPolicy>,
    pub(crate) initial_position: InitialPosition,
    pub(crate) durable: bool,
    pub(crate) consumer_name: Option<String>,
    pub(crate) priority_level: Option<i32>,
    /// For a reader: the id it starts at.
    pub(crate) start_message_id: Option<MessageId>,
    /// Whether the message at a start or seek id is delivered too.
    pub(crate) start_inclusive: bool,
    /// The schema registered in SUBSCRIBE (none for bytes).
    pub(crate) schema: Option<proto::Schema>,
    /// Key_Shared: the broker may deliver a key's messages out of order.
    pub(crate) allow_out_of_order_delivery: bool,
}

impl SubscribeOptions {
    /// Checks what the broker would refuse, or what cannot mean anything.
    pub(crate) fn validate(&self) -> Result<(), ConsumerError> {
        if self.subscription.is_empty() {
            return Err(ConsumerError::EmptySubscription);
        }
        if let Some(level) = self.priority_level.filter(|l| *l < 0) {
            return Err(ConsumerError::NegativePriority { level });
        }
        let key_shared_set = self.key_shared.is_some() || self.allow_out_of_order_delivery;
        if key_shared_set && self.subscription_type != SubscriptionType::KeyShared {
            return Err(ConsumerError::KeySharedPolicyOnOtherType {
                subscription: self.subscription_type,
            });
        }
        match &self.key_shared {
            Some(KeySharedPolicy::Sticky(ranges)) => validate_ranges(ranges),
            _ => Ok(()),
        }
    }

    /// The SUBSCRIBE body for `topic`, as `consumer`, in request `request`.
    pub(crate) fn body(
        &self,
        topic: &str,
        consumer: ConsumerId,
        request: RequestId,
        consumer_epoch: Option<u64>,
    ) -> proto::CommandSubscribe {
        let key_shared_meta = (self.subscription_type == SubscriptionType::KeyShared).then(|| {
            let meta = match self
                .key_shared
                .as_ref()
                .unwrap_or(&KeySharedPolicy::AutoSplit)
            {
                KeySharedPolicy::AutoSplit => proto::KeySharedMeta {
                    key_shared_mode: KeySharedMode::AutoSplit as i32,
                    ..proto::KeySharedMeta::default()
                },
                KeySharedPolicy::Sticky(ranges) => proto::KeySharedMeta {
                    key_shared_mode: KeySharedMode::Sticky as i32,
                    hash_ranges: ranges
                        .iter()
                        .map(|r| proto::IntRange {
                            start: i32::from(r.start),
                            end: i32::from(r.end),
                        })
                        .collect(),
                    ..proto::KeySharedMeta::default()
                },
            };
            proto::KeySharedMeta {
                allow_out_of_order_delivery: Some(self.allow_out_of_order_delivery),
                ..meta
            }
        });
        let position = match self.initial_position {
            InitialPosition::Latest => ProtoPosition::Latest,
            InitialPosition::Earliest => ProtoPosition::Earliest,
        };
        proto::CommandSubscribe {
            topic: topic.to_owned(),
            subscription: self.subscription.clone(),
            sub_type: SubType::from(self.subscription_type) as i32,
            consumer_id: consumer.0,
            request_id: request.0,
            consumer_name: self.consumer_name.clone(),
            priority_level: self.priority_level,
            durable: Some(self.durable),
            start_message_id: self.start_message_id.map(|id| wire_start(id).to_proto()),
            initial_position: Some(position as i32),
            key_shared_meta,
            consumer_epoch,
            schema: self.schema.clone(),
            ..proto::CommandSubscribe::default()
        }
    }
}

/// The start id as sent: a message id goes as a batch member (index 0 for
/// a whole entry), which makes brokers include its entry, and a chunked
/// message's as its first chunk's; the consumer then drops what is before
/// the start (see `position.rs`).
fn wire_start(id: MessageId) -> MessageId {
    if id == MessageId::EARLIEST || id == MessageId::LATEST {
        id
    } else {
        let id = id.start();
        id.with_batch_index(id.batch_index.max(0))
    }
}

fn validate_ranges(ranges: &[HashRange]) -> Result<(), ConsumerError> {
    if ranges.is_empty() {
        return Err(ConsumerError::NoHashRanges);
    }
    let mut sorted = ranges.to_vec();
    sorted.sort_by_key(|r| r.start);
    for r in &sorted {
        if r.start > r.end {
            return Err(ConsumerError::InvalidHashRange { range: *r });
        }
    }
    for pair in sorted.windows(2) {
        if pair[1].start <= pair[0].end {
            return Err(ConsumerError::OverlappingHashRanges {
                first: pair[0],
                second: pair[1],
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(kind: SubscriptionType) -> SubscribeOptions {
        SubscribeOptions {
            subscription: "sub".into(),
            subscription_type: kind,
            durable: true,
            ..SubscribeOptions::default()
        }
    }

    #[test]
    fn the_body_carries_every_setting() {
        let o = SubscribeOptions {
            initial_position: InitialPosition::Earliest,
            consumer_name: Some("me".into()),
            priority_level: Some(2),
            durable: false,
            ..options(SubscriptionType::Shared)
        };
        let b = o.body(
            "persistent://public/default/t",
            ConsumerId(3),
            RequestId(4),
            None,
        );
        assert_eq!(b.sub_type, SubType::Shared as i32);
        assert_eq!((b.consumer_id, b.request_id), (3, 4));
        assert_eq!(b.initial_position, Some(ProtoPosition::Earliest as i32));
        assert_eq!(b.durable, Some(false));
        assert_eq!(b.consumer_name.as_deref(), Some("me"));
        assert_eq!(b.priority_level, Some(2));
        assert!(b.key_shared_meta.is_none());
    }

    #[test]
    fn key_shared_defaults_to_auto_split_and_sends_sticky_ranges() {
        let auto =
            options(SubscriptionType::KeyShared).body("t", ConsumerId(1), RequestId(1), None);
        let meta = auto.key_shared_meta.expect("meta");
        assert_eq!(meta.key_shared_mode, KeySharedMode::AutoSplit as i32);
        assert_eq!(meta.allow_out_of_order_delivery, Some(false));
        let out_of_order = SubscribeOptions {
            allow_out_of_order_delivery: true,
            ..options(SubscriptionType::KeyShared)
        };
        out_of_order.validate().expect("valid");
        let meta = out_of_order
            .body("t", ConsumerId(1), RequestId(1), None)
            .key_shared_meta
            .expect("meta");
        assert_eq!(meta.allow_out_of_order_delivery, Some(true));
        let sticky = SubscribeOptions {
            key_shared: Some(KeySharedPolicy::Sticky(vec![HashRange {
                start: 0,
                end: 99,
            }])),
            ..options(SubscriptionType::KeyShared)
        };
        sticky.validate().expect("valid");
        let meta = sticky
            .body("t", ConsumerId(1), RequestId(1), None)
            .key_shared_meta
            .expect("meta");
        assert_eq!(meta.key_shared_mode, KeySharedMode::Sticky as i32);
        assert_eq!(meta.hash_ranges, [proto::IntRange { start: 0, end: 99 }]);
    }

    #[test]
    fn validation_refuses_what_cannot_work() {
        let mut o = options(SubscriptionType::Shared);
        o.subscription.clear();
        assert!(matches!(
            o.validate(),
            Err(ConsumerError::EmptySubscription)
        ));
        let o = SubscribeOptions {
            priority_level: Some(-1),
            ..options(SubscriptionType::Shared)
        };
        assert!(matches!(
            o.validate(),
            Err(ConsumerError::NegativePriority { level: -1 })
        ));
        let o = SubscribeOptions {
            key_shared: Some(KeySharedPolicy::AutoSplit),
            ..options(SubscriptionType::Shared)
        };
        assert!(matches!(
            o.validate(),
            Err(ConsumerError::KeySharedPolicyOnOtherType { .. })
        ));
        let o = SubscribeOptions {
            allow_out_of_order_delivery: true,
            ..options(SubscriptionType::Failover)
        };
        assert!(matches!(
            o.validate(),
            Err(ConsumerError::KeySharedPolicyOnOtherType { .. })
        ));
        let sticky = |ranges| SubscribeOptions {
            key_shared: Some(KeySharedPolicy::Sticky(ranges)),
            ..options(SubscriptionType::KeyShared)
        };
        let r = |start, end| HashRange { start, end };
        assert!(matches!(
            sticky(vec![]).validate(),
            Err(ConsumerError::NoHashRanges)
        ));
        assert!(matches!(
            sticky(vec![r(5, 1)]).validate(),
            Err(ConsumerError::InvalidHashRange { .. })
        ));
        assert!(matches!(
            sticky(vec![r(10, 20), r(0, 10)]).validate(),
            Err(ConsumerError::OverlappingHashRanges { .. })
        ));
        sticky(vec![r(10, 20), r(0, 9)])
            .validate()
            .expect("adjacent is fine");
    }
}
