//! The schemas without a definition: [`BytesSchema`], [`StringSchema`] and
//! [`Primitive`] (booleans, integers and floats in the Java client's
//! encodings: fixed width, big-endian).

use bytes::Bytes;

use super::{Encoded, Schema, SchemaError, SchemaInfo, SchemaType};

/// Raw bytes: no schema is registered, the payload is the value. What the
/// untyped [`Producer`](crate::producer::Producer) and
/// [`Consumer`](crate::Consumer) send and receive.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesSchema;

impl Schema<Bytes> for BytesSchema {
    fn info(&self) -> SchemaInfo {
        SchemaInfo::new(SchemaType::Bytes, Bytes::new())
    }

    fn encode(&self, value: &Bytes) -> Result<Bytes, SchemaError> {
        Ok(value.clone())
    }

    fn decode(&self, input: Encoded<'_>) -> Result<Bytes, SchemaError> {
        Ok(Bytes::copy_from_slice(input.payload))
    }
}

impl Schema<Vec<u8>> for BytesSchema {
    fn info(&self) -> SchemaInfo {
        SchemaInfo::new(SchemaType::Bytes, Bytes::new())
    }

    fn encode(&self, value: &Vec<u8>) -> Result<Bytes, SchemaError> {
        Ok(Bytes::copy_from_slice(value))
    }

    fn decode(&self, input: Encoded<'_>) -> Result<Vec<u8>, SchemaError> {
        Ok(input.payload.to_vec())
    }
}

/// UTF-8 text (the Java client's `Schema.STRING`).
#[derive(Debug, Clone, Copy, Default)]
pub struct StringSchema;

impl Schema<String> for StringSchema {
    fn info(&self) -> SchemaInfo {
        SchemaInfo::new(SchemaType::String, Bytes::new())
    }

    fn encode(&self, value: &String) -> Result<Bytes, SchemaError> {
        Ok(Bytes::copy_from_slice(value.as_bytes()))
    }

    fn decode(&self, input: Encoded<'_>) -> Result<String, SchemaError> {
        String::from_utf8(input.payload.to_vec())
            .map_err(|e| SchemaError::decode(SchemaType::String, e))
    }
}

/// Booleans, integers and floats, as the Java client's `Schema.BOOL`,
/// `INT8` … `INT64`, `FLOAT` and `DOUBLE`: the type of the value chooses
/// the schema.
///
/// # Examples
/// ```
/// use pulsar_wire::schema::{Encoded, Primitive, Schema, SchemaType};
/// let bytes = Schema::<i32>::encode(&Primitive, &258).unwrap();
/// assert_eq!(&bytes[..], &[0, 0, 1, 2]);
/// assert_eq!(Schema::<i32>::info(&Primitive).schema_type, SchemaType::Int32);
/// let back: i32 = Primitive.decode(Encoded::payload(&bytes)).unwrap();
/// assert_eq!(back, 258);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Primitive;

macro_rules! fixed_width {
    ($t:ty, $kind:expr, $n:literal) => {
        impl Schema<$t> for Primitive {
            fn info(&self) -> SchemaInfo {
                SchemaInfo::new($kind, Bytes::new())
            }

            fn encode(&self, value: &$t) -> Result<Bytes, SchemaError> {
                Ok(Bytes::copy_from_slice(&value.to_be_bytes()))
            }

            fn decode(&self, input: Encoded<'_>) -> Result<$t, SchemaError> {
                let raw = <[u8; $n]>::try_from(input.payload).map_err(|_| {
                    SchemaError::decode(
                        $kind,
                        format_args!("{} bytes, expected {}", input.payload.len(), $n),
                    )
                })?;
                Ok(<$t>::from_be_bytes(raw))
            }
        }
    };
}

fixed_width!(i8, SchemaType::Int8, 1);
fixed_width!(i16, SchemaType::Int16, 2);
fixed_width!(i32, SchemaType::Int32, 4);
fixed_width!(i64, SchemaType::Int64, 8);
fixed_width!(f32, SchemaType::Float, 4);
fixed_width!(f64, SchemaType::Double, 8);

impl Schema<bool> for Primitive {
    fn info(&self) -> SchemaInfo {
        SchemaInfo::new(SchemaType::Boolean, Bytes::new())
    }

    fn encode(&self, value: &bool) -> Result<Bytes, SchemaError> {
        Ok(Bytes::from_static(if *value { &[1] } else { &[0] }))
    }

    fn decode(&self, input: Encoded<'_>) -> Result<bool, SchemaError> {
        match input.payload {
            [b] => Ok(*b != 0),
            other => Err(SchemaError::decode(
                SchemaType::Boolean,
                format_args!("{} bytes, expected 1", other.len()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: PartialEq + std::fmt::Debug>(schema: &dyn Schema<T>, value: T, wire: &[u8]) {
        let bytes = schema.encode(&value).expect("encode");
        assert_eq!(&bytes[..], wire, "{value:?}");
        assert_eq!(
            schema.decode(Encoded::payload(&bytes)).expect("decode"),
            value
        );
    }

    #[test]
    fn primitives_use_the_java_clients_big_endian_encodings() {
        round_trip::<bool>(&Primitive, true, &[1]);
        round_trip::<i8>(&Primitive, -2, &[0xfe]);
        round_trip::<i16>(&Primitive, 0x0102, &[1, 2]);
        round_trip::<i64>(&Primitive, -1, &[0xff; 8]);
        round_trip::<f32>(&Primitive, 1.5, &[0x3f, 0xc0, 0, 0]);
        round_trip::<f64>(&Primitive, -2.0, &[0xc0, 0, 0, 0, 0, 0, 0, 0]);
        round_trip::<String>(&StringSchema, "héllo".into(), "héllo".as_bytes());
        round_trip::<Vec<u8>>(&BytesSchema, vec![0, 255], &[0, 255]);
    }

    #[test]
    fn wrong_widths_and_bad_text_are_decode_errors() {
        let short = Schema::<i32>::decode(&Primitive, Encoded::payload(&[1, 2]));
        assert!(matches!(
            short,
            Err(SchemaError::Decode {
                schema_type: SchemaType::Int32,
                ..
            })
        ));
        assert!(Schema::<bool>::decode(&Primitive, Encoded::payload(&[])).is_err());
        assert!(StringSchema.decode(Encoded::payload(&[0xff])).is_err());
    }
}
