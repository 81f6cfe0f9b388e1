//! [`SchemaError`]: a value that cannot be encoded or decoded, or a schema
//! that cannot be used.

use std::sync::Arc;

use super::SchemaType;
use crate::client::ClientError;

/// Why a value could not be encoded or decoded with a schema.
///
/// A decode failure belongs to one message: [`TypedMessage::value`]
/// returns it and the consumer goes on (the message can be acked, nacked
/// or read as bytes).
///
/// [`TypedMessage::value`]: super::TypedMessage::value
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The payload is not a valid value of the schema.
    #[error("cannot decode a {schema_type} value: {reason}")]
    Decode {
        /// The schema the payload was read with.
        schema_type: SchemaType,
        /// What the decoder said.
        reason: Arc<str>,
    },
    /// The value cannot be written in the schema.
    #[error("cannot encode a {schema_type} value: {reason}")]
    Encode {
        /// The schema.
        schema_type: SchemaType,
        /// What the encoder said.
        reason: Arc<str>,
    },
    /// A schema definition that is not valid (Avro text that does not
    /// parse, a descriptor set without the message).
    #[error("invalid {schema_type} schema definition: {reason}")]
    Definition {
        /// The schema.
        schema_type: SchemaType,
        /// What is wrong with it.
        reason: Arc<str>,
    },
    /// The message was written with a schema this one cannot read (an
    /// AVRO reader on a JSON writer), or one this build has no decoder for
    /// (its cargo feature is off).
    #[error("cannot read a {writer} message with {reader}")]
    Mismatch {
        /// The reader's schema type.
        reader: SchemaType,
        /// The writer's schema type.
        writer: SchemaType,
    },
    /// The writer's schema (by the message's schema version) could not be
    /// fetched from the broker.
    #[error("fetching schema version {version} of {topic}: {source}")]
    Fetch {
        /// The topic.
        topic: String,
        /// The version asked for.
        version: super::SchemaVersion,
        /// The client's error (a lookup, a refusal, a timeout).
        #[source]
        source: Box<ClientError>,
    },
    /// The broker has no schema of that version for the topic.
    #[error("{topic} has no schema version {version}")]
    NoSuchVersion {
        /// The topic.
        topic: String,
        /// The version asked for.
        version: super::SchemaVersion,
    },
}

impl SchemaError {
    pub(crate) fn decode(schema_type: SchemaType, reason: impl std::fmt::Display) -> Self {
        Self::Decode {
            schema_type,
            reason: reason.to_string().into(),
        }
    }

    pub(crate) fn encode(schema_type: SchemaType, reason: impl std::fmt::Display) -> Self {
        Self::Encode {
            schema_type,
            reason: reason.to_string().into(),
        }
    }

    #[cfg(any(feature = "avro", feature = "protobuf"))]
    pub(crate) fn definition(schema_type: SchemaType, reason: impl std::fmt::Display) -> Self {
        Self::Definition {
            schema_type,
            reason: reason.to_string().into(),
        }
    }
}
