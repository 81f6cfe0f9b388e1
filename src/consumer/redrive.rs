//! Dead-letter redrive: publish dead-lettered messages again, to the topic
//! they came from (their `REAL_TOPIC`) or to a given one, and ack each
//! dead-letter copy only once its new copy is confirmed.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tracing::debug;

use super::core::dead_letter::{REAL_TOPIC, without_letter_properties};
use super::error::ConsumerError;
use super::letters::copy::copy_of;
use super::message::Message;
use super::{Consumer, InitialPosition, SubscriptionType};
use crate::client::Client;
use crate::message_id::MessageId;
use crate::producer::{Producer, ProducerError};

/// The subscription a redrive reads the dead-letter topic with, unless
/// told otherwise.
pub const DEFAULT_REDRIVE_SUBSCRIPTION: &str = "pulsar-wire-redrive";

/// How long a redrive waits for the next message once the broker says
/// more are there, unless told otherwise.
pub const DEFAULT_REDRIVE_IDLE: Duration = Duration::from_secs(2);

/// Republishes in flight at once.
const WINDOW: usize = 64;

/// Why a redrive stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedriveError {
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

/// One dead-letter message a redrive moved, or would move (a dry run).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Redriven {
    /// Its id in the dead-letter topic.
    pub id: MessageId,
    /// Where it goes: [`Redrive::to`], else its `REAL_TOPIC`; `None` when
    /// neither is known (it stays in the dead-letter topic).
    pub target: Option<String>,
    /// Its id in `target` once published (`None` in a dry run).
    pub published: Option<MessageId>,
    /// Its key.
    pub key: Option<String>,
    /// The properties it is published with: its own, without the
    /// dead-letter and retry properties
    /// ([`LETTER_PROPERTIES`](super::dead_letter::LETTER_PROPERTIES)).
    pub properties: Vec<(String, String)>,
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
/// between the two may publish it twice). Messages that do not match, or
/// have no target, are not acked and stay.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: pulsar_wire::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let moved = client
///     .redrive("persistent://public/default/orders-billing-DLQ")
///     .subscription("dlq-audit")
///     .filter_property("tenant", "acme")
///     .limit(100)
///     .run()
///     .await?;
/// println!("moved {}", moved.len());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a redrive does nothing until `run` or `dry_run`"]
pub struct Redrive {
    client: Client,
    from: String,
    to: Option<String>,
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

    /// Lists what [`run`](Self::run) would move, publishing and acking
    /// nothing (the messages read return to the subscription).
    ///
    /// # Errors
    /// [`RedriveError::Read`] if the dead-letter topic cannot be read.
    pub async fn dry_run(self) -> Result<Vec<Redriven>, RedriveError> {
        self.go(false).await
    }

    /// Moves the messages; returns what was moved, in the order confirmed.
    ///
    /// # Errors
    /// [`RedriveError::Read`] if the dead-letter topic cannot be read;
    /// [`RedriveError::Publish`] at the first publish that fails (the
    /// publishes in flight are waited for and acked first).
    pub async fn run(self) -> Result<Vec<Redriven>, RedriveError> {
        self.go(true).await
    }

    fn read_error(&self) -> impl Fn(ConsumerError) -> RedriveError + '_ {
        |source| RedriveError::Read {
            topic: self.from.clone(),
            source: Box::new(source),
        }
    }

    async fn go(self, publish: bool) -> Result<Vec<Redriven>, RedriveError> {
        let mut consumer = self
            .client
            .consumer(self.from.clone(), self.subscription.clone())
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .map_err(self.read_error())?;
        let mut mover = Mover {
            producers: HashMap::new(),
            in_flight: FuturesUnordered::new(),
            moved: Vec::new(),
        };
        let read = self.read(&mut consumer, publish, &mut mover).await;
        let finished = mover.finish(&consumer).await;
        for producer in mover.producers.values() {
            let _ = producer.close().await;
        }
        let _ = consumer.close().await;
        read.and(finished)?;
        Ok(mover.moved)
    }

    /// Reads and hands each matching message to `mover` (or lists it).
    async fn read(
        &self,
        consumer: &mut Consumer,
        publish: bool,
        mover: &mut Mover,
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
            let target = self
                .to
                .clone()
                .or_else(|| msg.properties().get(REAL_TOPIC).cloned());
            let entry = Redriven {
                id: msg.id(),
                target,
                published: None,
                key: msg.key().map(str::to_owned),
                properties: without_letter_properties(msg.properties()),
            };
            if entry.target.is_none() {
                debug!(id = %msg.id(), "no REAL_TOPIC and no target: left in the dead-letter topic");
                continue;
            }
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

type Confirmed = (Message, Redriven, Result<MessageId, ProducerError>);

/// Publishes in flight, and what was moved.
struct Mover {
    producers: HashMap<String, Producer>,
    in_flight: FuturesUnordered<futures::future::BoxFuture<'static, Confirmed>>,
    moved: Vec<Redriven>,
}

impl Mover {
    /// Publishes `msg` again as `entry` says, keeping at most [`WINDOW`]
    /// publishes in flight.
    async fn publish(
        &mut self,
        client: &Client,
        consumer: &Consumer,
        msg: Message,
        entry: Redriven,
    ) -> Result<(), RedriveError> {
        let topic = entry.target.clone().unwrap_or_default();
        let failed = |moved, source| RedriveError::Publish {
            id: entry.id,
            topic: topic.clone(),
            moved,
            source: Box::new(source),
        };
        let producer = match self.producers.get(&topic) {
            Some(producer) => producer.clone(),
            None => {
                let created = client
                    .producer(topic.clone())
                    .batching(false)
                    .create()
                    .await
                    .map_err(|e| failed(self.moved.len(), e))?;
                self.producers.insert(topic.clone(), created.clone());
                created
            }
        };
        let copy = copy_of(&msg, entry.properties.clone());
        let receipt = producer
            .send(copy)
            .await
            .map_err(|e| failed(self.moved.len(), e))?;
        self.in_flight
            .push(Box::pin(async move { (msg, entry, receipt.await) }));
        while self.in_flight.len() >= WINDOW {
            self.confirm_next(consumer).await?;
        }
        Ok(())
    }

    /// Acks the dead-letter copy of the next confirmed publish.
    async fn confirm_next(&mut self, consumer: &Consumer) -> Result<bool, RedriveError> {
        let Some((msg, mut entry, result)) = self.in_flight.next().await else {
            return Ok(false);
        };
        match result {
            Ok(id) => {
                entry.published = Some(id);
                consumer
                    .ack(&msg)
                    .await
                    .map_err(|source| RedriveError::Read {
                        topic: msg.topic().to_owned(),
                        source: Box::new(source),
                    })?;
                self.moved.push(entry);
                Ok(true)
            }
            Err(source) => Err(RedriveError::Publish {
                id: entry.id,
                topic: entry.target.unwrap_or_default(),
                moved: self.moved.len(),
                source: Box::new(source),
            }),
        }
    }

    /// Waits for every publish in flight, acking each confirmed one; the
    /// first failure is returned once all are settled.
    async fn finish(&mut self, consumer: &Consumer) -> Result<(), RedriveError> {
        let mut first_error = None;
        loop {
            match self.confirm_next(consumer).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
