//! [`Json`]: values as JSON text through serde (feature `json`).

use std::marker::PhantomData;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Encoded, Schema, SchemaError, SchemaInfo, SchemaType};

/// Values of `T` as JSON text (serde_json), registered as a JSON schema
/// whose definition is an Avro schema of `T`, as the Java and Python
/// clients register theirs (the broker checks compatibility on it).
///
/// # Examples
/// ```
/// use pulsar_wire::schema::{Encoded, Json, Schema};
/// #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
/// struct Order { id: i64 }
/// let schema = Json::<Order>::new(
///     r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}"#,
/// );
/// let bytes = schema.encode(&Order { id: 7 }).unwrap();
/// assert_eq!(&bytes[..], br#"{"id":7}"#);
/// assert_eq!(schema.decode(Encoded::payload(&bytes)).unwrap(), Order { id: 7 });
/// ```
pub struct Json<T> {
    definition: Bytes,
    _value: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Json<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Json")
            .field("definition", &String::from_utf8_lossy(&self.definition))
            .finish()
    }
}

impl<T> Json<T> {
    /// `definition` is the Avro schema (JSON text) the broker registers
    /// and checks compatibility with.
    pub fn new(definition: impl Into<String>) -> Self {
        Self {
            definition: Bytes::from(definition.into()),
            _value: PhantomData,
        }
    }

    /// The definition derived from `T`'s Avro schema (`#[derive(AvroSchema)]`
    /// of apache-avro), in the form the Java client registers.
    #[cfg(feature = "avro")]
    pub fn derived() -> Self
    where
        T: apache_avro::AvroSchema,
    {
        Self::new(super::avro::java_form(&T::get_schema()))
    }
}

impl<T: Serialize + DeserializeOwned> Schema<T> for Json<T> {
    fn info(&self) -> SchemaInfo {
        SchemaInfo::new(SchemaType::Json, self.definition.clone())
    }

    fn encode(&self, value: &T) -> Result<Bytes, SchemaError> {
        serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(|e| SchemaError::encode(SchemaType::Json, e))
    }

    fn decode(&self, input: Encoded<'_>) -> Result<T, SchemaError> {
        serde_json::from_slice(input.payload).map_err(|e| SchemaError::decode(SchemaType::Json, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Point {
        x: i32,
        label: Option<String>,
    }

    #[test]
    fn values_round_trip_and_bad_json_is_a_decode_error() {
        let schema = Json::<Point>::new("{}");
        let p = Point {
            x: -3,
            label: Some("a".into()),
        };
        let bytes = schema.encode(&p).expect("encode");
        assert_eq!(schema.decode(Encoded::payload(&bytes)).expect("decode"), p);
        let bad = schema.decode(Encoded::payload(b"{\"x\":\"no\"}"));
        assert!(matches!(
            bad,
            Err(SchemaError::Decode {
                schema_type: SchemaType::Json,
                ..
            })
        ));
        assert_eq!(schema.info().schema_type, SchemaType::Json);
    }
}
