//! [`TopicName`]: topic names parsed and normalised like the Java client does.

use std::fmt;
use std::str::FromStr;

const PARTITION_SUFFIX: &str = "-partition-";

/// Whether the broker stores a topic's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TopicDomain {
    /// `persistent://`: messages are stored (the default).
    Persistent,
    /// `non-persistent://`: messages go only to consumers connected at the time.
    NonPersistent,
}

impl TopicDomain {
    /// The scheme as it appears in a full name: `persistent` or `non-persistent`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Persistent => "persistent",
            Self::NonPersistent => "non-persistent",
        }
    }
}

/// A full, normalised topic name: `{domain}://{tenant}/{namespace}/{local}`.
///
/// Parsing accepts the forms the Java client accepts:
/// * `my-topic` → `persistent://public/default/my-topic`
/// * `tenant/ns/my-topic` → `persistent://tenant/ns/my-topic`
/// * `persistent://tenant/ns/my-topic` and `non-persistent://tenant/ns/my-topic`
/// * the legacy `persistent://tenant/cluster/ns/my-topic` (namespace `cluster/ns`)
///
/// A local name ending in `-partition-N` names partition `N` of a
/// partitioned topic.
///
/// # Examples
/// ```
/// use pulsar_wire::TopicName;
/// let t: TopicName = "orders".parse()?;
/// assert_eq!(t.as_str(), "persistent://public/default/orders");
/// let p = t.partition(3);
/// assert_eq!(p.as_str(), "persistent://public/default/orders-partition-3");
/// assert_eq!(p.partition_index(), Some(3));
/// assert_eq!(p.base(), t);
/// assert!("a/b".parse::<TopicName>().is_err());
/// # Ok::<(), pulsar_wire::client::InvalidTopicName>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicName {
    full: String,
    domain: TopicDomain,
    tenant: String,
    namespace: String,
    local: String,
    partition: Option<u32>,
}

/// A string that is not a topic name; says which input and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid topic name {name:?}: {problem}")]
pub struct InvalidTopicName {
    /// The input, as given.
    pub name: String,
    /// What is wrong with it.
    pub problem: TopicNameProblem,
}

/// What is wrong with a topic name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopicNameProblem {
    /// The name is empty.
    #[error("it is empty")]
    Empty,
    /// The part before `://` is neither `persistent` nor `non-persistent`.
    #[error("domain {0:?} is neither persistent nor non-persistent")]
    UnknownDomain(String),
    /// A name without `://` must be `topic` or `tenant/namespace/topic`.
    #[error("a short name must be <topic> or <tenant>/<namespace>/<topic>")]
    ShortForm,
    /// A full name must be `domain://tenant/namespace/topic`.
    #[error("a full name must be <domain>://<tenant>/<namespace>/<topic>")]
    MissingParts,
    /// A part of the name is empty.
    #[error("the {0} is empty")]
    EmptyPart(&'static str),
    /// A tenant or namespace holds a character outside `[A-Za-z0-9_=:.-]`.
    #[error("the {part} contains {ch:?}; allowed are letters, digits and _ = : . -")]
    InvalidCharacter {
        /// `"tenant"` or `"namespace"`.
        part: &'static str,
        /// The first offending character.
        ch: char,
    },
}

impl TopicName {
    /// Parses and normalises `name`.
    ///
    /// # Errors
    /// [`InvalidTopicName`] naming the input and the problem.
    pub fn parse(name: &str) -> Result<Self, InvalidTopicName> {
        parse(name).map_err(|problem| InvalidTopicName {
            name: name.to_owned(),
            problem,
        })
    }

    /// The full name, e.g. `persistent://public/default/orders`.
    pub fn as_str(&self) -> &str {
        &self.full
    }

    /// `persistent` or `non-persistent`.
    pub const fn domain(&self) -> TopicDomain {
        self.domain
    }

    /// Whether messages are stored.
    pub fn is_persistent(&self) -> bool {
        self.domain == TopicDomain::Persistent
    }

    /// The tenant, e.g. `public`.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The namespace within the tenant, e.g. `default` (`cluster/ns` for legacy names).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The local name, partition suffix included, e.g. `orders-partition-3`.
    pub fn local_name(&self) -> &str {
        &self.local
    }

    /// For a partition of a partitioned topic, its index.
    pub const fn partition_index(&self) -> Option<u32> {
        self.partition
    }

    /// Partition `n` of this topic (of its partitioned topic, if this
    /// already names a partition).
    #[must_use]
    pub fn partition(&self, n: u32) -> Self {
        let base = self.base();
        let local = format!("{}{PARTITION_SUFFIX}{n}", base.local);
        Self {
            full: format!("{}{PARTITION_SUFFIX}{n}", base.full),
            local,
            partition: Some(n),
            ..base
        }
    }

    /// The partitioned topic this partition belongs to; the name itself if
    /// it names no partition.
    #[must_use]
    pub fn base(&self) -> Self {
        let Some(n) = self.partition else {
            return self.clone();
        };
        let suffix = PARTITION_SUFFIX.len() + n.to_string().len();
        Self {
            full: self.full[..self.full.len() - suffix].to_owned(),
            local: self.local[..self.local.len() - suffix].to_owned(),
            partition: None,
            ..self.clone()
        }
    }
}

fn parse(name: &str) -> Result<TopicName, TopicNameProblem> {
    if name.is_empty() {
        return Err(TopicNameProblem::Empty);
    }
    let (domain, rest) = match name.split_once("://") {
        Some((scheme, rest)) => {
            let domain = match scheme {
                "persistent" => TopicDomain::Persistent,
                "non-persistent" => TopicDomain::NonPersistent,
                other => return Err(TopicNameProblem::UnknownDomain(other.to_owned())),
            };
            (domain, rest.to_owned())
        }
        None => match name.split('/').count() {
            1 => (TopicDomain::Persistent, format!("public/default/{name}")),
            3 => (TopicDomain::Persistent, name.to_owned()),
            _ => return Err(TopicNameProblem::ShortForm),
        },
    };
    let parts: Vec<&str> = rest.splitn(4, '/').collect();
    let (tenant, namespace, local) = match parts.as_slice() {
        [tenant, namespace, local] => (*tenant, (*namespace).to_owned(), *local),
        [tenant, cluster, namespace, local] => {
            check_part("cluster", cluster)?;
            (*tenant, format!("{cluster}/{namespace}"), *local)
        }
        _ => return Err(TopicNameProblem::MissingParts),
    };
    check_part("tenant", tenant)?;
    check_part("namespace", namespace.rsplit('/').next().unwrap_or(""))?;
    if local.is_empty() {
        return Err(TopicNameProblem::EmptyPart("topic"));
    }
    let partition = local.rfind(PARTITION_SUFFIX).and_then(|at| {
        let digits = &local[at + PARTITION_SUFFIX.len()..];
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        canonical.then(|| digits.parse().ok()).flatten()
    });
    Ok(TopicName {
        full: format!("{}://{tenant}/{namespace}/{local}", domain.as_str()),
        domain,
        tenant: tenant.to_owned(),
        namespace,
        local: local.to_owned(),
        partition,
    })
}

fn check_part(part: &'static str, value: &str) -> Result<(), TopicNameProblem> {
    if value.is_empty() {
        return Err(TopicNameProblem::EmptyPart(part));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_=:.-".contains(c);
    match value.chars().find(|&c| !allowed(c)) {
        Some(ch) => Err(TopicNameProblem::InvalidCharacter { part, ch }),
        None => Ok(()),
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl FromStr for TopicName {
    type Err = InvalidTopicName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<&str> for TopicName {
    type Error = InvalidTopicName;

    fn try_from(s: &str) -> Result<Self, Self::Error> {
        Self::parse(s)
    }
}

impl AsRef<str> for TopicName {
    fn as_ref(&self) -> &str {
        &self.full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(name: &str) -> String {
        TopicName::parse(name).expect(name).as_str().to_owned()
    }

    fn problem(name: &str) -> TopicNameProblem {
        let err = TopicName::parse(name).expect_err(name);
        assert_eq!(err.name, name, "the error names its input");
        err.problem
    }

    #[test]
    fn short_names_are_normalised_like_the_java_client() {
        assert_eq!(full("my-topic"), "persistent://public/default/my-topic");
        assert_eq!(full("acme/orders/eu"), "persistent://acme/orders/eu");
        assert_eq!(
            full("persistent://acme/orders/eu"),
            "persistent://acme/orders/eu"
        );
        let np = TopicName::parse("non-persistent://acme/orders/eu").expect("valid");
        assert_eq!(np.domain(), TopicDomain::NonPersistent);
        assert!(!np.is_persistent());
        assert_eq!(
            (np.tenant(), np.namespace(), np.local_name()),
            ("acme", "orders", "eu")
        );
    }

    #[test]
    fn legacy_names_keep_the_cluster_in_the_namespace() {
        let t = TopicName::parse("persistent://acme/us-west/orders/eu").expect("valid");
        assert_eq!(
            (t.tenant(), t.namespace(), t.local_name()),
            ("acme", "us-west/orders", "eu")
        );
    }

    #[test]
    fn partitions_round_trip() {
        let t = TopicName::parse("persistent://acme/orders/eu-partition-12").expect("valid");
        assert_eq!(t.partition_index(), Some(12));
        assert_eq!(t.base().as_str(), "persistent://acme/orders/eu");
        assert_eq!(t.base().partition_index(), None);
        assert_eq!(
            t.partition(2).as_str(),
            "persistent://acme/orders/eu-partition-2"
        );
        assert_eq!(
            t.partition(2),
            TopicName::parse("acme/orders/eu-partition-2").expect("valid")
        );
    }

    #[test]
    fn a_suffix_that_is_not_a_number_is_part_of_the_name() {
        for name in [
            "t-partition-",
            "t-partition-x",
            "t-partition-+1",
            "t-partition-01",
        ] {
            let t = TopicName::parse(name).expect(name);
            assert_eq!(t.partition_index(), None, "{name}");
            assert_eq!(t.base(), t);
        }
    }

    #[test]
    fn invalid_names_say_what_is_wrong() {
        assert_eq!(problem(""), TopicNameProblem::Empty);
        assert_eq!(problem("a/b"), TopicNameProblem::ShortForm);
        assert_eq!(problem("a/b/c/d"), TopicNameProblem::ShortForm);
        assert_eq!(
            problem("http://a/b/c"),
            TopicNameProblem::UnknownDomain("http".into())
        );
        assert_eq!(problem("persistent://a/b"), TopicNameProblem::MissingParts);
        assert_eq!(
            problem("persistent://a//c"),
            TopicNameProblem::EmptyPart("namespace")
        );
        assert_eq!(
            problem("persistent://a/b/"),
            TopicNameProblem::EmptyPart("topic")
        );
        assert_eq!(
            problem("ten ant/ns/t"),
            TopicNameProblem::InvalidCharacter {
                part: "tenant",
                ch: ' '
            }
        );
        let shown = TopicName::parse("a/b").expect_err("invalid").to_string();
        assert!(shown.contains("\"a/b\""), "{shown}");
    }
}
