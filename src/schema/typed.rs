//! [`TypedProducer`], [`TypedConsumer`] and [`TypedMessage`]: the byte-level
//! handles with a [`Schema`] on top.
//!
//! They wrap the untyped handles rather than make them generic: the bytes
//! API stays as it is, and everything the handles do (acks, seeks, `run`,
//! flush, close) is there through `Deref` without a second copy of it.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use base64::Engine as _;

use super::registry::WriterSchemas;
use super::{Encoded, Schema, SchemaError, SchemaInfo, SchemaType};
use crate::client::Client;
use crate::connection::ConnectionError;
use crate::consumer::{Consumer, ConsumerBuilder, ConsumerError, Message};
use crate::producer::{Producer, ProducerBuilder, ProducerError, ProducerMessage, SendReceipt};
use crate::proto::ServerError;

impl ProducerBuilder {
    /// Creates a producer of values of `T` in `schema`: as
    /// [`create`](Self::create), and it registers the schema in PRODUCER
    /// and stamps every message with the schema version the broker gave.
    /// With [`AutoPublish`](super::AutoPublish) it registers the topic's
    /// latest schema, fetched first.
    ///
    /// # Errors
    /// Those of [`create`](Self::create);
    /// [`ProducerError::IncompatibleSchema`] if the broker refuses the
    /// schema (the topic's compatibility rules), naming the topic and
    /// what the broker said.
    ///
    /// # Examples
    /// ```no_run
    /// use pulsar_wire::schema::StringSchema;
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// let producer = client.producer("greetings").create_with(StringSchema).await?;
    /// producer.send(&"hello".to_owned()).await?.await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_with<T>(
        mut self,
        schema: impl Schema<T> + 'static,
    ) -> Result<TypedProducer<T>, ProducerError> {
        let mut info = schema.info();
        let mut topic_schema = None;
        if info.schema_type == SchemaType::AutoPublish {
            let found = self
                .client
                .schema(&self.topic, None)
                .await
                .map_err(|source| ProducerError::Client {
                    topic: self.topic.clone(),
                    source,
                })?;
            info = found.map_or_else(|| SchemaInfo::new(SchemaType::Bytes, ""), |(i, _)| i);
            topic_schema = Some(info.clone());
        }
        self.schema = info.to_proto();
        let producer = self.create().await.map_err(incompatible_producer)?;
        Ok(TypedProducer {
            producer,
            schema: Arc::new(schema),
            topic_schema,
        })
    }
}

impl ConsumerBuilder {
    /// Subscribes with `schema`: as [`subscribe`](Self::subscribe), and it
    /// registers the schema in SUBSCRIBE (the broker checks it against the
    /// topic's) and hands out [`TypedMessage`]s that decode lazily.
    ///
    /// # Errors
    /// Those of [`subscribe`](Self::subscribe);
    /// [`ConsumerError::IncompatibleSchema`] if the broker refuses the schema.
    ///
    /// # Examples
    /// ```no_run
    /// use pulsar_wire::schema::Primitive;
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// let mut consumer = client.consumer("counts", "s").subscribe_with::<i64>(Primitive).await?;
    /// let msg = consumer.receive().await?;
    /// println!("{}", msg.value()?);
    /// # Ok(()) }
    /// ```
    pub async fn subscribe_with<T>(
        mut self,
        schema: impl Schema<T> + 'static,
    ) -> Result<TypedConsumer<T>, ConsumerError> {
        self.options.schema = schema.info().to_proto();
        let client = self.client.clone();
        let consumer = self.subscribe().await.map_err(incompatible_consumer)?;
        Ok(TypedConsumer {
            consumer,
            schema: Arc::new(schema),
            client,
            writers: Arc::new(WriterSchemas::default()),
        })
    }
}

/// The broker's `IncompatibleSchema` refusal, if `source` is one.
fn refusal(source: &ConnectionError) -> Option<&str> {
    match source {
        ConnectionError::Server {
            code: ServerError::IncompatibleSchema,
            message,
            ..
        } => Some(message),
        _ => None,
    }
}

fn incompatible_producer(e: ProducerError) -> ProducerError {
    match &e {
        ProducerError::Create { topic, source } => match refusal(source) {
            Some(message) => ProducerError::IncompatibleSchema {
                topic: topic.clone(),
                message: message.to_owned(),
            },
            None => e,
        },
        _ => e,
    }
}

fn incompatible_consumer(e: ConsumerError) -> ConsumerError {
    match &e {
        ConsumerError::Request { topic, source, .. } => match refusal(source) {
            Some(message) => ConsumerError::IncompatibleSchema {
                topic: topic.clone(),
                message: message.to_owned(),
            },
            None => e,
        },
        _ => e,
    }
}

/// A producer of values of `T`: a [`Producer`] (reachable through `Deref`
/// for flush, close and bytes) with a schema that encodes each value.
/// Made by [`ProducerBuilder::create_with`]; cheap to clone.
#[derive(Debug)]
pub struct TypedProducer<T> {
    producer: Producer,
    schema: Arc<dyn Schema<T>>,
    /// With AUTO_PUBLISH: the topic's schema each payload is checked against.
    topic_schema: Option<SchemaInfo>,
}

impl<T> Clone for TypedProducer<T> {
    fn clone(&self) -> Self {
        Self {
            producer: self.producer.clone(),
            schema: self.schema.clone(),
            topic_schema: self.topic_schema.clone(),
        }
    }
}

impl<T> TypedProducer<T> {
    /// Encodes `value` and queues it, as [`Producer::send`].
    ///
    /// # Errors
    /// [`ProducerError::Encode`] if the schema cannot encode the value
    /// (nothing is sent), and those of [`Producer::send`].
    pub async fn send(&self, value: &T) -> Result<SendReceipt, ProducerError> {
        self.send_message(value, ProducerMessage::default()).await
    }

    /// Encodes `value` and sends it with `message`'s key, properties, event
    /// time and delivery time (its payload is replaced by the value's). A
    /// key-value schema with a separated key sets the key itself.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    ///
    /// # Examples
    /// ```no_run
    /// use pulsar_wire::producer::ProducerMessage;
    /// # async fn demo(producer: pulsar_wire::schema::TypedProducer<String>) -> Result<(), pulsar_wire::Error> {
    /// let template = ProducerMessage::default().key("user-7").property("origin", "docs");
    /// producer.send_message(&"hi".to_owned(), template).await?.await?;
    /// # Ok(()) }
    /// ```
    pub async fn send_message(
        &self,
        value: &T,
        message: ProducerMessage,
    ) -> Result<SendReceipt, ProducerError> {
        let encode_err = |source| ProducerError::Encode {
            topic: self.producer.topic().to_owned(),
            source,
        };
        let payload = self.schema.encode(value).map_err(encode_err)?;
        if let Some(topic_schema) = &self.topic_schema {
            super::auto::check(topic_schema, &payload).map_err(encode_err)?;
        }
        let mut message = message.with_payload(payload);
        if let Some(key) = self.schema.encode_key(value).map_err(encode_err)? {
            message = message
                .key(base64::engine::general_purpose::STANDARD.encode(key))
                .key_is_base64(true);
        }
        self.producer.send(message).await
    }

    /// The schema values are encoded with.
    pub fn schema(&self) -> &dyn Schema<T> {
        &*self.schema
    }
}

impl<T> Deref for TypedProducer<T> {
    type Target = Producer;

    fn deref(&self) -> &Producer {
        &self.producer
    }
}

/// A consumer of values of `T`: a [`Consumer`] (reachable through `Deref`
/// for acks, nacks, seeks and close; they take a [`TypedMessage`] as they
/// take a [`Message`]) whose messages decode with a schema. Made by
/// [`ConsumerBuilder::subscribe_with`].
#[derive(Debug)]
pub struct TypedConsumer<T> {
    consumer: Consumer,
    schema: Arc<dyn Schema<T>>,
    client: Client,
    writers: Arc<WriterSchemas>,
}

impl<T> Clone for TypedConsumer<T> {
    fn clone(&self) -> Self {
        Self {
            consumer: self.consumer.clone(),
            schema: self.schema.clone(),
            client: self.client.clone(),
            writers: self.writers.clone(),
        }
    }
}

impl<T> TypedConsumer<T> {
    /// The next message, as [`Consumer::receive`]. Its value is decoded
    /// when [`TypedMessage::value`] is called; if the schema reads with the
    /// writer's schema (Avro, AUTO_CONSUME) and this version was not met
    /// before, its schema is fetched first (once per version).
    ///
    /// # Errors
    /// Those of [`Consumer::receive`]. A message whose writer's schema
    /// cannot be fetched is still handed out: its `value()` reports why.
    pub async fn receive(&mut self) -> Result<TypedMessage<T>, ConsumerError> {
        let message = self.consumer.receive().await?;
        let writer = match (self.schema.needs_writer_schema(), message.schema_version()) {
            (true, Some(version)) => self
                .writers
                .get(&self.client, message.topic(), &version)
                .await
                .map(Some),
            _ => Ok(None),
        };
        Ok(TypedMessage {
            message,
            schema: self.schema.clone(),
            writer,
        })
    }

    /// The schema messages are decoded with.
    pub fn schema(&self) -> &dyn Schema<T> {
        &*self.schema
    }
}

impl<T> Deref for TypedConsumer<T> {
    type Target = Consumer;

    fn deref(&self) -> &Consumer {
        &self.consumer
    }
}

impl<T> DerefMut for TypedConsumer<T> {
    fn deref_mut(&mut self) -> &mut Consumer {
        &mut self.consumer
    }
}

/// A received [`Message`] (through `Deref`: id, key, properties, payload,
/// schema version) with the schema to decode its value.
pub struct TypedMessage<T> {
    message: Message,
    schema: Arc<dyn Schema<T>>,
    /// The writer's schema, when the schema needs it and the message names a version.
    writer: Result<Option<Arc<SchemaInfo>>, SchemaError>,
}

impl<T> std::fmt::Debug for TypedMessage<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedMessage")
            .field("message", &self.message)
            .field("schema", &self.schema)
            .finish()
    }
}

impl<T> Clone for TypedMessage<T> {
    fn clone(&self) -> Self {
        Self {
            message: self.message.clone(),
            schema: self.schema.clone(),
            writer: self.writer.clone(),
        }
    }
}

impl<T> TypedMessage<T> {
    /// Decodes the value (each call decodes again).
    ///
    /// # Errors
    /// [`SchemaError::Decode`] if the payload is not a value of the schema,
    /// [`SchemaError::Mismatch`] if it was written in a schema this one
    /// cannot read, [`SchemaError::Fetch`] if the writer's schema could
    /// not be fetched. The message stays the consumer's to ack or nack.
    pub fn value(&self) -> Result<T, SchemaError> {
        let writer = self.writer.clone()?;
        let key = key_bytes(&self.message)?;
        self.schema.decode(Encoded {
            payload: self.message.payload(),
            key: key.as_deref(),
            writer: writer.as_deref(),
        })
    }

    /// The message under the value.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// Takes the message out.
    pub fn into_message(self) -> Message {
        self.message
    }
}

impl<T> Deref for TypedMessage<T> {
    type Target = Message;

    fn deref(&self) -> &Message {
        &self.message
    }
}

/// The bytes of `message`'s key (base64-decoded when it is base64 text of
/// a binary key, as a key-value schema's separated key is).
pub(crate) fn key_bytes(message: &Message) -> Result<Option<Vec<u8>>, SchemaError> {
    Ok(match (message.key(), message.key_is_base64()) {
        (Some(k), true) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(k)
                .map_err(|e| SchemaError::decode(SchemaType::KeyValue, e))?,
        ),
        (Some(k), false) => Some(k.as_bytes().to_vec()),
        (None, _) => None,
    })
}
