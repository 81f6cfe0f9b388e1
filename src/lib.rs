//! A pure-Rust client for Apache Pulsar's binary protocol.
//!
//! Start with a [`Client`]: it looks topics up, keeps one connection per
//! broker, and makes producers, consumers and readers.
//!
//! ```no_run
//! use pulsar_wire::Client;
//! use pulsar_wire::consumer::SubscriptionType;
//! use pulsar_wire::producer::ProducerMessage;
//!
//! # async fn demo() -> Result<(), pulsar_wire::Error> {
//! let client = Client::builder().service_url("pulsar://127.0.0.1:6650").build().await?;
//!
//! let producer = client.producer("orders").create().await?;
//! let receipt = producer.send(ProducerMessage::new("hello").key("customer-7")).await?;
//! let id = receipt.await?; // the broker stored it
//!
//! let mut consumer = client
//!     .consumer("orders", "billing")
//!     .subscription_type(SubscriptionType::Shared)
//!     .subscribe()
//!     .await?;
//! let msg = consumer.receive().await?;
//! consumer.ack(&msg).await?;
//! # let _ = id;
//! # Ok(()) }
//! ```
//!
//! # Where to look
//!
//! - [`client`]: [`Client`], its builder (service URL, TLS, authentication,
//!   timeouts), lookup and topic names.
//! - [`producer`]: [`Producer`](producer::Producer), batching, compression,
//!   partition routing, send receipts.
//! - [`consumer`]: [`Consumer`] (receive, ack, nack, seek, `run` with
//!   handler outcomes), the dead-letter and retry policies, and [`Reader`].
//! - [`schema`]: typed producers and consumers (JSON, Avro, Protobuf,
//!   primitives, key-value, AUTO_CONSUME) over the same handles, and the
//!   broker's schema registry.
//! - [`transaction`]: [`Transaction`], for sends and acks that commit or
//!   abort together.
//! - [`interceptor`] and [`stats`]: hooks on every send, delivery, ack and
//!   nack, and each handle's figures.
//! - `testing` (feature `testing`): an in-process broker on tokio's paused
//!   clock, to unit-test code that produces and consumes.
//! - [`Error`]: every layer's error converts into it; each layer also has
//!   its own typed error ([`ClientError`], [`ConsumerError`],
//!   [`producer::ProducerError`], [`ConnectionError`]).
//! - [`wire`] and [`connection`]: the codec and the connection task, for
//!   those who speak the protocol by hand.
//!
//! # Delivery in one paragraph
//!
//! A consumer grants the broker permits for its receiver queue, hands
//! messages out in order, and sends an ACK for each message the
//! application acknowledges. A nack, or no answer within the ack timeout,
//! asks the broker for the message again; with a dead-letter policy a
//! message delivered too often is copied to the dead-letter topic, and the
//! original is acked only once the broker confirmed the copy. A lost
//! connection costs a pause: producers resend what was not confirmed, in
//! order, and consumers subscribe again. The repository's `docs/` folder
//! has the full contract and the measurements behind it.
//!
//! # Cargo features
//!
//! - `tls`: `pulsar+ssl://` service URLs through rustls.
//! - `oauth2`: OAuth2 client credentials, `auth::OAuth2ClientCredentials`
//!   (brings `tls`).
//! - `json`, `avro`, `protobuf`: the schema formats of [`schema`] (none is
//!   needed for bytes, strings, primitives and key-values of them).
//! - `otel`: the [`stats`] as OpenTelemetry metrics under the Java
//!   client's names.
//! - `testing`: the test kit.
//! - `cli`: the `pulsar-wire` command (brings `tls`, `oauth2`, `json`,
//!   `avro` and `protobuf`).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod auth;
mod backoff;
pub mod client;
mod clock;
pub mod codec;
pub mod compression;
pub mod connection;
pub mod consumer;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod ids;
pub mod interceptor;
pub mod message_id;
pub mod producer;
pub mod proto;
pub mod schema;
pub mod stats;
#[cfg(feature = "testing")]
pub mod testing;
pub mod transaction;
pub mod wire;

pub use client::{Client, ClientBuilder, ClientError, TopicName};
pub use connection::{Connection, ConnectionError};
pub use consumer::{Consumer, ConsumerBuilder, ConsumerError, Message, Reader};
pub use error::{Error, Result};
pub use message_id::MessageId;
pub use transaction::{Transaction, TransactionError};

/// The code examples of README.md and docs/, compiled as doctests.
#[cfg(doctest)]
mod documentation {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/consuming.md")]
    struct Consuming;
    #[doc = include_str!("../docs/producing.md")]
    struct Producing;
    #[doc = include_str!("../docs/encryption-and-chunking.md")]
    struct EncryptionAndChunking;
    #[doc = include_str!("../docs/tls-and-auth.md")]
    struct TlsAndAuth;
    #[doc = include_str!("../docs/protocol.md")]
    struct Protocol;
    #[doc = include_str!("../docs/transactions.md")]
    struct Transactions;
    #[cfg(feature = "testing")]
    #[doc = include_str!("../docs/testing-kit.md")]
    struct TestingKit;
    #[cfg(feature = "avro")]
    #[doc = include_str!("../docs/schemas.md")]
    struct Schemas;
}
