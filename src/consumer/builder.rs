//! [`ConsumerBuilder`]: a consumer's settings, checked in the final
//! [`subscribe`](ConsumerBuilder::subscribe).

use std::sync::Arc;
use std::time::Duration;

use crate::client::{Client, TopicName};
use crate::interceptor::ConsumerInterceptor;

use super::batch_receive::BatchReceivePolicy;
use super::core::chunks::ChunkLimits;
use super::core::config::{CoreConfig, SubscriptionType};
use super::core::dead_letter::DeadLetterPolicy;
use super::core::nack::{NackPolicy, RedeliveryBackoff};
use super::crypto::CryptoFailureAction;
use super::error::ConfigError;
use super::error::ConsumerError;
use super::letters::copy::DEFAULT_MAX_RECONSUMETIMES;
use super::pattern::{RegexSubscriptionMode, TopicsPattern};
use super::subscribe::{InitialPosition, KeySharedPolicy, SubscribeOptions};
use super::task::{DEFAULT_CHECK_INTERVAL, DiscoverySettings};

/// The default receiver queue: how many messages the broker may push ahead
/// of the application.
pub const DEFAULT_RECEIVER_QUEUE_SIZE: u32 = 1000;

/// The default bound on the receiver queues of all partitions of a
/// partitioned topic together, as Java's
/// `maxTotalReceiverQueueSizeAcrossPartitions`.
pub const DEFAULT_MAX_TOTAL_RECEIVER_QUEUE_SIZE: u32 = 50_000;

/// Configures a consumer; made by [`Client::consumer`], finished by
/// [`subscribe`](Self::subscribe). Settings are checked there, so a bad one
/// is a typed error, never a panic.
///
/// Defaults: an Exclusive, durable subscription starting at the latest
/// message, a receiver queue of 1000 (50,000 across the partitions of a
/// partitioned topic), no consumer name, priority level 0,
/// fire-and-forget acks, no batch index ack, batch receives of at most
/// 100 messages, 10 MiB or 100 ms, no ack timeout, immediate nacks (coalesced into
/// one rewind on Exclusive and Failover, see
/// [`nack_policy`](Self::nack_policy)), no dead-letter policy, no retry
/// letters.
///
/// # Examples
/// ```no_run
/// use pulsar_wire::consumer::{InitialPosition, SubscriptionType};
/// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
/// let consumer = client
///     .consumer("orders", "billing")
///     .subscription_type(SubscriptionType::Shared)
///     .initial_position(InitialPosition::Earliest)
///     .subscribe()
///     .await?;
/// # drop(consumer); Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `subscribe().await`"]
pub struct ConsumerBuilder {
    pub(crate) client: Client,
    pub(crate) topics: Vec<String>,
    pub(crate) options: SubscribeOptions,
    pub(crate) receiver_queue_size: u32,
    /// The bound on the receiver queues of one partitioned topic's partitions together.
    pub(crate) max_total_receiver_queue_size: u32,
    /// What one `receive_batch` waits for.
    pub(crate) batch_receive: BatchReceivePolicy,
    pub(crate) ack_receipts: bool,
    pub(crate) ack_group_time: Option<Duration>,
    /// Ack timeout, its tick and backoff, the nack and dead-letter policies
    /// (the other fields are filled in by `subscribe`).
    pub(crate) delivery: CoreConfig,
    /// Also subscribe to the retry-letter topic (`reconsume_later`).
    pub(crate) retry: bool,
    /// What to do with encrypted messages.
    pub(crate) crypto_failure_action: CryptoFailureAction,
    /// Bounds on the chunked messages being assembled.
    pub(crate) chunks: ChunkLimits,
    /// A topics pattern, and which domains it reads.
    pub(crate) pattern: Option<String>,
    pub(crate) pattern_mode: RegexSubscriptionMode,
    /// How often the pattern's namespace is listed.
    pub(crate) pattern_every: Duration,
    /// How often partitioned topics are checked for new partitions (`None`: never).
    pub(crate) partitions_every: Option<Duration>,
    /// Told of every message handed out and of the answers to it.
    pub(crate) interceptors: Vec<Arc<dyn ConsumerInterceptor>>,
}

impl ConsumerBuilder {
    pub(crate) fn new(client: Client, topic: String, subscription: String) -> Self {
        Self {
            client,
            topics: vec![topic],
            options: SubscribeOptions {
                subscription,
                durable: true,
                ..SubscribeOptions::default()
            },
            receiver_queue_size: DEFAULT_RECEIVER_QUEUE_SIZE,
            max_total_receiver_queue_size: DEFAULT_MAX_TOTAL_RECEIVER_QUEUE_SIZE,
            batch_receive: BatchReceivePolicy::default(),
            ack_receipts: false,
            ack_group_time: None,
            delivery: CoreConfig::default(),
            retry: false,
            crypto_failure_action: CryptoFailureAction::default(),
            chunks: ChunkLimits::default(),
            pattern: None,
            pattern_mode: RegexSubscriptionMode::default(),
            pattern_every: DEFAULT_CHECK_INTERVAL,
            partitions_every: Some(DEFAULT_CHECK_INTERVAL),
            interceptors: Vec::new(),
        }
    }

    /// Also reads every topic of a namespace whose name matches `pattern`,
    /// as they are created and deleted (see [`Client::consumer_pattern`]).
    pub fn topics_pattern(mut self, pattern: impl Into<String>) -> Self {
        self.pattern = Some(pattern.into());
        self
    }

    /// Which topics the pattern reads by domain: persistent ones (the
    /// default), non-persistent ones, or both (Java's `RegexSubscriptionMode`).
    pub fn regex_subscription_mode(mut self, mode: RegexSubscriptionMode) -> Self {
        self.pattern_mode = mode;
        self
    }

    /// How often the pattern's namespace is listed for topics created or
    /// deleted (default 60 s, as Java's `patternAutoDiscoveryPeriod`). A
    /// broker with topic-list watchers also tells of them at once.
    pub fn pattern_auto_discovery_period(mut self, period: Duration) -> Self {
        self.pattern_every = period;
        self
    }

    /// Whether partitions added to a partitioned topic later are read
    /// without a restart (default true, as Java's `autoUpdatePartitions`).
    pub fn auto_update_partitions(mut self, enabled: bool) -> Self {
        self.partitions_every =
            enabled.then_some(self.partitions_every.unwrap_or(DEFAULT_CHECK_INTERVAL));
        self
    }

    /// How often partitioned topics are checked for new partitions
    /// (default 60 s, as Java's `autoUpdatePartitionsInterval`).
    pub fn auto_update_partitions_interval(mut self, interval: Duration) -> Self {
        if self.partitions_every.is_some() {
            self.partitions_every = Some(interval);
        }
        self
    }

    /// Adds `interceptor`: it sees every message before the application
    /// gets it, and every ack, nack and ack timeout (see
    /// [`ConsumerInterceptor`]). Several are called in the order added.
    /// None by default.
    pub fn interceptor(mut self, interceptor: impl ConsumerInterceptor) -> Self {
        self.interceptors.push(Arc::new(interceptor));
        self
    }

    /// Also consumes `topic`: one consumer over all its topics (messages
    /// say which one they came from).
    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.topics.push(topic.into());
        self
    }

    /// Exclusive (the default), Shared, Failover or Key_Shared.
    pub fn subscription_type(mut self, kind: SubscriptionType) -> Self {
        self.options.subscription_type = kind;
        self
    }

    /// How a Key_Shared consumer gets its keys (auto-split when not set).
    /// Only valid with [`SubscriptionType::KeyShared`].
    pub fn key_shared_policy(mut self, policy: KeySharedPolicy) -> Self {
        self.options.key_shared = Some(policy);
        self
    }

    /// Key_Shared: lets the broker deliver a key's messages out of order
    /// (default false). With it the broker does not hold a key back while
    /// a consumer that joined later waits for older messages of that key
    /// to be acked; Java's `KeySharedPolicy.setAllowOutOfOrderDelivery`.
    /// Only valid with [`SubscriptionType::KeyShared`].
    pub fn allow_out_of_order_delivery(mut self, allow: bool) -> Self {
        self.options.allow_out_of_order_delivery = allow;
        self
    }

    /// Where a subscription that does not exist yet starts (default latest).
    pub fn initial_position(mut self, position: InitialPosition) -> Self {
        self.options.initial_position = position;
        self
    }

    /// Whether the subscription outlives its consumers (default true). A
    /// non-durable subscription's position is forgotten when it closes.
    pub fn durable(mut self, durable: bool) -> Self {
        self.options.durable = durable;
        self
    }

    /// Whether a [`seek`](super::Consumer::seek) to a message id brings
    /// that message again (default false: reading starts after it, as the
    /// official clients do with `startMessageIdInclusive` off).
    pub fn seek_inclusive(mut self, inclusive: bool) -> Self {
        self.options.start_inclusive = inclusive;
        self
    }

    /// The consumer's name, as the broker shows it (generated when unset).
    pub fn consumer_name(mut self, name: impl Into<String>) -> Self {
        self.options.consumer_name = Some(name.into());
        self
    }

    /// Dispatch priority on Shared subscriptions: 0 is the highest; a
    /// consumer gets messages only while those of higher priority have no
    /// permits left.
    pub fn priority_level(mut self, level: i32) -> Self {
        self.options.priority_level = Some(level);
        self
    }

    /// How many messages the broker may push ahead of the application
    /// (default 1000). Permits are granted again once the application has
    /// taken half.
    ///
    /// Zero prefetches nothing, as Java's zero-queue consumer: each
    /// [`receive`](super::Consumer::receive) grants the broker one permit
    /// and waits for that message (so [`try_receive`](super::Consumer::try_receive)
    /// finds nothing the broker sent unasked). A zero queue takes one
    /// topic that is not partitioned, without retry letters;
    /// [`subscribe`](Self::subscribe) refuses it otherwise with
    /// [`ConsumerError::ZeroQueueNeedsOneTopic`]. It cannot take batched
    /// messages: a batch arriving closes the consumer and the pending and
    /// later receives fail with [`ConsumerError::BatchOnZeroQueue`]
    /// (Java closes the consumer too).
    pub fn receiver_queue_size(mut self, size: u32) -> Self {
        self.receiver_queue_size = size;
        self
    }

    /// Bounds the receiver queues of a partitioned topic's partitions
    /// together (default 50,000, as Java's
    /// `maxTotalReceiverQueueSizeAcrossPartitions`): each partition gets
    /// `min(receiver_queue_size, total / partitions)`, at least 1.
    pub fn max_total_receiver_queue_size_across_partitions(mut self, total: u32) -> Self {
        self.max_total_receiver_queue_size = total;
        self
    }

    /// Acks batch members one by one (default false): each ack goes to the
    /// broker at once with the entry's `ack_set`, and members acked are
    /// not delivered again after a restart or redelivery. The broker must
    /// have `acknowledgmentAtBatchIndexLevelEnabled` (Apache Pulsar's
    /// default is off); without it the broker treats a member ack as
    /// nothing, and the entry is acked when all members are. Off, the
    /// consumer acks the entry once every member is acked, and a restart
    /// before that brings every member of the entry again.
    pub fn batch_index_ack(mut self, enabled: bool) -> Self {
        self.delivery.batch_index_ack_enabled = enabled;
        self
    }

    /// What one [`receive_batch`](super::Consumer::receive_batch) waits
    /// for (default: 100 messages, 10 MiB or 100 ms; Java's
    /// `BatchReceivePolicy.DEFAULT_POLICY` has the same bytes and time but
    /// no message count).
    pub fn batch_receive_policy(mut self, policy: BatchReceivePolicy) -> Self {
        self.batch_receive = policy;
        self
    }

    /// With receipts, an ack returns Ok only once the broker confirmed (its
    /// ACK_RESPONSE) the ACK that covers the message, and reports its error;
    /// without (the default) it is fire-and-forget. A batch member is acked
    /// on the broker with its entry: the ack of a member whose batch is not
    /// complete yet returns Ok once recorded (it never waits on acks not
    /// made yet), and the one that completes the batch once the entry's ACK
    /// is confirmed; with batch index ack each member is confirmed alone.
    pub fn ack_receipts(mut self, enabled: bool) -> Self {
        self.ack_receipts = enabled;
        self.delivery.lost_acks_resent = enabled;
        self
    }

    /// Sends individual acks together, in one ACK frame per `interval`
    /// (off by default: each ack is its own frame, at once). Acks still
    /// held are sent when the consumer closes. Not combined with
    /// [`ack_receipts`](Self::ack_receipts), which confirms each ack.
    pub fn ack_group_time(mut self, interval: Duration) -> Self {
        self.ack_group_time = Some(interval);
        self
    }

    /// Requests again every message the application has held longer than
    /// `timeout` without acking or nacking it (off by default). The clock of
    /// a message starts when the application takes it; expired messages are
    /// requested in one command per tick.
    pub fn ack_timeout(mut self, timeout: Duration) -> Self {
        self.delivery.ack_timeout = Some(timeout);
        self
    }

    /// How often the ack timeout is checked (default 500 ms). A message is
    /// asked for again at the first tick at or after its deadline, so at
    /// most one tick late. The 500 ms default is this client's own: Java's
    /// `ackTimeoutTickTime` defaults to 1 s.
    pub fn ack_timeout_tick(mut self, tick: Duration) -> Self {
        self.delivery.tick = tick;
        self
    }

    /// Lets the ack timeout grow with a message's redelivery count, as Java's
    /// `ackTimeoutRedeliveryBackoff`.
    pub fn ack_timeout_backoff(mut self, backoff: RedeliveryBackoff) -> Self {
        self.delivery.ack_timeout_backoff = Some(backoff);
        self
    }

    /// When a nacked message is requested again: at once (the default), after
    /// a fixed delay, or after a delay growing with its redelivery count.
    ///
    /// On Shared and Key_Shared the broker redelivers the nacked message
    /// itself. On Exclusive and Failover it can only rewind the consumer to
    /// the first unacked message, so a nack there is coalesced: the messages
    /// already received keep reaching the application (the consumer stops
    /// asking the broker for more meanwhile), and the rewind goes out once
    /// the application asks for a message with none left, and no sooner than
    /// [`rewind_min_delay`](Self::rewind_min_delay) after the nack. Every
    /// message makes progress and the nacked one comes back after the
    /// others, instead of alone and at once, again and again.
    pub fn nack_policy(mut self, policy: NackPolicy) -> Self {
        self.delivery.nack = policy;
        self
    }

    /// Exclusive and Failover: the shortest time between a nack and the
    /// rewind it leads to (default 100 ms; see [`nack_policy`](Self::nack_policy)).
    /// It bounds how often a message nacked on its own comes back.
    pub fn rewind_min_delay(mut self, delay: Duration) -> Self {
        self.delivery.rewind_min_delay = delay;
        self
    }

    /// Sends messages delivered too often to a dead-letter topic (Shared
    /// and Key_Shared only: the broker counts redeliveries there).
    ///
    /// A message forwarded gets a copy published to the dead-letter topic
    /// (default `<topic>-<subscription>-DLQ`; for a partition, named after
    /// its partitioned topic, as in Java) with the same payload, key,
    /// ordering key, event time and properties, plus `REAL_TOPIC` (the full
    /// name of the topic it came from) and `ORIGIN_MESSAGE_ID`
    /// (`ledger:entry:partition[:batch]`). The original is acked only once
    /// the broker confirmed the copy; if the publish fails, the original is
    /// redelivered, never acked. The publish runs beside the consumer's
    /// other work, which never waits for it. With `initial_subscription_name`
    /// set, that subscription is created on the dead-letter topic before
    /// the first forward, so the copies are kept until someone reads them.
    ///
    /// When a message is forwarded depends on the policy's `cutoff`:
    /// - [`DeadLetterCutoff::OnArrival`](super::DeadLetterCutoff::OnArrival)
    ///   (the default, and the contract): a message arriving with a
    ///   redelivery count `>= max_redeliver_count` is forwarded at once and
    ///   the application never sees it. With a maximum of 3 the application
    ///   sees deliveries 0, 1 and 2.
    /// - [`DeadLetterCutoff::JavaStyle`](super::DeadLetterCutoff::JavaStyle):
    ///   as the Java client, the application sees delivery 3 too, and the
    ///   message is forwarded when it is next nacked or its ack timeout
    ///   expires.
    ///
    /// `subscribe` refuses a policy on an Exclusive or Failover subscription
    /// with [`ConfigError::DeadLetterNeedsSharedSubscription`]: the broker
    /// keeps no redelivery counts there, so the policy could never act.
    ///
    /// # Examples
    /// ```no_run
    /// use pulsar_wire::consumer::{DeadLetterCutoff, DeadLetterPolicy, SubscriptionType};
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// // The contract: deliveries 0, 1, 2 reach the application; the fourth
    /// // goes to persistent://public/default/orders-billing-DLQ, where the
    /// // subscription "audit" keeps it.
    /// let consumer = client
    ///     .consumer("persistent://public/default/orders", "billing")
    ///     .subscription_type(SubscriptionType::Shared)
    ///     .dead_letter_policy(DeadLetterPolicy {
    ///         initial_subscription_name: Some("audit".into()),
    ///         ..DeadLetterPolicy::after_redeliveries(3)
    ///     })
    ///     .subscribe()
    ///     .await?;
    /// // As the Java client: delivery 3 reaches the application too, and is
    /// // forwarded at its next nack or ack timeout.
    /// let java_like = client
    ///     .consumer("persistent://public/default/orders", "shipping")
    ///     .subscription_type(SubscriptionType::KeyShared)
    ///     .dead_letter_policy(DeadLetterPolicy {
    ///         cutoff: DeadLetterCutoff::JavaStyle,
    ///         ..DeadLetterPolicy::after_redeliveries(3)
    ///     })
    ///     .subscribe()
    ///     .await?;
    /// # drop((consumer, java_like)); Ok(()) }
    /// ```
    pub fn dead_letter_policy(mut self, policy: DeadLetterPolicy) -> Self {
        self.delivery.dead_letter = Some(policy);
        self
    }

    /// Enables [`Consumer::reconsume_later`](super::Consumer::reconsume_later):
    /// the consumer also subscribes to the retry-letter topic (the dead-letter
    /// policy's `retry_letter_topic`, default `<topic>-<subscription>-RETRY`
    /// after the first topic, as in Java), where retried messages come back
    /// after their delay.
    ///
    /// A retry needs a limit: the dead-letter policy's `max_redeliver_count`
    /// caps `RECONSUMETIMES` (and the broker's redelivery count). Without a
    /// policy, [`DeadLetterPolicy::after_redeliveries`]`(16)` is used, as the
    /// Java client's `MAX_RECONSUMETIMES`. Like a dead-letter policy, it
    /// needs a Shared or Key_Shared subscription.
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// use pulsar_wire::consumer::{DeadLetterPolicy, SubscriptionType};
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// let mut consumer = client
    ///     .consumer("orders", "billing")
    ///     .subscription_type(SubscriptionType::Shared)
    ///     .dead_letter_policy(DeadLetterPolicy::after_redeliveries(5))
    ///     .enable_retry(true)
    ///     .subscribe()
    ///     .await?;
    /// let msg = consumer.receive().await?;
    /// // Back in 10 s from orders-billing-RETRY with RECONSUMETIMES = 1; the
    /// // sixth time round it goes to orders-billing-DLQ instead.
    /// consumer.reconsume_later(&msg, Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    pub fn enable_retry(mut self, enabled: bool) -> Self {
        self.retry = enabled;
        self
    }

    /// What the consumer does with an encrypted message (it holds no keys):
    /// [`CryptoFailureAction::Fail`] by default, never acked and never
    /// handed out, `receive()` returns
    /// [`ConsumerError::Unreadable`](super::ConsumerError::Unreadable) in
    /// its place; `Discard` acks it; `Consume` hands out the ciphertext
    /// with its [`EncryptionContext`](super::EncryptionContext). A message
    /// compressed with a codec this client does not know is treated as
    /// `Fail` whatever is set here.
    ///
    /// # Examples
    /// ```no_run
    /// use pulsar_wire::consumer::{ConsumerError, CryptoFailureAction};
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// let mut consumer = client
    ///     .consumer("orders", "archive")
    ///     .crypto_failure_action(CryptoFailureAction::Consume)
    ///     .subscribe()
    ///     .await?;
    /// let msg = consumer.receive().await?;
    /// if let Some(context) = msg.encryption_context() {
    ///     println!("encrypted for {:?}", context.keys().iter().map(|k| &k.name).collect::<Vec<_>>());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn crypto_failure_action(mut self, action: CryptoFailureAction) -> Self {
        self.crypto_failure_action = action;
        self
    }

    /// How many chunked messages may be assembled at once (default 10, as
    /// Java's `maxPendingChunkedMessage`; 0: no bound). A message too large
    /// for one entry arrives in chunks, possibly interleaved with other
    /// messages' chunks; the consumer hands it out whole once its last
    /// chunk is in, under the last chunk's id (see [`MessageId::first_chunk`](crate::MessageId::first_chunk)). A first chunk beyond this
    /// bound drops the oldest incomplete message: its chunks stay unacked
    /// (the ack timeout or a reconnect brings them back), or are acked with
    /// [`auto_ack_oldest_chunked_message_on_queue_full`](Self::auto_ack_oldest_chunked_message_on_queue_full).
    pub fn max_pending_chunked_messages(mut self, max: usize) -> Self {
        self.chunks.max_pending = max;
        self
    }

    /// How many bytes the chunked messages being assembled may hold, per
    /// partition (default [`DEFAULT_MAX_PENDING_CHUNKED_BYTES`], 64 MiB, the
    /// client's default memory limit; the Java client has no such bound).
    /// Each chunk counts its payload and a few dozen bytes for its id.
    ///
    /// A chunk that does not fit drops the oldest other incomplete
    /// messages, as [`max_pending_chunked_messages`](Self::max_pending_chunked_messages)
    /// does. A message that cannot be assembled within the bound (or whose
    /// chunks bring more bytes than its `total_chunk_msg_size` announces) is
    /// given up with a warning: its chunks stay unacked, never acked, and
    /// the ack timeout or a reconnect brings them back. Raise it to receive
    /// chunked messages larger than 64 MiB.
    ///
    /// [`DEFAULT_MAX_PENDING_CHUNKED_BYTES`]: super::DEFAULT_MAX_PENDING_CHUNKED_BYTES
    ///
    /// # Errors
    /// [`subscribe`](Self::subscribe) fails with
    /// [`ConsumerError::ZeroPendingChunkedBytes`] for 0.
    pub fn max_pending_chunked_bytes(mut self, bytes: usize) -> Self {
        self.chunks.max_pending_bytes = bytes;
        self
    }

    /// Acks the chunks of the oldest incomplete chunked message when
    /// [`max_pending_chunked_messages`](Self::max_pending_chunked_messages)
    /// or [`max_pending_chunked_bytes`](Self::max_pending_chunked_bytes)
    /// drops it to make room (default false: they stay unacked).
    pub fn auto_ack_oldest_chunked_message_on_queue_full(mut self, enabled: bool) -> Self {
        self.chunks.auto_ack_oldest_on_full = enabled;
        self
    }

    /// How long a chunked message may stay incomplete after its first chunk
    /// arrived (default 60 s; zero: forever). Then it is dropped and its
    /// chunks are acked, as the Java client does: its producer is presumed
    /// to have failed mid-message.
    pub fn expire_time_of_incomplete_chunked_message(mut self, expiry: Duration) -> Self {
        self.chunks.expiry = (!expiry.is_zero()).then_some(expiry);
        self
    }

    /// The dead-letter policy in force: the one set, or with retry on,
    /// Java's default limit.
    pub(crate) fn dead_letter(&self) -> Option<DeadLetterPolicy> {
        match &self.delivery.dead_letter {
            Some(policy) => Some(policy.clone()),
            None if self.retry => Some(DeadLetterPolicy::after_redeliveries(
                DEFAULT_MAX_RECONSUMETIMES,
            )),
            None => None,
        }
    }

    /// The delivery core's configuration for these settings.
    pub(crate) fn core_config(&self) -> CoreConfig {
        CoreConfig {
            subscription_type: self.options.subscription_type,
            receiver_queue_size: self.receiver_queue_size,
            dead_letter: self.dead_letter(),
            ..self.delivery.clone()
        }
    }

    /// The pattern parsed, for a pattern consumer.
    pub(crate) fn topics_pattern_parsed(&self) -> Result<Option<TopicsPattern>, ConsumerError> {
        self.pattern
            .as_deref()
            .map(|p| TopicsPattern::parse(p, self.pattern_mode))
            .transpose()
    }

    /// How the consumer follows topics that change.
    pub(crate) fn discovery(&self) -> Result<DiscoverySettings, ConsumerError> {
        Ok(DiscoverySettings {
            partitions_every: self.partitions_every,
            pattern: self
                .topics_pattern_parsed()?
                .map(|p| (p, self.pattern_every)),
        })
    }

    /// Checks every setting and parses the topic names.
    pub(crate) fn validate(&self) -> Result<Vec<TopicName>, ConsumerError> {
        if self.topics.is_empty() && self.pattern.is_none() {
            return Err(ConsumerError::NoTopic);
        }
        if self.pattern_every.is_zero() {
            return Err(ConsumerError::ZeroInterval {
                option: "pattern_auto_discovery_period",
            });
        }
        if self.partitions_every.is_some_and(|d| d.is_zero()) {
            return Err(ConsumerError::ZeroInterval {
                option: "auto_update_partitions_interval",
            });
        }
        self.topics_pattern_parsed()?;
        if self.ack_group_time.is_some_and(|t| t.is_zero()) {
            return Err(ConsumerError::ZeroAckGroupTime);
        }
        if self.max_total_receiver_queue_size == 0 {
            return Err(ConsumerError::ZeroTotalReceiverQueue);
        }
        if self.chunks.max_pending_bytes == 0 {
            return Err(ConsumerError::ZeroPendingChunkedBytes);
        }
        self.batch_receive.validate()?;
        if self.receiver_queue_size == 0 && self.pattern.is_some() {
            return Err(ConsumerError::ZeroQueueWithPattern);
        }
        if self.receiver_queue_size == 0 && (self.topics.len() > 1 || self.retry) {
            return Err(ConsumerError::ZeroQueueNeedsOneTopic {
                topics: self.topics.len() + usize::from(self.retry),
            });
        }
        self.options.validate()?;
        let core = self.core_config();
        core.validate()?;
        let subscription = self.options.subscription_type;
        if core.dead_letter.is_some() && !subscription.redelivers_by_id() {
            return Err(ConfigError::DeadLetterNeedsSharedSubscription { subscription }.into());
        }
        let mut topics = Vec::with_capacity(self.topics.len());
        for t in &self.topics {
            let name = TopicName::parse(t)?;
            if !topics.contains(&name) {
                topics.push(name);
            }
        }
        Ok(topics)
    }
}

impl Client {
    /// A builder for a consumer of `topic` (a full or short name; a
    /// partitioned topic gives one consumer over all partitions) on
    /// `subscription`.
    pub fn consumer(
        &self,
        topic: impl Into<String>,
        subscription: impl Into<String>,
    ) -> ConsumerBuilder {
        ConsumerBuilder::new(self.clone(), topic.into(), subscription.into())
    }

    /// A builder for a consumer of every topic whose name matches
    /// `pattern`, in the namespace the pattern names, on `subscription`.
    ///
    /// The pattern is a regular expression matched against the whole
    /// topic name without its domain, as the Java client matches it:
    /// `persistent://public/default/orders-.*` reads
    /// `persistent://public/default/orders-eu` but not `…/old-orders-eu`.
    /// A short pattern (`orders-.*`) is in `public/default`. A partitioned
    /// topic matches by its own name and is read whole (every partition).
    /// Persistent topics only by default; see
    /// [`regex_subscription_mode`](ConsumerBuilder::regex_subscription_mode).
    ///
    /// Topics created later are joined (read from their first message),
    /// topics deleted are left: the namespace is listed every 60 s
    /// ([`pattern_auto_discovery_period`](ConsumerBuilder::pattern_auto_discovery_period)),
    /// and a broker that offers topic-list watchers tells of changes at once.
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// use pulsar_wire::consumer::{RegexSubscriptionMode, SubscriptionType};
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// let mut consumer = client
    ///     .consumer_pattern("persistent://public/default/orders-.*", "billing")
    ///     .subscription_type(SubscriptionType::Shared)
    ///     .regex_subscription_mode(RegexSubscriptionMode::PersistentOnly)
    ///     .pattern_auto_discovery_period(Duration::from_secs(30))
    ///     .subscribe()
    ///     .await?;
    /// let msg = consumer.receive().await?;
    /// println!("{} from {}", msg.id(), msg.topic());
    /// consumer.ack(&msg).await?;
    /// # Ok(()) }
    /// ```
    pub fn consumer_pattern(
        &self,
        pattern: impl Into<String>,
        subscription: impl Into<String>,
    ) -> ConsumerBuilder {
        let mut builder = ConsumerBuilder::new(self.clone(), String::new(), subscription.into());
        builder.topics.clear();
        builder.topics_pattern(pattern)
    }
}
