//! Dead-letter redrive: publish dead-lettered messages again, to the topic
//! they came from (their `REAL_TOPIC`, when the dead-letter topic is that
//! topic's) or to a given one, and ack each dead-letter copy only once its
//! new copy is confirmed.

mod mover;
mod targets;

use std::time::Duration;

use tracing::debug;

use self::mover::Mover;
use self::targets::Targets;
use super::core::dead_letter::without_letter_properties;
use super::error::ConsumerError;
use super::{Consumer, InitialPosition, SubscriptionType};
use crate::client::{Client, InvalidTopicName};
use crate::message_id::MessageId;
use crate::producer::ProducerError;

/// The subscription a redrive reads the dead-letter topic with, unless
/// told otherwise.
pub const DEFAULT_REDRIVE_SUBSCRIPTION: &str = "pulsar-wire-redrive";

/// How long a redrive waits for the next message once the broker says
/// more are there, unless told otherwise.
pub const DEFAULT_REDRIVE_IDLE: Duration = Duration::from_secs(2);

/// Why a redrive stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedriveError {
    /// The dead-letter topic, or a topic given to
    /// [`allow_target`](Redrive::allow_target), is not a topic name;
    /// nothing was read.
    #[error(transparent)]
    InvalidTopic(#[from] InvalidTopicName),
    /// Reading or acking the dead-letter topic failed.
    #[error("reading the dead-letter topic {topic}: {source}")]
    Read {
        /// The dead-letter topic.
        topic: String,
        /// What failed.
        #[source]
        source: Box<ConsumerError>,
    },
    /// Publishing a message again failed: it stays in the dead-letter
    /// topic (those confirmed before were moved and acked).
    #[error("publishing {id} again to {topic} ({moved} moved before): {source}")]
    Publish {
        /// The dead-letter copy's id.
        id: MessageId,
        /// Where it was going.
        topic: String,
        /// Messages moved (published and acked) before the failure.
        moved: usize,
        /// What failed.
        #[source]
        source: Box<ProducerError>,
    },
}

/// What a redrive did (or, in a dry run, would do) with the messages of
/// the dead-letter topic that match its filters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedriveReport {
    /// The messages moved, in the order confirmed (in a dry run: those
    /// that would move, in the order read).
    pub moved: Vec<Redriven>,
    /// The messages left in the dead-letter topic, unacked, in the order
    /// read, with the reason.
    pub skipped: Vec<Skipped>,
}

/// One dead-letter message a redrive moved, or would move (a dry run).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Redriven {
    /// Its id in the dead-letter topic.
    pub id: MessageId,
    /// Where it goes: [`Redrive::to`], else its `REAL_TOPIC`.
    pub target: String,
    /// Its id in `target` once published (`None` in a dry run).
    pub published: Option<MessageId>,
    /// Its key.
    pub key: Option<String>,
    /// The properties it is published with: its own, without the
    /// dead-letter and retry properties
    /// ([`LETTER_PROPERTIES`](super::dead_letter::LETTER_PROPERTIES)).
    pub properties: Vec<(String, String)>,
}

/// A dead-letter message a redrive left where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skipped {
    /// Its id in the dead-letter topic.
    pub id: MessageId,
    /// Why it was not moved.
    pub reason: SkipReason,
}

/// Why a redrive left a message in the dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// It has no `REAL_TOPIC` and the redrive has no [`to`](Redrive::to).
    NoTarget,
    /// Its `REAL_TOPIC` names a topic the dead-letter topic is not for (nor
    /// one [allowed](Redrive::allow_target)), or is not a topic name. A
    /// producer may have written it, or another client copied it over
    /// from the message; publishing there could write where that producer
    /// may not.
    ForeignTarget {
        /// The `REAL_TOPIC` it carries.
        real_topic: String,
    },
}

/// Moves dead-lettered messages back to be processed again. Made by
/// [`Client::redrive`].
///
/// Reads the dead-letter topic with a Shared subscription
/// ([`DEFAULT_REDRIVE_SUBSCRIPTION`] unless [`subscription`](Self::subscription)
/// names the one that retains the copies, e.g. the dead-letter policy's
/// `initial_subscription_name`), from its earliest unacked message, until
/// the broker has no more (or [`limit`](Self::limit) messages are moved).
/// Each message that matches the filters is published to its target with
/// its payload, key, ordering key, event time and own properties (the
/// dead-letter and retry properties stripped, so it starts over), and its
/// dead-letter copy is acked only once that publish is confirmed: a
/// failure leaves it in the dead-letter topic, so nothing is lost (a crash
/// between the two may publish it twice). Messages that do not match are
/// not acked and stay.
///
/// # Targets
/// The target is [`to`](Self::to) if set. Otherwise it is the message's
/// `REAL_TOPIC`, but only when that names the topic the dead-letter topic
/// is for: the dead-letter topic's name is `<topic>-<subscription>-DLQ`
/// (the default name) for `REAL_TOPIC`'s partitioned topic and the copy's
/// `DLQ_SUBSCRIPTION` (any subscription, for a copy without one), or
/// `REAL_TOPIC` is a topic (or a partition of one) given to
/// [`allow_target`](Self::allow_target). Any other message stays, unacked,
/// and is listed in [`RedriveReport::skipped`]: a redrive, often run with
/// broad permissions, never publishes to a topic a producer named.
/// This client sets `REAL_TOPIC` on every copy it makes to the topic the
/// message was consumed from; a dead-letter topic with a name of its own
/// (the policy's `dead_letter_topic`), or one that a consumer of several
/// topics with retry shares, needs `to` or `allow_target`.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: pulsar_wire::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let report = client
///     .redrive("persistent://public/default/orders-billing-DLQ")
///     .subscription("dlq-audit")
///     .filter_property("tenant", "acme")
///     .limit(100)
///     .run()
///     .await?;
/// println!("moved {}, left {}", report.moved.len(), report.skipped.len());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a redrive does nothing until `run` or `dry_run`"]
pub struct Redrive {
    client: Client,
    from: String,
    to: Option<String>,
    allowed: Vec<String>,
    subscription: String,
    filters: Vec<(String, String)>,
    limit: Option<usize>,
    idle: Duration,
}

impl Client {
    /// A [`Redrive`] of the dead-letter topic `dlq`.
    pub fn redrive(&self, dlq: impl Into<String>) -> Redrive {
        Redrive {
            client: self.clone(),
            from: dlq.into(),
            to: None,
            allowed: Vec::new(),
            subscription: DEFAULT_REDRIVE_SUBSCRIPTION.to_owned(),
            filters: Vec::new(),
            limit: None,
            idle: DEFAULT_REDRIVE_IDLE,
        }
    }
}

impl Redrive {
    /// Publishes every message to `topic` instead of its `REAL_TOPIC`.
    pub fn to(mut self, topic: impl Into<String>) -> Self {
        self.to = Some(topic.into());
        self
    }

    /// Also moves a message whose `REAL_TOPIC` names `topic` or one of its
    /// partitions back there, though the dead-letter topic's name does not
    /// say it is `topic`'s (see [Targets](Self#targets)); repeatable.
    pub fn allow_target(mut self, topic: impl Into<String>) -> Self {
        self.allowed.push(topic.into());
        self
    }

    /// Reads the dead-letter topic with this subscription.
    pub fn subscription(mut self, name: impl Into<String>) -> Self {
        self.subscription = name.into();
        self
    }

    /// Moves only messages whose property `name` is `value` (every filter
    /// must match).
    pub fn filter_property(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.filters.push((name.into(), value.into()));
        self
    }

    /// Moves at most `n` messages.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// How long to wait for the next message while the broker says more
    /// are there (messages already acked on the subscription still count
    /// there); default [`DEFAULT_REDRIVE_IDLE`].
    pub fn idle(mut self, wait: Duration) -> Self {
        self.idle = wait;
        self
    }

    /// Lists what [`run`](Self::run) would move and leave, publishing and
    /// acking nothing (the messages read return to the subscription).
    ///
    /// # Errors
    /// [`RedriveError::InvalidTopic`] for a topic name that is not one;
    /// [`RedriveError::Read`] if the dead-letter topic cannot be read.
    pub async fn dry_run(self) -> Result<RedriveReport, RedriveError> {
        self.go(false).await
    }

    /// Moves the messages; returns what was moved, in the order confirmed,
    /// and what was left.
    ///
    /// # Errors
    /// [`RedriveError::InvalidTopic`] for a topic name that is not one;
    /// [`RedriveError::Read`] if the dead-letter topic cannot be read;
    /// [`RedriveError::Publish`] at the first publish that fails (the
    /// publishes in flight are waited for and acked first).
    pub async fn run(self) -> Result<RedriveReport, RedriveError> {
        self.go(true).await
    }

    fn read_error(&self) -> impl Fn(ConsumerError) -> RedriveError + '_ {
        |source| RedriveError::Read {
            topic: self.from.clone(),
            source: Box::new(source),
        }
    }

    async fn go(self, publish: bool) -> Result<RedriveReport, RedriveError> {
        let targets = Targets::new(&self.from, &self.allowed)?;
        let mut consumer = self
            .client
            .consumer(self.from.clone(), self.subscription.clone())
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .map_err(self.read_error())?;
        let mut mover = Mover::new();
        let mut skipped = Vec::new();
        let read = self
            .read(&mut consumer, &targets, publish, &mut mover, &mut skipped)
            .await;
        let finished = mover.finish(&consumer).await;
        for producer in mover.producers.values() {
            let _ = producer.close().await;
        }
        let _ = consumer.close().await;
        read.and(finished)?;
        Ok(RedriveReport {
            moved: mover.moved,
            skipped,
        })
    }

    /// Reads and hands each matching message to `mover` (or lists it), or
    /// adds it to `skipped`.
    async fn read(
        &self,
        consumer: &mut Consumer,
        targets: &Targets,
        publish: bool,
        mover: &mut Mover,
        skipped: &mut Vec<Skipped>,
    ) -> Result<(), RedriveError> {
        let mut taken = 0;
        while self.limit.is_none_or(|limit| taken < limit) {
            if !consumer
                .has_message_available()
                .await
                .map_err(self.read_error())?
            {
                break;
            }
            let msg = match tokio::time::timeout(self.idle, consumer.receive()).await {
                Ok(received) => received.map_err(self.read_error())?,
                Err(_) => break, // what is left is acked on this subscription
            };
            let matches = self
                .filters
                .iter()
                .all(|(k, v)| msg.properties().get(k) == Some(v));
            if !matches {
                continue;
            }
            let target = match &self.to {
                Some(to) => Ok(to.clone()),
                None => targets.of(&msg),
            };
            let target = match target {
                Ok(target) => target,
                Err(reason) => {
                    debug!(id = %msg.id(), ?reason, "left in the dead-letter topic");
                    skipped.push(Skipped {
                        id: msg.id(),
                        reason,
                    });
                    continue;
                }
            };
            let entry = Redriven {
                id: msg.id(),
                target,
                published: None,
                key: msg.key().map(str::to_owned),
                properties: without_letter_properties(msg.properties()),
            };
            taken += 1;
            if publish {
                mover.publish(&self.client, consumer, msg, entry).await?;
            } else {
                mover.moved.push(entry);
            }
        }
        Ok(())
    }
}
