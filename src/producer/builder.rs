//! [`ProducerBuilder`]: `client.producer(topic)…create().await`.

use std::sync::Arc;
use std::time::Duration;

use super::batcher::BatchConfig;
use super::connect::{self, Recipe};
use super::partitions::{self, Follow};
use super::task::{self, Settings};
use super::{HashingScheme, Producer, ProducerError, RoutingMode, WhenFull, routing::Router};
use crate::client::{Client, TopicName};
use crate::clock;
use crate::compression::Compression;
use crate::interceptor::{Chain, ProducerInterceptor};
use crate::stats::ProducerRecorder;

/// How often a partitioned topic is checked for new partitions by default.
const DEFAULT_PARTITIONS_CHECK: Duration = Duration::from_secs(60);

/// Who may produce to the topic alongside this producer.
///
/// # Examples
/// ```no_run
/// use pulsar_wire::producer::AccessMode;
/// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
/// // Fails with `ProducerError::Create` if another producer is on the topic.
/// let sole = client.producer("ledger").access_mode(AccessMode::Exclusive).create().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AccessMode {
    /// Any number of producers (the default).
    #[default]
    Shared,
    /// Only this one; creation fails if another producer is there.
    Exclusive,
    /// Only this one; creation waits until the producers already there are
    /// gone, for as long as that takes (the operation timeout does not
    /// apply to the wait). Dropping the `create()` future, or closing a
    /// producer whose re-creation waits, withdraws it from the broker's queue.
    WaitForExclusive,
    /// Only this one; the producers already there are fenced off (their
    /// sends fail and they are closed) and creation succeeds.
    ExclusiveWithFencing,
}

impl Client {
    /// Starts building a producer on `topic` (a full name, or a short one
    /// in `public/default`).
    ///
    /// # Examples
    /// ```no_run
    /// use pulsar_wire::Client;
    /// use pulsar_wire::producer::ProducerMessage;
    /// # async fn demo(client: Client) -> Result<(), pulsar_wire::Error> {
    /// let producer = client.producer("orders").create().await?;
    /// let id = producer.send(ProducerMessage::new("hi")).await?.await?;
    /// println!("stored as {id}");
    /// # Ok(()) }
    /// ```
    pub fn producer(&self, topic: impl Into<String>) -> ProducerBuilder {
        ProducerBuilder {
            client: self.clone(),
            topic: topic.into(),
            schema: None,
            name: None,
            access_mode: AccessMode::Shared,
            batch: BatchConfig::default(),
            send_timeout: Duration::from_secs(30),
            max_pending_messages: 1000,
            when_full: WhenFull::Block,
            routing: RoutingMode::RoundRobin,
            hashing: HashingScheme::default(),
            batching_set: false,
            chunking: false,
            chunk_size: None,
            partitions_every: Some(DEFAULT_PARTITIONS_CHECK),
            interceptors: Vec::new(),
        }
    }
}

/// Smallest [`ProducerBuilder::chunk_size`]: room for a chunk's metadata and some payload.
const MIN_CHUNK_SIZE: usize = 1024;

/// Configures and creates a [`Producer`]; see [`Client::producer`].
///
/// Every setting has a default; `create` checks them all before any IO.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use pulsar_wire::compression::Compression;
/// use pulsar_wire::producer::{HashingScheme, WhenFull};
/// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
/// let producer = client
///     .producer("persistent://public/default/clicks")
///     .name("clicks-writer")
///     .batching_max_messages(500)
///     .batching_max_bytes(64 * 1024)
///     .batching_max_delay(Duration::from_millis(2))
///     .compression(Compression::Zstd)
///     .send_timeout(Duration::from_secs(10))
///     .max_pending_messages(10_000)
///     .when_full(WhenFull::Fail)
///     .hashing_scheme(HashingScheme::Murmur3_32Hash)
///     .create()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `create` is awaited"]
pub struct ProducerBuilder {
    pub(crate) client: Client,
    pub(crate) topic: String,
    /// The schema to register in PRODUCER (none for bytes).
    pub(crate) schema: Option<crate::proto::Schema>,
    name: Option<String>,
    access_mode: AccessMode,
    batch: BatchConfig,
    send_timeout: Duration,
    max_pending_messages: usize,
    when_full: WhenFull,
    routing: RoutingMode,
    hashing: HashingScheme,
    /// Whether `batching` was called (chunking turns the default off).
    batching_set: bool,
    chunking: bool,
    /// Largest chunk, below the broker's `max_message_size` (`None`: that size).
    chunk_size: Option<usize>,
    /// How often a partitioned topic is checked for new partitions (`None`: never).
    partitions_every: Option<Duration>,
    interceptors: Vec<Arc<dyn ProducerInterceptor>>,
}

impl ProducerBuilder {
    /// The producer's name; the broker assigns a unique one if none is given.
    /// Deduplication keys on it, so give one to keep sequence ids across restarts.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Who else may produce to the topic. Default [`AccessMode::Shared`].
    pub fn access_mode(mut self, mode: AccessMode) -> Self {
        self.access_mode = mode;
        self
    }

    /// Turns batching on (the default, unless chunking is on) or off.
    pub fn batching(mut self, enabled: bool) -> Self {
        self.batch.enabled = enabled;
        self.batching_set = true;
        self
    }

    /// Splits a message larger than the broker's `max_message_size` (after
    /// compression) into chunks sent one after another, as the Java
    /// client's `enableChunking` (off by default: such a message fails with
    /// [`ProducerError::MessageTooLarge`]). Consumers, this client's and
    /// the official ones, put the chunks together again.
    ///
    /// Chunks share the message's sequence id; its send completes with the
    /// receipt of the last chunk, and its id is the last chunk's with the
    /// first chunk's beside it ([`MessageId::first_chunk`](crate::MessageId::first_chunk)),
    /// as the Java client's `ChunkMessageId`.
    /// Chunking turns batching off; [`create`](Self::create) refuses it
    /// together with an explicit `batching(true)`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// let producer = client.producer("scans").chunking(true).create().await?;
    /// let id = producer.send(vec![0u8; 12 << 20]).await?.await?;
    /// println!("12 MiB stored, from {:?} to {id}", id.first_chunk());
    /// # Ok(()) }
    /// ```
    pub fn chunking(mut self, enabled: bool) -> Self {
        self.chunking = enabled;
        self
    }

    /// With [`chunking`](Self::chunking) on, cuts messages into chunks of at
    /// most `bytes` (metadata included) instead of the broker's
    /// `max_message_size`, as the Java client's `chunkMaxMessageSize`: a
    /// message over `bytes` is chunked. A size above the broker's limit
    /// counts as that limit.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// let producer = client
    ///     .producer("scans")
    ///     .chunking(true)
    ///     .chunk_size(256 * 1024)
    ///     .create()
    ///     .await?;
    /// producer.send(vec![0u8; 1 << 20]).await?.await?; // five chunks, with their metadata
    /// # Ok(()) }
    /// ```
    pub fn chunk_size(mut self, bytes: usize) -> Self {
        self.chunk_size = Some(bytes);
        self
    }

    /// Most messages in one batch. Default 1000.
    pub fn batching_max_messages(mut self, n: usize) -> Self {
        self.batch.max_messages = n;
        self
    }

    /// Most payload bytes in one batch. Default 128 KiB.
    pub fn batching_max_bytes(mut self, n: usize) -> Self {
        self.batch.max_bytes = n;
        self
    }

    /// Longest a batch waits for more messages. Default 10 ms.
    pub fn batching_max_delay(mut self, delay: Duration) -> Self {
        self.batch.max_delay = delay;
        self
    }

    /// Compresses every entry with `codec`. Default none.
    pub fn compression(mut self, codec: Compression) -> Self {
        self.batch.compression = codec;
        self
    }

    /// Fails a send with no receipt after this long. Default 30 s.
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.send_timeout = timeout;
        self
    }

    /// Most messages pending (batched or in flight) per partition. Default 1000.
    pub fn max_pending_messages(mut self, n: usize) -> Self {
        self.max_pending_messages = n;
        self
    }

    /// Whether `send` waits (the default) or fails when the pending bound
    /// or the client's [memory limit](crate::client::ClientBuilder::memory_limit) is reached.
    pub fn when_full(mut self, when_full: WhenFull) -> Self {
        self.when_full = when_full;
        self
    }

    /// Where messages without a key go on a partitioned topic. Default round-robin.
    pub fn routing_mode(mut self, mode: RoutingMode) -> Self {
        self.routing = mode;
        self
    }

    /// How keys choose partitions. Default [`HashingScheme::JavaStringHash`]
    /// (the Java client's); [`HashingScheme::BoostHash`] matches the Python
    /// and C++ clients.
    pub fn hashing_scheme(mut self, scheme: HashingScheme) -> Self {
        self.hashing = scheme;
        self
    }

    /// Whether partitions added to a partitioned topic later get messages
    /// without a restart (default true, as Java's `autoUpdatePartitions`).
    pub fn auto_update_partitions(mut self, enabled: bool) -> Self {
        self.partitions_every =
            enabled.then_some(self.partitions_every.unwrap_or(DEFAULT_PARTITIONS_CHECK));
        self
    }

    /// How often a partitioned topic is checked for new partitions
    /// (default 60 s, as Java's `autoUpdatePartitionsInterval`).
    pub fn auto_update_partitions_interval(mut self, interval: Duration) -> Self {
        if self.partitions_every.is_some() {
            self.partitions_every = Some(interval);
        }
        self
    }

    /// Adds `interceptor`: it sees every message before it is queued and
    /// every send's outcome (see [`ProducerInterceptor`]). Several are
    /// called in the order added. None by default.
    pub fn interceptor(mut self, interceptor: impl ProducerInterceptor) -> Self {
        self.interceptors.push(Arc::new(interceptor));
        self
    }

    /// Checks the settings, then creates the producer (one per partition of
    /// a partitioned topic) on the brokers that own the topic.
    ///
    /// # Errors
    /// [`ProducerError::InvalidOption`] for a zero bound or duration, or a
    /// `chunk_size` without chunking or under 1 KiB,
    /// [`ProducerError::ChunkingWithBatching`] for chunking with an
    /// explicit `batching(true)`,
    /// [`ProducerError::Client`] if the topic name is invalid or lookup
    /// fails, [`ProducerError::Create`] if a broker refuses PRODUCER. A
    /// failure that may pass (a lost connection, a broker not ready) is
    /// tried again with backoff until the client's operation timeout; a
    /// busy, unauthorized or over-quota refusal fails at once.
    pub async fn create(self) -> Result<Producer, ProducerError> {
        self.validate()?;
        let topic_err = |source| ProducerError::Client {
            topic: self.topic.clone(),
            source,
        };
        let topic = TopicName::parse(&self.topic).map_err(|e| topic_err(e.into()))?;
        let partitions = self
            .client
            .partitioned_topic_metadata(&topic)
            .await
            .map_err(topic_err)?;
        let batch = BatchConfig {
            enabled: self.batch.enabled && !self.chunking,
            ..self.batch
        };
        let stats = ProducerRecorder::for_producer(&self.client, topic.as_str());
        let interceptors = Chain::new(self.interceptors.clone());
        let settings = Settings {
            batch,
            chunking: self.chunking,
            chunk_size: self.chunk_size,
            send_timeout: self.send_timeout,
            max_pending_messages: self.max_pending_messages,
            when_full: self.when_full,
            stats: stats.clone(),
            interceptors: interceptors.clone(),
        };
        let targets: Vec<(TopicName, i32)> = if partitions == 0 {
            vec![(topic.clone(), -1)]
        } else {
            (0..partitions)
                .map(|n| (topic.partition(n), i32::try_from(n).unwrap_or(i32::MAX)))
                .collect()
        };
        let recipes: Vec<Recipe> = targets
            .iter()
            .map(|(t, index)| self.recipe(t, *index))
            .collect();
        let created = futures::future::try_join_all(recipes.iter().map(connect::create)).await?;
        let name = created.first().map(|c| c.name.clone()).unwrap_or_default();
        let lanes = created
            .into_iter()
            .zip(recipes)
            .map(|(c, recipe)| task::spawn(c, recipe, settings.clone()))
            .collect();
        let follow = self
            .partitions_every
            .filter(|_| partitions > 0)
            .map(|every| {
                let builder = self.clone();
                Follow {
                    client: self.client.clone(),
                    topic: topic.clone(),
                    every,
                    recipe: Box::new(move |t, n| builder.recipe(t, n)),
                    settings: settings.clone(),
                }
            });
        let now = clock::now();
        let start = u32::try_from(clock::unix_millis() % u64::from(partitions.max(1))).unwrap_or(0);
        let switch = batch.enabled.then(|| batch.max_delay.saturating_mul(10));
        let router = Router::new(self.routing, self.hashing, partitions, start, switch, now);
        let (memory, limit) = self.client.memory();
        let producer = Producer::new(
            topic.as_str().to_owned(),
            name,
            lanes,
            (router, follow.is_some()),
            super::Memory {
                budget: memory.clone(),
                limit,
                when_full: self.when_full,
                wait: self.send_timeout,
            },
            (stats, interceptors),
        );
        if let Some(follow) = follow {
            tokio::spawn(partitions::follow(Arc::downgrade(&producer.inner), follow));
        }
        Ok(producer)
    }

    fn validate(&self) -> Result<(), ProducerError> {
        let invalid = |option, reason| Err(ProducerError::InvalidOption { option, reason });
        if self.chunking && self.batching_set && self.batch.enabled {
            return Err(ProducerError::ChunkingWithBatching);
        }
        if self.chunk_size.is_some() && !self.chunking {
            return invalid("chunk_size", "needs chunking(true)");
        }
        if self.chunk_size.is_some_and(|n| n < MIN_CHUNK_SIZE) {
            return invalid("chunk_size", "must be at least 1024 bytes");
        }
        if self.batch.max_messages == 0 {
            return invalid("batching_max_messages", "must be at least 1");
        }
        if self.batch.max_bytes == 0 {
            return invalid("batching_max_bytes", "must be at least 1");
        }
        if self.batch.max_delay.is_zero() {
            return invalid("batching_max_delay", "must be longer than zero");
        }
        if self.send_timeout.is_zero() {
            return invalid("send_timeout", "must be longer than zero");
        }
        if self.max_pending_messages == 0 {
            return invalid("max_pending_messages", "must be at least 1");
        }
        if self.partitions_every.is_some_and(|d| d.is_zero()) {
            return invalid(
                "auto_update_partitions_interval",
                "must be longer than zero",
            );
        }
        Ok(())
    }

    fn recipe(&self, topic: &TopicName, partition: i32) -> Recipe {
        Recipe {
            client: self.client.clone(),
            topic: topic.clone(),
            partition,
            name: self.name.clone(),
            user_named: self.name.is_some(),
            access_mode: self.access_mode,
            topic_epoch: None,
            schema: self.schema.clone(),
        }
    }
}
