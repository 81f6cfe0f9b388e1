//! [`AutoConsume`] (each message decoded with its writer's schema) and
//! [`AutoPublish`] (bytes already in the topic's schema).

use bytes::Bytes;

use super::{Encoded, Schema, SchemaError, SchemaInfo, SchemaType};

/// Bytes already encoded in the topic's schema: the producer registers the
/// topic's latest schema (fetched with GET_SCHEMA when it is created; none
/// if the topic has none) and sends each payload as it is, after checking
/// that it decodes in that schema where this build can (JSON with the
/// `json` feature, Avro with `avro`); the Java client's `AUTO_PRODUCE_BYTES`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoPublish;

impl Schema<Bytes> for AutoPublish {
    fn info(&self) -> SchemaInfo {
        SchemaInfo::new(SchemaType::AutoPublish, Bytes::new())
    }

    fn encode(&self, value: &Bytes) -> Result<Bytes, SchemaError> {
        Ok(value.clone())
    }

    fn decode(&self, input: Encoded<'_>) -> Result<Bytes, SchemaError> {
        Ok(Bytes::copy_from_slice(input.payload))
    }
}

/// Checks that `payload` decodes in `topic_schema` (what AUTO_PUBLISH
/// sends), where this build has the format's decoder.
pub(crate) fn check(topic_schema: &SchemaInfo, payload: &[u8]) -> Result<(), SchemaError> {
    match topic_schema.schema_type {
        #[cfg(feature = "json")]
        SchemaType::Json => serde_json::from_slice::<serde_json::Value>(payload)
            .map(drop)
            .map_err(|e| SchemaError::encode(SchemaType::Json, e)),
        #[cfg(feature = "avro")]
        SchemaType::Avro => super::avro::to_json(topic_schema, payload)
            .map(drop)
            .map_err(|e| SchemaError::encode(SchemaType::Avro, e)),
        SchemaType::String => std::str::from_utf8(payload)
            .map(drop)
            .map_err(|e| SchemaError::encode(SchemaType::String, e)),
        _ => Ok(()),
    }
}

#[cfg(feature = "json")]
pub use generic::{AutoConsume, GenericValue};

#[cfg(feature = "json")]
mod generic {
    use base64::Engine as _;
    use bytes::Bytes;
    use serde_json::Value;

    use super::super::key_value::split_info;
    use super::super::{
        Encoded, KeyValueEncoding, Primitive, Schema, SchemaError, SchemaInfo, SchemaType,
    };

    /// A message's value as [`AutoConsume`] decodes it.
    #[derive(Debug, Clone, PartialEq)]
    #[non_exhaustive]
    pub enum GenericValue {
        /// A message without a schema (BYTES), as it came.
        Bytes(Bytes),
        /// A message with a schema, as JSON: JSON as it is, Avro records as
        /// objects, strings, numbers and booleans as themselves, a key-value
        /// as `{"key": …, "value": …}` (parts without a schema as base64 text).
        Json(Value),
    }

    impl GenericValue {
        /// The value as JSON; bytes as base64 text.
        pub fn to_json(&self) -> Value {
            match self {
                Self::Bytes(b) => {
                    Value::String(base64::engine::general_purpose::STANDARD.encode(b))
                }
                Self::Json(v) => v.clone(),
            }
        }
    }

    /// Reads every message in the schema it was written with (the Java
    /// client's `AUTO_CONSUME`): the consumer fetches the schema of each
    /// version it meets once (GET_SCHEMA) and caches it. Registers itself as
    /// an AUTO_CONSUME consumer, which the broker checks against nothing.
    ///
    /// Formats: BYTES (no schema version), STRING, JSON, the primitives and
    /// the Java date and time types as numbers, KEY_VALUE, and AVRO with the
    /// `avro` feature. A PROTOBUF or PROTOBUF_NATIVE message is a
    /// [`SchemaError::Mismatch`] (read it as bytes: its payload is there).
    #[derive(Debug, Clone, Copy, Default)]
    pub struct AutoConsume;

    impl AutoConsume {
        /// Decodes `message`, received by an untyped consumer, in `writer`,
        /// the schema of its version
        /// ([`Message::schema_version`](crate::Message::schema_version),
        /// fetched with [`Client::schema`](crate::Client::schema)).
        ///
        /// # Errors
        /// As [`Schema::decode`].
        pub fn decode_message(
            &self,
            message: &crate::Message,
            writer: &SchemaInfo,
        ) -> Result<GenericValue, SchemaError> {
            let key = super::super::typed::key_bytes(message)?;
            self.decode(Encoded {
                payload: message.payload(),
                key: key.as_deref(),
                writer: Some(writer),
            })
        }
    }

    impl Schema<GenericValue> for AutoConsume {
        fn info(&self) -> SchemaInfo {
            SchemaInfo {
                name: "AutoConsume".to_owned(),
                ..SchemaInfo::new(SchemaType::AutoConsume, Bytes::new())
            }
        }

        fn encode(&self, value: &GenericValue) -> Result<Bytes, SchemaError> {
            match value {
                GenericValue::Bytes(b) => Ok(b.clone()),
                GenericValue::Json(v) => serde_json::to_vec(v)
                    .map(Bytes::from)
                    .map_err(|e| SchemaError::encode(SchemaType::AutoConsume, e)),
            }
        }

        fn decode(&self, input: Encoded<'_>) -> Result<GenericValue, SchemaError> {
            match input.writer {
                None => Ok(GenericValue::Bytes(Bytes::copy_from_slice(input.payload))),
                Some(w) => decode_as(w, input.payload, input.key),
            }
        }

        fn needs_writer_schema(&self) -> bool {
            true
        }
    }

    fn decode_as(
        writer: &SchemaInfo,
        payload: &[u8],
        key: Option<&[u8]>,
    ) -> Result<GenericValue, SchemaError> {
        let number = |v: Result<f64, SchemaError>| {
            v.map(|n| {
                GenericValue::Json(
                    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number),
                )
            })
        };
        let int = |v: Result<i64, SchemaError>| v.map(|n| GenericValue::Json(Value::from(n)));
        let p = Encoded::payload(payload);
        match writer.schema_type {
            SchemaType::None | SchemaType::Bytes => {
                Ok(GenericValue::Bytes(Bytes::copy_from_slice(payload)))
            }
            SchemaType::String => std::str::from_utf8(payload)
                .map(|s| GenericValue::Json(Value::String(s.to_owned())))
                .map_err(|e| SchemaError::decode(SchemaType::String, e)),
            SchemaType::Json => serde_json::from_slice(payload)
                .map(GenericValue::Json)
                .map_err(|e| SchemaError::decode(SchemaType::Json, e)),
            #[cfg(feature = "avro")]
            SchemaType::Avro => {
                super::super::avro::to_json(writer, payload).map(GenericValue::Json)
            }
            SchemaType::Boolean => {
                Schema::<bool>::decode(&Primitive, p).map(|b| GenericValue::Json(Value::Bool(b)))
            }
            SchemaType::Int8 => int(Schema::<i8>::decode(&Primitive, p).map(i64::from)),
            SchemaType::Int16 => int(Schema::<i16>::decode(&Primitive, p).map(i64::from)),
            SchemaType::Int32 => int(Schema::<i32>::decode(&Primitive, p).map(i64::from)),
            SchemaType::Int64
            | SchemaType::Date
            | SchemaType::Time
            | SchemaType::Timestamp
            | SchemaType::LocalDate
            | SchemaType::LocalTime => int(Schema::<i64>::decode(&Primitive, p)),
            SchemaType::Float => number(Schema::<f32>::decode(&Primitive, p).map(f64::from)),
            SchemaType::Double => number(Schema::<f64>::decode(&Primitive, p)),
            SchemaType::KeyValue => {
                let (key_info, value_info, encoding) = split_info(writer)?;
                let (k, v) = match encoding {
                    KeyValueEncoding::Inline => {
                        let (k, v) = super::super::key_value::split(SchemaType::KeyValue, payload)?;
                        (k.unwrap_or_default(), v.unwrap_or_default())
                    }
                    KeyValueEncoding::Separated => (key.unwrap_or_default(), payload),
                };
                let k = decode_as(&key_info, k, None)?.to_json();
                let v = decode_as(&value_info, v, None)?.to_json();
                Ok(GenericValue::Json(
                    serde_json::json!({"key": k, "value": v}),
                ))
            }
            other => Err(SchemaError::Mismatch {
                reader: SchemaType::AutoConsume,
                writer: other,
            }),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::schema::{KeyValue, StringSchema};

        fn read(writer: &SchemaInfo, payload: &[u8], key: Option<&[u8]>) -> GenericValue {
            AutoConsume
                .decode(Encoded {
                    payload,
                    key,
                    writer: Some(writer),
                })
                .expect("decodes")
        }

        #[test]
        fn each_format_reads_as_its_writer_wrote_it() {
            let json = SchemaInfo::new(SchemaType::Json, "{}");
            assert_eq!(
                read(&json, br#"{"a":1}"#, None),
                GenericValue::Json(serde_json::json!({"a": 1}))
            );
            let int = SchemaInfo::new(SchemaType::Int32, "");
            assert_eq!(
                read(&int, &[0, 0, 0, 9], None),
                GenericValue::Json(9.into())
            );
            let s = SchemaInfo::new(SchemaType::String, "");
            assert_eq!(read(&s, b"hi", None), GenericValue::Json("hi".into()));
            let none = AutoConsume.decode(Encoded::payload(b"raw")).expect("bytes");
            assert_eq!(none, GenericValue::Bytes(Bytes::from_static(b"raw")));
            assert_eq!(none.to_json(), Value::String("cmF3".into()));
            let kv = KeyValue::new(StringSchema, StringSchema, KeyValueEncoding::Separated);
            let info = Schema::<(String, String)>::info(&kv);
            assert_eq!(
                read(&info, b"v", Some(b"k")),
                GenericValue::Json(serde_json::json!({"key": "k", "value": "v"}))
            );
            let proto = SchemaInfo::new(SchemaType::ProtobufNative, "{}");
            assert!(matches!(
                AutoConsume.decode(Encoded {
                    payload: b"",
                    key: None,
                    writer: Some(&proto)
                }),
                Err(SchemaError::Mismatch { .. })
            ));
        }

        #[test]
        fn auto_publish_checks_payloads_against_the_topic_schema() {
            let json = SchemaInfo::new(SchemaType::Json, "{}");
            assert!(super::super::check(&json, b"{}").is_ok());
            assert!(super::super::check(&json, b"{").is_err());
            let bytes = SchemaInfo::new(SchemaType::Bytes, "");
            assert!(super::super::check(&bytes, b"{").is_ok());
        }
    }
}
