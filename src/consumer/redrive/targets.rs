//! Which topics a redrive publishes to (pure): the topic a dead-letter
//! topic is named for, and the topics the user allows.

use super::SkipReason;
use crate::client::{InvalidTopicName, TopicName};
use crate::consumer::core::dead_letter::{DLQ_SUBSCRIPTION, REAL_TOPIC};
use crate::consumer::message::Message;

/// Which `REAL_TOPIC`s a redrive publishes to (see
/// [Targets](super::Redrive#targets)).
#[derive(Debug)]
pub(super) struct Targets {
    /// The dead-letter topic (its partitioned topic's name).
    dead_letter_topic: TopicName,
    /// The topics allowed besides (partitioned topics' names).
    allowed: Vec<TopicName>,
}

impl Targets {
    /// The targets of `dead_letter_topic`, and the `allowed` topics.
    pub(super) fn new(
        dead_letter_topic: &str,
        allowed: &[String],
    ) -> Result<Self, InvalidTopicName> {
        let base = |name: &str| TopicName::parse(name).map(|t| t.base());
        Ok(Self {
            dead_letter_topic: base(dead_letter_topic)?,
            allowed: allowed
                .iter()
                .map(|name| base(name))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Where `msg` goes: its `REAL_TOPIC`, if it is a target.
    pub(super) fn of(&self, msg: &Message) -> Result<String, SkipReason> {
        let properties = msg.properties();
        let real_topic = properties.get(REAL_TOPIC).ok_or(SkipReason::NoTarget)?;
        let subscription = properties.get(DLQ_SUBSCRIPTION).map(String::as_str);
        if self.allows(real_topic, subscription) {
            Ok(real_topic.clone())
        } else {
            Err(SkipReason::ForeignTarget {
                real_topic: real_topic.clone(),
            })
        }
    }

    /// Whether `real_topic` of a copy made for `subscription` (when known)
    /// is a target.
    fn allows(&self, real_topic: &str, subscription: Option<&str>) -> bool {
        let Ok(topic) = TopicName::parse(real_topic).map(|t| t.base()) else {
            return false;
        };
        if self.allowed.contains(&topic) {
            return true;
        }
        // The default dead-letter topic of `topic`: `<topic>-<subscription>-DLQ`.
        let middle = self
            .dead_letter_topic
            .as_str()
            .strip_prefix(topic.as_str())
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|rest| rest.strip_suffix("-DLQ"));
        match (middle, subscription) {
            (Some(middle), Some(subscription)) => middle == subscription,
            (Some(middle), None) => !middle.is_empty(),
            (None, _) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DLQ: &str = "persistent://public/default/orders-billing-DLQ";

    fn targets(allowed: &[&str]) -> Targets {
        let allowed: Vec<String> = allowed.iter().map(|&a| a.to_owned()).collect();
        Targets::new(DLQ, &allowed).expect("topic names")
    }

    #[test]
    fn the_topic_a_default_dead_letter_topic_is_named_for_is_a_target() {
        let t = targets(&[]);
        let orders = "persistent://public/default/orders";
        assert!(t.allows(orders, Some("billing")));
        assert!(
            t.allows("orders-partition-2", Some("billing")),
            "a partition"
        );
        assert!(t.allows(orders, None), "a copy without DLQ_SUBSCRIPTION");
        assert!(!t.allows(orders, Some("other")), "another subscription's");
        assert!(!t.allows("persistent://ops/secure/commands", Some("billing")));
        assert!(!t.allows("persistent://public/default/orders-billing", None));
        assert!(!t.allows("persistent://public/default/order", None));
        assert!(!t.allows("non-persistent://public/default/orders", None));
        assert!(!t.allows("a/b", None), "not a topic name");
    }

    #[test]
    fn an_allowed_topic_and_its_partitions_are_targets() {
        let t = targets(&["persistent://ops/secure/commands"]);
        assert!(t.allows("persistent://ops/secure/commands", Some("x")));
        assert!(t.allows("persistent://ops/secure/commands-partition-0", None));
        assert!(!t.allows("persistent://ops/secure/other", None));
    }

    #[test]
    fn a_name_that_is_not_a_topic_is_a_typed_error() {
        let err = Targets::new(DLQ, &["a/b".to_owned()]).expect_err("invalid");
        assert_eq!(err.name, "a/b");
    }
}
