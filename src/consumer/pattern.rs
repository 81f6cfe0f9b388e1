//! Topics patterns (pure): which topics of a namespace a pattern consumer
//! reads, matched as the Java client matches them. Every listing is
//! matched here too, whether or not the broker filtered it already.
//!
//! A pattern names its namespace: `persistent://public/default/orders-.*`,
//! `public/default/orders-.*`, or `orders-.*` (in `public/default`). It is
//! matched against the whole topic name without its domain
//! (`public/default/orders-1`), as a full match, and a partition is matched
//! as its partitioned topic, which is then read as a whole.

use std::collections::BTreeSet;

use crate::client::{TopicDomain, TopicName};
use crate::proto::command_get_topics_of_namespace::Mode;

use super::error::ConsumerError;

/// Which topics of the namespace a pattern consumer reads, by domain
/// (Java's `RegexSubscriptionMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RegexSubscriptionMode {
    /// Persistent topics only (the default).
    #[default]
    PersistentOnly,
    /// Non-persistent topics only.
    NonPersistentOnly,
    /// Both.
    AllTopics,
}

impl RegexSubscriptionMode {
    /// The mode GET_TOPICS_OF_NAMESPACE asks for.
    pub(crate) fn wire(self) -> Mode {
        match self {
            Self::PersistentOnly => Mode::Persistent,
            Self::NonPersistentOnly => Mode::NonPersistent,
            Self::AllTopics => Mode::All,
        }
    }

    fn admits(self, domain: TopicDomain) -> bool {
        match self {
            Self::PersistentOnly => domain == TopicDomain::Persistent,
            Self::NonPersistentOnly => domain == TopicDomain::NonPersistent,
            Self::AllTopics => true,
        }
    }
}

/// What is wrong with a topics pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternProblem {
    /// The domain before `://` is neither `persistent` nor `non-persistent`.
    #[error("domain {0:?} is neither persistent nor non-persistent")]
    Domain(String),
    /// Neither `<regex>` nor `<tenant>/<namespace>/<regex>`.
    #[error("a pattern is <regex> or <tenant>/<namespace>/<regex>")]
    Shape,
    /// The tenant or namespace (given) is itself a pattern, or empty.
    #[error("the tenant and namespace ({0}) must be plain names, not patterns")]
    Namespace(String),
    /// The regular expression does not compile (the compiler's message).
    #[error("not a regular expression this client understands: {0}")]
    Regex(String),
}

/// A parsed topics pattern.
#[derive(Debug, Clone)]
pub(crate) struct TopicsPattern {
    /// As given, for errors and logs.
    pub(crate) given: String,
    /// `tenant/namespace`.
    pub(crate) namespace: String,
    /// The pattern as brokers take it: with the domain and the namespace.
    pub(crate) wire: String,
    pub(crate) mode: RegexSubscriptionMode,
    /// Anchored at both ends, over the name without its domain.
    regex: regex_lite::Regex,
}

impl TopicsPattern {
    /// Parses `pattern` read in `mode`.
    ///
    /// # Errors
    /// [`ConsumerError::InvalidPattern`] for a regular expression that does
    /// not compile, or a pattern whose tenant or namespace is itself a
    /// pattern or missing.
    pub(crate) fn parse(pattern: &str, mode: RegexSubscriptionMode) -> Result<Self, ConsumerError> {
        let invalid = |problem: PatternProblem| ConsumerError::InvalidPattern {
            pattern: pattern.to_owned(),
            problem,
        };
        let (domain, rest) = match pattern.split_once("://") {
            Some((domain, rest)) => (domain, rest),
            None => ("persistent", pattern),
        };
        if domain != "persistent" && domain != "non-persistent" {
            return Err(invalid(PatternProblem::Domain(domain.to_owned())));
        }
        let path = match rest.split('/').count() {
            1 => format!("public/default/{rest}"),
            n if n >= 3 => rest.to_owned(),
            _ => {
                return Err(invalid(PatternProblem::Shape));
            }
        };
        let mut parts = path.splitn(3, '/');
        let (tenant, ns) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '=' | ':' | '.'))
        };
        if !plain(tenant) || !plain(ns) {
            return Err(invalid(PatternProblem::Namespace(format!("{tenant}/{ns}"))));
        }
        let regex = regex_lite::Regex::new(&format!("^(?:{path})$"))
            .map_err(|e| invalid(PatternProblem::Regex(e.to_string())))?;
        Ok(Self {
            given: pattern.to_owned(),
            namespace: format!("{tenant}/{ns}"),
            wire: format!("{domain}://{path}"),
            mode,
            regex,
        })
    }

    /// Whether `topic` (a partition counts as its partitioned topic) is one
    /// this pattern reads.
    pub(crate) fn matches(&self, topic: &TopicName) -> bool {
        let base = topic.base();
        let full = base.as_str();
        let without_domain = full.split_once("://").map_or(full, |(_, rest)| rest);
        self.mode.admits(topic.domain())
            && format!("{}/{}", topic.tenant(), topic.namespace()) == self.namespace
            && !is_system_topic(&base)
            && self.regex.is_match(without_domain)
    }

    /// The topics of a namespace listing (partitions and plain topics) that
    /// this pattern reads, partitions given as their partitioned topic.
    /// Names that do not parse are skipped.
    pub(crate) fn select<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> BTreeSet<TopicName> {
        names
            .into_iter()
            .filter_map(|n| TopicName::parse(n).ok())
            .filter(|t| self.matches(t))
            .map(|t| t.base())
            .collect()
    }
}

/// The broker's own topics (`__change_events`, transaction buffers, …):
/// never read by a pattern, as in Java.
fn is_system_topic(topic: &TopicName) -> bool {
    topic.local_name().starts_with("__")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(set: &BTreeSet<TopicName>) -> Vec<&str> {
        set.iter().map(TopicName::as_str).collect()
    }

    #[test]
    fn the_pattern_names_its_namespace_in_every_form() {
        let full = TopicsPattern::parse(
            "persistent://acme/orders/eu-.*",
            RegexSubscriptionMode::default(),
        )
        .expect("valid");
        assert_eq!(full.namespace, "acme/orders");
        assert_eq!(full.wire, "persistent://acme/orders/eu-.*");
        let short = TopicsPattern::parse("eu-.*", RegexSubscriptionMode::default()).expect("valid");
        assert_eq!(short.namespace, "public/default");
        assert_eq!(short.wire, "persistent://public/default/eu-.*");
        let mid = TopicsPattern::parse("acme/orders/eu-.*", RegexSubscriptionMode::AllTopics)
            .expect("valid");
        assert_eq!(mid.wire, "persistent://acme/orders/eu-.*");
    }

    #[test]
    fn bad_patterns_are_typed_errors() {
        // `None`: a regular expression that does not compile.
        let cases = [
            ("persistent://public/default/orders-(", None),
            (
                "acme/.*/orders",
                Some(PatternProblem::Namespace("acme/.*".into())),
            ),
            ("a/b", Some(PatternProblem::Shape)),
            (
                "kafka://public/default/x",
                Some(PatternProblem::Domain("kafka".into())),
            ),
            ("persistent://public/default/(?=x)y", None),
        ];
        for (bad, expected) in cases {
            let e = TopicsPattern::parse(bad, RegexSubscriptionMode::default()).expect_err(bad);
            let ConsumerError::InvalidPattern { pattern, problem } = &e else {
                panic!("{e:?}");
            };
            assert_eq!(pattern, bad);
            match &expected {
                Some(expected) => assert_eq!(problem, expected),
                None => assert!(matches!(problem, PatternProblem::Regex(_)), "{problem:?}"),
            }
        }
    }

    #[test]
    fn matching_is_full_on_the_name_without_domain_and_partitions_count_as_their_topic() {
        let p = TopicsPattern::parse(
            "persistent://public/default/orders-.*",
            RegexSubscriptionMode::default(),
        )
        .expect("valid");
        let listing = [
            "persistent://public/default/orders-1",
            "persistent://public/default/orders-eu-partition-0",
            "persistent://public/default/orders-eu-partition-1",
            "persistent://public/default/old-orders-1",
            "persistent://public/default/orders",
            "persistent://public/default/__change_events",
            "non-persistent://public/default/orders-np",
            "persistent://other/default/orders-1",
            "not a topic name",
        ];
        assert_eq!(
            names(&p.select(listing)),
            [
                "persistent://public/default/orders-1",
                "persistent://public/default/orders-eu",
            ]
        );
        let all =
            TopicsPattern::parse("public/default/orders-.*", RegexSubscriptionMode::AllTopics)
                .expect("valid");
        assert_eq!(all.select(listing).len(), 3);
        let np = TopicsPattern::parse(
            "non-persistent://public/default/orders-.*",
            RegexSubscriptionMode::NonPersistentOnly,
        )
        .expect("valid");
        assert_eq!(
            names(&np.select(listing)),
            ["non-persistent://public/default/orders-np"]
        );
    }
}
