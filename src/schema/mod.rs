//! Schemas: typed producers and consumers over the byte-level API, in the
//! formats and with the registry the Java client uses.
//!
//! A [`Schema<T>`] turns values of `T` into payloads and back, and says
//! what to register with the broker ([`SchemaInfo`]).
//! [`ProducerBuilder::create_with`](crate::producer::ProducerBuilder::create_with)
//! and [`ConsumerBuilder::subscribe_with`](crate::ConsumerBuilder::subscribe_with)
//! make a [`TypedProducer`] and a [`TypedConsumer`]: the same producer and
//! consumer as `create` and `subscribe` make (every builder setting
//! applies), which register the schema in PRODUCER / SUBSCRIBE, stamp each
//! message with the schema version the broker gave, and decode each
//! message lazily, with the schema version it was written with
//! ([`TypedMessage::value`]).
//!
//! | Schema | Value | Feature |
//! |---|---|---|
//! | [`BytesSchema`] | `Bytes`, `Vec<u8>` | |
//! | [`StringSchema`] | `String` | |
//! | [`Primitive`] | `bool`, `i8`, `i16`, `i32`, `i64`, `f32`, `f64` | |
//! | [`KeyValue`] | `(K, V)`, the key inline or in the message key | |
//! | `Json` | serde types | `json` |
//! | `Avro` | serde types, schema derived or given as text | `avro` |
//! | `ProtobufNative`, `Protobuf` | prost messages | `protobuf` |
//! | `AutoConsume` | `GenericValue`: each message in its writer's schema | `json` |
//! | [`AutoPublish`] | `Bytes` already in the topic's schema | |
//!
//! # Examples
//! ```no_run
//! # #[cfg(feature = "json")]
//! # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
//! use pulsar_wire::schema::Json;
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Order { id: i64, item: String }
//! let definition = r#"{"type":"record","name":"Order","fields":[
//!     {"name":"id","type":"long"},{"name":"item","type":"string"}]}"#;
//!
//! let producer = client.producer("orders").create_with(Json::<Order>::new(definition)).await?;
//! producer.send(&Order { id: 1, item: "tea".into() }).await?.await?;
//!
//! let mut consumer = client
//!     .consumer("orders", "billing")
//!     .subscribe_with(Json::<Order>::new(definition))
//!     .await?;
//! let msg = consumer.receive().await?;
//! match msg.value() {
//!     Ok(order) => println!("order {} of {}", order.id, order.item),
//!     Err(e) => println!("{} is no order: {e}", msg.id()),
//! }
//! consumer.ack(&msg).await?;
//! # Ok(()) }
//! ```

mod auto;
#[cfg(feature = "avro")]
mod avro;
mod error;
mod info;
#[cfg(feature = "json")]
mod json;
mod key_value;
mod primitive;
#[cfg(feature = "protobuf")]
mod protobuf;
mod registry;
mod typed;

use bytes::Bytes;

pub use auto::AutoPublish;
#[cfg(feature = "json")]
pub use auto::{AutoConsume, GenericValue};
#[cfg(feature = "avro")]
pub use avro::Avro;
pub use error::SchemaError;
pub use info::{SchemaInfo, SchemaType, SchemaVersion};
#[cfg(feature = "json")]
pub use json::Json;
pub use key_value::{KeyValue, KeyValueEncoding};
pub use primitive::{BytesSchema, Primitive, StringSchema};
#[cfg(feature = "protobuf")]
pub use protobuf::{Protobuf, ProtobufNative};
pub use typed::{TypedConsumer, TypedMessage, TypedProducer};

/// The apache-avro crate this build uses: derive `AvroSchema` with it (its
/// `derive` feature) so [`Avro::derived`] gets the same trait.
#[cfg(feature = "avro")]
pub use apache_avro;

/// How values of `T` become payloads and back, and what is registered with
/// the broker for them.
///
/// Object safe: typed producers and consumers hold an `Arc<dyn Schema<T>>`,
/// so their type names only the value (`TypedProducer<Order>`).
pub trait Schema<T>: Send + Sync + std::fmt::Debug {
    /// The schema to register (in PRODUCER and SUBSCRIBE).
    fn info(&self) -> SchemaInfo;

    /// The payload for `value`.
    ///
    /// # Errors
    /// [`SchemaError::Encode`] if the value cannot be written in the schema.
    fn encode(&self, value: &T) -> Result<Bytes, SchemaError>;

    /// The key to send in the message key instead of the payload (a
    /// [`KeyValue`] schema with a separated key); `None` for the others.
    ///
    /// # Errors
    /// [`SchemaError::Encode`] if the key cannot be written in its schema.
    fn encode_key(&self, value: &T) -> Result<Option<Bytes>, SchemaError> {
        let _ = value;
        Ok(None)
    }

    /// The value of one message.
    ///
    /// # Errors
    /// [`SchemaError::Decode`] for a payload that is not a value of the
    /// schema, [`SchemaError::Mismatch`] for a message written in a schema
    /// this one cannot read.
    fn decode(&self, input: Encoded<'_>) -> Result<T, SchemaError>;

    /// Whether [`decode`](Self::decode) needs the writer's schema (Avro
    /// resolves a value from the writer's version to the reader's; AUTO_CONSUME
    /// reads every format): the consumer then fetches each schema version
    /// once and passes it in [`Encoded::writer`].
    fn needs_writer_schema(&self) -> bool {
        false
    }
}

/// One message as a schema decodes it.
#[derive(Debug, Clone, Copy)]
pub struct Encoded<'a> {
    /// The payload.
    pub payload: &'a [u8],
    /// The message key's bytes, for a key-value schema with a separated key.
    pub key: Option<&'a [u8]>,
    /// The schema the message was written with, when the schema asked for
    /// it ([`Schema::needs_writer_schema`]) and the message names a version.
    pub writer: Option<&'a SchemaInfo>,
}

impl<'a> Encoded<'a> {
    /// A payload alone: no key, the writer's schema unknown.
    pub const fn payload(payload: &'a [u8]) -> Self {
        Self {
            payload,
            key: None,
            writer: None,
        }
    }
}
