//! The dead-letter and retry-letter policy, and the properties of the
//! copies it publishes (pure).
//!
//! A message delivered too often is published to the dead-letter topic
//! (default `<topic>-<subscription>-DLQ`) with its original properties plus
//! [`REAL_TOPIC`] and [`ORIGIN_MESSAGE_ID`], and the original is acked only
//! once that publish is confirmed. With [`DeadLetterCutoff::OnArrival`] (the
//! default, and the contract) a message arriving with a redelivery count
//! `>= max_redeliver_count` never reaches the application: with a maximum of
//! 3 the application sees counts 0, 1 and 2. [`DeadLetterCutoff::JavaStyle`]
//! hands it over once more and forwards it on its next redelivery request.
//!
//! [`Consumer::reconsume_later`](crate::consumer::Consumer::reconsume_later)
//! publishes to the retry-letter topic (default
//! `<topic>-<subscription>-RETRY`) with [`RECONSUMETIMES`] and
//! [`DELAY_TIME`].

use std::time::Duration;

use crate::message_id::MessageId;

use crate::consumer::error::ConfigError;

/// Property: the full name of the topic the message was first published to.
pub const REAL_TOPIC: &str = "REAL_TOPIC";
/// Property: the original message id, `ledger:entry:partition[:batch]`.
pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// Property: how many times the message went through the retry topic.
pub const RECONSUMETIMES: &str = "RECONSUMETIMES";
/// Property: the retry delay in milliseconds.
pub const DELAY_TIME: &str = "DELAY_TIME";
/// Dead-letter property: the subscription whose consumer forwarded the
/// message.
pub const DLQ_SUBSCRIPTION: &str = "DLQ_SUBSCRIPTION";
/// Dead-letter property: how many times the message was handed to the
/// application before it was forwarded (the broker's count: with the
/// default [`DeadLetterCutoff::OnArrival`] and `max_redeliver_count` 3,
/// it is 3).
pub const DLQ_DELIVERY_COUNT: &str = "DLQ_DELIVERY_COUNT";
/// Dead-letter property: when the forwarding consumer first handed the
/// message out, in ms since the Unix epoch (absent if it never did).
pub const DLQ_FIRST_DELIVERY_TIME: &str = "DLQ_FIRST_DELIVERY_TIME";
/// Dead-letter property: when the forwarding consumer last handed the
/// message out, in ms since the Unix epoch (absent if it never did).
pub const DLQ_LAST_DELIVERY_TIME: &str = "DLQ_LAST_DELIVERY_TIME";
/// Dead-letter property: the `Display` of the last error a
/// [`Consumer::run`](crate::consumer::Consumer::run) handler returned for
/// the message (or its panic), at most 1024 bytes; absent if none failed.
pub const DLQ_LAST_ERROR: &str = "DLQ_LAST_ERROR";

/// Every property a dead-letter or retry copy gets on top of the
/// message's own: what [`redrive`](crate::consumer::Redrive) strips
/// before publishing a message again.
pub const LETTER_PROPERTIES: [&str; 10] = [
    REAL_TOPIC,
    ORIGIN_MESSAGE_ID,
    RECONSUMETIMES,
    DELAY_TIME,
    "RETRY_TOPIC",
    DLQ_SUBSCRIPTION,
    DLQ_DELIVERY_COUNT,
    DLQ_FIRST_DELIVERY_TIME,
    DLQ_LAST_DELIVERY_TIME,
    DLQ_LAST_ERROR,
];

/// What the forwarding consumer knows of a message's deliveries, for the
/// `DLQ_*` properties of its dead-letter copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeliveryFacts<'a> {
    /// The consumer's subscription.
    pub(crate) subscription: &'a str,
    /// Times handed to the application; `None` when not known.
    pub(crate) deliveries: Option<u32>,
    /// First and last hand-out by this consumer, ms since the Unix epoch.
    pub(crate) first_and_last_ms: Option<(u64, u64)>,
    /// The handler's last error (already capped).
    pub(crate) last_error: Option<&'a str>,
}

/// Sets the `DLQ_*` properties of `facts` (replacing those of an earlier
/// trip through a dead-letter topic).
pub(crate) fn add_delivery_facts(
    properties: &mut Vec<(String, String)>,
    facts: &DeliveryFacts<'_>,
) {
    set(properties, DLQ_SUBSCRIPTION, facts.subscription.to_owned());
    let mut known = Vec::new();
    if let Some(n) = facts.deliveries {
        known.push((DLQ_DELIVERY_COUNT, n.to_string()));
    }
    if let Some((first, last)) = facts.first_and_last_ms {
        known.push((DLQ_FIRST_DELIVERY_TIME, first.to_string()));
        known.push((DLQ_LAST_DELIVERY_TIME, last.to_string()));
    }
    if let Some(error) = facts.last_error {
        known.push((DLQ_LAST_ERROR, error.to_owned()));
    }
    for key in [
        DLQ_DELIVERY_COUNT,
        DLQ_FIRST_DELIVERY_TIME,
        DLQ_LAST_DELIVERY_TIME,
        DLQ_LAST_ERROR,
    ] {
        match known.iter().position(|(k, _)| *k == key) {
            Some(at) => set(properties, key, std::mem::take(&mut known[at].1)),
            // Not known now: a value from an earlier trip would mislead.
            None => properties.retain(|(k, _)| k != key),
        }
    }
}

/// The properties of a dead-lettered message published again: its own,
/// without [`LETTER_PROPERTIES`].
pub fn without_letter_properties<'a>(
    properties: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<(String, String)> {
    let mut kept: Vec<(String, String)> = properties
        .into_iter()
        .filter(|(k, _)| !LETTER_PROPERTIES.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    kept.sort();
    kept
}

/// When a message at the redelivery limit is forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeadLetterCutoff {
    /// On arrival with `redelivery_count >= max_redeliver_count`; the
    /// application never sees it (the contract).
    #[default]
    OnArrival,
    /// As the Java client: the application sees it once more (count ==
    /// max), and it is forwarded when it is next nacked or times out.
    JavaStyle,
}

/// Where and when messages that keep failing go.
///
/// # Examples
/// ```
/// use pulsar_wire::consumer::dead_letter::DeadLetterPolicy;
/// let policy = DeadLetterPolicy::after_redeliveries(3);
/// policy.validate()?;
/// assert_eq!(policy.dead_letter_topic("persistent://t/n/orders", "billing"),
///            "persistent://t/n/orders-billing-DLQ");
/// # Ok::<(), pulsar_wire::consumer::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterPolicy {
    /// Deliveries allowed before a message is forwarded (at least 1).
    pub max_redeliver_count: u32,
    /// The dead-letter topic; `None`: `<topic>-<subscription>-DLQ`.
    pub dead_letter_topic: Option<String>,
    /// The retry-letter topic; `None`: `<topic>-<subscription>-RETRY`.
    pub retry_letter_topic: Option<String>,
    /// A subscription to create on the dead-letter topic before the first
    /// forward, so the copies are retained.
    pub initial_subscription_name: Option<String>,
    /// When a message at the limit is forwarded.
    pub cutoff: DeadLetterCutoff,
}

impl DeadLetterPolicy {
    /// Forward after `max_redeliver_count` deliveries, to the default topics.
    pub fn after_redeliveries(max_redeliver_count: u32) -> Self {
        Self {
            max_redeliver_count,
            dead_letter_topic: None,
            retry_letter_topic: None,
            initial_subscription_name: None,
            cutoff: DeadLetterCutoff::OnArrival,
        }
    }

    /// Checks the policy.
    ///
    /// # Errors
    /// [`ConfigError::ZeroMaxRedeliverCount`], or [`ConfigError::EmptyName`]
    /// for a topic or subscription name that is set but empty.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_redeliver_count == 0 {
            return Err(ConfigError::ZeroMaxRedeliverCount);
        }
        for (field, name) in [
            ("dead_letter_topic", &self.dead_letter_topic),
            ("retry_letter_topic", &self.retry_letter_topic),
            ("initial_subscription_name", &self.initial_subscription_name),
        ] {
            if name.as_deref().is_some_and(|n| n.trim().is_empty()) {
                return Err(ConfigError::EmptyName { field });
            }
        }
        Ok(())
    }

    /// The dead-letter topic of `topic`'s `subscription`.
    pub fn dead_letter_topic(&self, topic: &str, subscription: &str) -> String {
        self.dead_letter_topic
            .clone()
            .unwrap_or_else(|| format!("{topic}-{subscription}-DLQ"))
    }

    /// The retry-letter topic of `topic`'s `subscription`.
    pub fn retry_letter_topic(&self, topic: &str, subscription: &str) -> String {
        self.retry_letter_topic
            .clone()
            .unwrap_or_else(|| format!("{topic}-{subscription}-RETRY"))
    }

    /// Whether a message arriving with `redelivery_count` is forwarded
    /// without reaching the application.
    pub(crate) fn forwards_on_arrival(&self, redelivery_count: u32) -> bool {
        self.cutoff == DeadLetterCutoff::OnArrival && self.reached(redelivery_count)
    }

    /// Whether `redelivery_count` is at or past the limit.
    pub(crate) fn reached(&self, redelivery_count: u32) -> bool {
        redelivery_count >= self.max_redeliver_count
    }
}

/// Sets `key` to `value`, in place if present, appended if not.
fn set(properties: &mut Vec<(String, String)>, key: &str, value: String) {
    match properties.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value,
        None => properties.push((key.to_owned(), value)),
    }
}

/// Adds `key` unless present (the first hop's value is kept).
fn set_if_absent(
    properties: &mut Vec<(String, String)>,
    key: &str,
    value: impl FnOnce() -> String,
) {
    if !properties.iter().any(|(k, _)| k == key) {
        properties.push((key.to_owned(), value()));
    }
}

fn collect<K: Into<String>, V: Into<String>>(
    properties: impl IntoIterator<Item = (K, V)>,
) -> Vec<(String, String)> {
    properties
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

/// Where the consumer that makes a copy read the message from: decides
/// whose [`REAL_TOPIC`] and [`ORIGIN_MESSAGE_ID`] the copy carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadFrom {
    /// A topic it subscribed to: the copy names that topic and the
    /// message's id there, replacing any value the producer wrote (a
    /// producer must not choose where a redrive publishes).
    Topic,
    /// Its own retry-letter topic, whose copies this subscription's
    /// consumers made: the values there name the first topic and id, and
    /// are kept (set only if missing).
    RetryTopic,
}

/// Sets [`REAL_TOPIC`] and [`ORIGIN_MESSAGE_ID`] as `read_from` says.
fn set_origin(
    properties: &mut Vec<(String, String)>,
    read_from: ReadFrom,
    real_topic: &str,
    origin: MessageId,
) {
    match read_from {
        ReadFrom::Topic => {
            set(properties, REAL_TOPIC, real_topic.to_owned());
            set(properties, ORIGIN_MESSAGE_ID, origin.to_string());
        }
        ReadFrom::RetryTopic => {
            set_if_absent(properties, REAL_TOPIC, || real_topic.to_owned());
            set_if_absent(properties, ORIGIN_MESSAGE_ID, || origin.to_string());
        }
    }
}

/// The properties of the dead-letter copy of a message read from
/// `real_topic` (as `read_from` says): its own, plus [`REAL_TOPIC`] =
/// `real_topic` and [`ORIGIN_MESSAGE_ID`] = `origin`; a retry letter
/// keeps those of its first hop.
pub(crate) fn dead_letter_properties<K: Into<String>, V: Into<String>>(
    original: impl IntoIterator<Item = (K, V)>,
    read_from: ReadFrom,
    real_topic: &str,
    origin: MessageId,
) -> Vec<(String, String)> {
    let mut properties = collect(original);
    set_origin(&mut properties, read_from, real_topic, origin);
    properties
}

/// Where `reconsume_later` sends a message, with the copy's properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reconsume {
    /// Publish to the retry-letter topic, delivered after `delay`
    /// (`deliver_at_time` = publish time + delay).
    Retry {
        /// The copy's properties, with `RECONSUMETIMES` and `DELAY_TIME`.
        properties: Vec<(String, String)>,
        /// How long the broker holds it.
        delay: Duration,
    },
    /// `RECONSUMETIMES` would exceed `max_redeliver_count`: publish to the
    /// dead-letter topic instead, at once.
    DeadLetter {
        /// The copy's properties, with `RECONSUMETIMES` (no `DELAY_TIME`).
        properties: Vec<(String, String)>,
    },
}

/// Decides where `reconsume_later(msg, delay)` sends a message read from
/// `real_topic` (as `read_from` says) and builds its properties: the
/// original ones, then `custom` (they travel along), [`REAL_TOPIC`] and
/// [`ORIGIN_MESSAGE_ID`] (as [`dead_letter_properties`] sets them: kept
/// from an earlier hop through the retry topic, never from the producer),
/// [`RECONSUMETIMES`] = previous + 1 (1 the first time) and, for a retry,
/// [`DELAY_TIME`] in milliseconds. The original is acked once the copy's
/// publish is confirmed, as for a dead-letter forward.
pub(crate) fn reconsume_later<K1, V1, K2, V2>(
    policy: &DeadLetterPolicy,
    original: impl IntoIterator<Item = (K1, V1)>,
    custom: impl IntoIterator<Item = (K2, V2)>,
    read_from: ReadFrom,
    real_topic: &str,
    origin: MessageId,
    delay: Duration,
) -> Reconsume
where
    K1: Into<String>,
    V1: Into<String>,
    K2: Into<String>,
    V2: Into<String>,
{
    let mut properties = collect(original);
    for (key, value) in collect(custom) {
        set(&mut properties, &key, value);
    }
    let times = properties
        .iter()
        .find(|(k, _)| k == RECONSUMETIMES)
        .and_then(|(_, v)| v.trim().parse::<u32>().ok())
        .unwrap_or(0)
        .saturating_add(1);
    set_origin(&mut properties, read_from, real_topic, origin);
    set(&mut properties, RECONSUMETIMES, times.to_string());
    if times > policy.max_redeliver_count {
        properties.retain(|(k, _)| k != DELAY_TIME);
        return Reconsume::DeadLetter { properties };
    }
    set(&mut properties, DELAY_TIME, delay.as_millis().to_string());
    Reconsume::Retry { properties, delay }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(props: &'a [(String, String)], key: &str) -> Option<&'a str> {
        props
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn default_topics_follow_the_naming_rule() {
        let mut policy = DeadLetterPolicy::after_redeliveries(3);
        assert_eq!(policy.dead_letter_topic("t", "s"), "t-s-DLQ");
        assert_eq!(policy.retry_letter_topic("t", "s"), "t-s-RETRY");
        policy.dead_letter_topic = Some("mine".into());
        assert_eq!(policy.dead_letter_topic("t", "s"), "mine");
    }

    #[test]
    fn invalid_policies_are_typed_errors() {
        assert_eq!(
            DeadLetterPolicy::after_redeliveries(0).validate(),
            Err(ConfigError::ZeroMaxRedeliverCount)
        );
        let mut policy = DeadLetterPolicy::after_redeliveries(1);
        policy.retry_letter_topic = Some(" ".into());
        assert_eq!(
            policy.validate(),
            Err(ConfigError::EmptyName {
                field: "retry_letter_topic"
            })
        );
        policy.retry_letter_topic = None;
        policy.initial_subscription_name = Some("init".into());
        assert_eq!(policy.validate(), Ok(()));
    }

    #[test]
    fn cutoffs_differ_by_one_delivery() {
        let mut policy = DeadLetterPolicy::after_redeliveries(3);
        let seen: Vec<u32> = (0..6).filter(|&n| !policy.forwards_on_arrival(n)).collect();
        assert_eq!(seen, [0, 1, 2]);
        policy.cutoff = DeadLetterCutoff::JavaStyle;
        assert!(!policy.forwards_on_arrival(3) && policy.reached(3));
    }

    #[test]
    fn dead_letter_copy_keeps_properties_and_an_earlier_origin() {
        let origin = MessageId::new(5, 6).with_partition(2);
        let props = dead_letter_properties(
            vec![("x".to_owned(), "y".to_owned())],
            ReadFrom::Topic,
            "t",
            origin,
        );
        assert_eq!(get(&props, "x"), Some("y"));
        assert_eq!(get(&props, ORIGIN_MESSAGE_ID), Some("5:6:2"));
        let hop = dead_letter_properties(
            props.clone(),
            ReadFrom::RetryTopic,
            "t-s-RETRY",
            MessageId::new(9, 9),
        );
        assert_eq!(hop, props, "first topic and id survive the retry hop");
    }

    #[test]
    fn a_forward_from_the_topic_replaces_a_real_topic_the_producer_set() {
        let preset = [
            (REAL_TOPIC, "persistent://ops/secure/commands"),
            (ORIGIN_MESSAGE_ID, "1:1:-1"),
            ("k", "v"),
        ];
        let origin = MessageId::new(5, 6);
        let props = dead_letter_properties(
            preset,
            ReadFrom::Topic,
            "persistent://public/default/a",
            origin,
        );
        assert_eq!(
            get(&props, REAL_TOPIC),
            Some("persistent://public/default/a")
        );
        assert_eq!(get(&props, ORIGIN_MESSAGE_ID), Some("5:6:-1"));
        assert_eq!(get(&props, "k"), Some("v"));
    }

    #[test]
    fn a_first_retry_replaces_a_real_topic_the_producer_set() {
        let policy = DeadLetterPolicy::after_redeliveries(3);
        let preset = [
            (REAL_TOPIC, "persistent://ops/secure/commands"),
            (RECONSUMETIMES, "1"),
        ];
        let r = reconsume_later(
            &policy,
            preset,
            None::<(String, String)>,
            ReadFrom::Topic,
            "persistent://public/default/a",
            MessageId::new(5, 6),
            Duration::ZERO,
        );
        let Reconsume::Retry { properties, .. } = r else {
            panic!("expected a retry: {r:?}");
        };
        assert_eq!(
            get(&properties, REAL_TOPIC),
            Some("persistent://public/default/a")
        );
        assert_eq!(get(&properties, ORIGIN_MESSAGE_ID), Some("5:6:-1"));
    }

    #[test]
    fn retry_counts_up_and_custom_properties_travel() {
        let policy = DeadLetterPolicy::after_redeliveries(5);
        let original = [("RECONSUMETIMES", "2"), ("k", "old"), ("DELAY_TIME", "1")];
        let r = reconsume_later(
            &policy,
            original,
            [("k", "new")],
            ReadFrom::Topic,
            "t",
            MessageId::new(1, 2),
            Duration::from_millis(1500),
        );
        let Reconsume::Retry { properties, delay } = r else {
            panic!("expected a retry: {r:?}");
        };
        assert_eq!(delay, Duration::from_millis(1500));
        assert_eq!(get(&properties, RECONSUMETIMES), Some("3"));
        assert_eq!(get(&properties, DELAY_TIME), Some("1500"));
        assert_eq!(get(&properties, "k"), Some("new"));
        assert_eq!(get(&properties, REAL_TOPIC), Some("t"));
        assert_eq!(get(&properties, ORIGIN_MESSAGE_ID), Some("1:2:-1"));
    }

    #[test]
    fn retry_past_the_limit_goes_to_the_dead_letter_topic() {
        let policy = DeadLetterPolicy::after_redeliveries(3);
        let r = reconsume_later(
            &policy,
            [(RECONSUMETIMES, "3")],
            [("a", "b")],
            ReadFrom::Topic,
            "t",
            MessageId::new(1, 2),
            Duration::ZERO,
        );
        let Reconsume::DeadLetter { properties } = r else {
            panic!("expected a dead letter: {r:?}");
        };
        assert_eq!(get(&properties, RECONSUMETIMES), Some("4"));
        assert_eq!(get(&properties, DELAY_TIME), None);
        assert_eq!(get(&properties, "a"), Some("b"));
    }

    #[test]
    fn a_copy_carries_the_original_properties_its_topic_and_its_id() {
        let origin = MessageId::new(1, 0).with_batch_index(0);
        let props = dead_letter_properties(
            [("k", "v")],
            ReadFrom::Topic,
            "persistent://public/default/t",
            origin,
        );
        assert_eq!(
            props,
            [
                ("k".to_owned(), "v".to_owned()),
                (
                    "REAL_TOPIC".to_owned(),
                    "persistent://public/default/t".to_owned()
                ),
                ("ORIGIN_MESSAGE_ID".to_owned(), "1:0:-1:0".to_owned()),
            ]
        );
    }

    #[test]
    fn reconsuming_counts_up_and_goes_to_the_dead_letter_topic_past_the_limit() {
        let policy = DeadLetterPolicy::after_redeliveries(2);
        let first = reconsume_later(
            &policy,
            [("a", "1")],
            [("b", "2")],
            ReadFrom::Topic,
            "t",
            MessageId::new(3, 4),
            Duration::from_secs(3),
        );
        let Reconsume::Retry { properties, .. } = first else {
            panic!("retried")
        };
        assert!(properties.contains(&("RECONSUMETIMES".into(), "1".into())));
        assert!(properties.contains(&("DELAY_TIME".into(), "3000".into())));
        // Second and third time round: the third would exceed 2.
        let again = reconsume_later(
            &policy,
            properties.clone(),
            None::<(String, String)>,
            ReadFrom::RetryTopic,
            "t-RETRY",
            MessageId::new(9, 0),
            Duration::from_secs(3),
        );
        let Reconsume::Retry { properties, .. } = again else {
            panic!("retried")
        };
        let last = reconsume_later(
            &policy,
            properties,
            None::<(String, String)>,
            ReadFrom::RetryTopic,
            "t-RETRY",
            MessageId::new(9, 1),
            Duration::from_secs(3),
        );
        let Reconsume::DeadLetter { properties } = last else {
            panic!("dead-lettered: {last:?}")
        };
        assert_eq!(get(&properties, REAL_TOPIC), Some("t"), "the first hop's");
        assert_eq!(get(&properties, ORIGIN_MESSAGE_ID), Some("3:4:-1"));
    }

    #[test]
    fn delivery_facts_replace_an_earlier_trip_and_unknown_ones_go() {
        let mut props = vec![
            ("k".to_owned(), "v".to_owned()),
            (DLQ_LAST_ERROR.to_owned(), "old".to_owned()),
            (DLQ_DELIVERY_COUNT.to_owned(), "9".to_owned()),
        ];
        let facts = DeliveryFacts {
            subscription: "billing",
            deliveries: Some(3),
            first_and_last_ms: Some((10, 20)),
            last_error: None,
        };
        add_delivery_facts(&mut props, &facts);
        props.sort();
        let expected: Vec<(String, String)> = [
            (DLQ_DELIVERY_COUNT, "3"),
            (DLQ_FIRST_DELIVERY_TIME, "10"),
            (DLQ_LAST_DELIVERY_TIME, "20"),
            (DLQ_SUBSCRIPTION, "billing"),
            ("k", "v"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(props, expected);
    }

    #[test]
    fn a_message_published_again_loses_every_letter_property() {
        let props: std::collections::HashMap<String, String> = LETTER_PROPERTIES
            .iter()
            .map(|k| ((*k).to_owned(), "x".to_owned()))
            .chain([
                ("b".to_owned(), "2".to_owned()),
                ("a".to_owned(), "1".to_owned()),
            ])
            .collect();
        let kept = without_letter_properties(&props);
        assert_eq!(kept, [("a".into(), "1".into()), ("b".into(), "2".into())]);
    }

    #[test]
    fn a_policy_after_three_redeliveries_forwards_on_the_fourth_arrival() {
        let policy = DeadLetterPolicy::after_redeliveries(3);
        assert!(!policy.forwards_on_arrival(2) && policy.forwards_on_arrival(3));
    }
}
