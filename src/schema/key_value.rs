//! [`KeyValue`]: a key and a value with a schema each, inline in the
//! payload or with the key in the message key, as the Java client's
//! `Schema.KeyValue`.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use super::{Encoded, Schema, SchemaError, SchemaInfo, SchemaType};

/// Where a [`KeyValue`] schema puts the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyValueEncoding {
    /// Both in the payload: the key's length (4 bytes, big-endian), the
    /// key, the value's length, the value (the Java client's default).
    #[default]
    Inline,
    /// The key in the message key (base64 of its bytes), the value alone in
    /// the payload: partition routing, Key_Shared and compaction see the key.
    Separated,
}

impl KeyValueEncoding {
    const fn name(self) -> &'static str {
        match self {
            Self::Inline => "INLINE",
            Self::Separated => "SEPARATED",
        }
    }
}

/// A key of schema `K` and a value of schema `V`, as one value `(K, V)`.
///
/// # Examples
/// ```
/// use pulsar_wire::schema::{Encoded, KeyValue, KeyValueEncoding, Primitive, Schema, StringSchema};
/// let schema = KeyValue::new(StringSchema, Primitive, KeyValueEncoding::Inline);
/// let bytes = schema.encode(&("k".to_owned(), 7i32)).unwrap();
/// assert_eq!(&bytes[..], &[0, 0, 0, 1, b'k', 0, 0, 0, 4, 0, 0, 0, 7]);
/// let back: (String, i32) = schema.decode(Encoded::payload(&bytes)).unwrap();
/// assert_eq!(back, ("k".to_owned(), 7));
/// ```
pub struct KeyValue<K, V> {
    key: Arc<dyn Schema<K>>,
    value: Arc<dyn Schema<V>>,
    encoding: KeyValueEncoding,
}

impl<K, V> std::fmt::Debug for KeyValue<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyValue")
            .field("key", &self.key)
            .field("value", &self.value)
            .field("encoding", &self.encoding)
            .finish()
    }
}

impl<K, V> KeyValue<K, V> {
    /// Keys in `key`'s schema, values in `value`'s, the key placed as `encoding` says.
    pub fn new(
        key: impl Schema<K> + 'static,
        value: impl Schema<V> + 'static,
        encoding: KeyValueEncoding,
    ) -> Self {
        Self {
            key: Arc::new(key),
            value: Arc::new(value),
            encoding,
        }
    }
}

const KEY: &str = "key.schema";
const VALUE: &str = "value.schema";
const ENCODING: &str = "kv.encoding.type";

/// The key-value schema of `key` and `value` as the Java client registers
/// it: both definitions in the data (each behind its 4-byte length), their
/// names, types and properties in the properties.
pub(crate) fn key_value_info(
    key: &SchemaInfo,
    value: &SchemaInfo,
    encoding: KeyValueEncoding,
) -> SchemaInfo {
    let mut properties = BTreeMap::new();
    for (prefix, part) in [(KEY, key), (VALUE, value)] {
        properties.insert(format!("{prefix}.name"), part.name.clone());
        properties.insert(format!("{prefix}.type"), part.schema_type.name().to_owned());
        properties.insert(
            format!("{prefix}.properties"),
            json_object(&part.properties),
        );
    }
    properties.insert(ENCODING.to_owned(), encoding.name().to_owned());
    SchemaInfo {
        name: "KeyValue".to_owned(),
        schema_type: SchemaType::KeyValue,
        data: join(Some(&key.data), Some(&value.data)),
        properties,
    }
}

/// The key's and the value's schemas, and the encoding, of a key-value schema.
pub(crate) fn split_info(
    info: &SchemaInfo,
) -> Result<(SchemaInfo, SchemaInfo, KeyValueEncoding), SchemaError> {
    let (key_data, value_data) = split(SchemaType::KeyValue, &info.data)?;
    let part = |prefix: &str, data: Option<&[u8]>| {
        let get = |field: &str| info.properties.get(&format!("{prefix}.{field}"));
        let schema_type = get("type")
            .and_then(|t| SchemaType::from_name(t))
            .unwrap_or(SchemaType::Bytes);
        SchemaInfo {
            name: get("name").cloned().unwrap_or_default(),
            schema_type,
            data: Bytes::copy_from_slice(data.unwrap_or_default()),
            properties: get("properties")
                .map(|p| parse_json_object(p))
                .unwrap_or_default(),
        }
    };
    let encoding = match info.properties.get(ENCODING).map(String::as_str) {
        Some("SEPARATED") => KeyValueEncoding::Separated,
        _ => KeyValueEncoding::Inline,
    };
    Ok((part(KEY, key_data), part(VALUE, value_data), encoding))
}

/// `[len][key][len][value]`, a missing part as length -1.
fn join(key: Option<&[u8]>, value: Option<&[u8]>) -> Bytes {
    let mut out =
        BytesMut::with_capacity(8 + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len));
    for part in [key, value] {
        match part {
            Some(p) => {
                out.put_i32(i32::try_from(p.len()).unwrap_or(i32::MAX));
                out.put_slice(p);
            }
            None => out.put_i32(-1),
        }
    }
    out.freeze()
}

/// A key's and a value's bytes; `None` for a missing one.
pub(crate) type Parts<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The two parts of `[len][key][len][value]`; a length of -1 is a missing part.
pub(crate) fn split(schema_type: SchemaType, data: &[u8]) -> Result<Parts<'_>, SchemaError> {
    fn part<'a>(
        schema_type: SchemaType,
        rest: &mut &'a [u8],
        which: &str,
    ) -> Result<Option<&'a [u8]>, SchemaError> {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(SchemaError::decode(
                schema_type,
                format_args!("no length of the {which}"),
            ));
        };
        let len = i32::from_be_bytes(*len);
        if len == -1 {
            *rest = tail;
            return Ok(None);
        }
        let len = usize::try_from(len)
            .map_err(|_| SchemaError::decode(schema_type, format_args!("{which} length {len}")))?;
        if tail.len() < len {
            return Err(SchemaError::decode(
                schema_type,
                format_args!("{which} of {len} bytes, {} left", tail.len()),
            ));
        }
        let (p, tail) = tail.split_at(len);
        *rest = tail;
        Ok(Some(p))
    }
    let mut rest = data;
    let key = part(schema_type, &mut rest, "key")?;
    let value = part(schema_type, &mut rest, "value")?;
    Ok((key, value))
}

/// A JSON object of strings (Gson's form of the Java client's properties).
fn json_object(map: &BTreeMap<String, String>) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(&mut out, k);
        out.push(':');
        json_string(&mut out, v);
    }
    out.push('}');
    out
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(feature = "json")]
fn parse_json_object(text: &str) -> BTreeMap<String, String> {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str(text) else {
        return BTreeMap::new();
    };
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => (k, s),
            other => (k, other.to_string()),
        })
        .collect()
}

#[cfg(not(feature = "json"))]
fn parse_json_object(_text: &str) -> BTreeMap<String, String> {
    BTreeMap::new()
}

impl<K, V> Schema<(K, V)> for KeyValue<K, V> {
    fn info(&self) -> SchemaInfo {
        key_value_info(&self.key.info(), &self.value.info(), self.encoding)
    }

    fn encode(&self, (key, value): &(K, V)) -> Result<Bytes, SchemaError> {
        let value = self.value.encode(value)?;
        match self.encoding {
            KeyValueEncoding::Separated => Ok(value),
            KeyValueEncoding::Inline => {
                let key = self.key.encode(key)?;
                Ok(join(Some(&key), Some(&value)))
            }
        }
    }

    fn encode_key(&self, (key, _): &(K, V)) -> Result<Option<Bytes>, SchemaError> {
        match self.encoding {
            KeyValueEncoding::Separated => self.key.encode(key).map(Some),
            KeyValueEncoding::Inline => Ok(None),
        }
    }

    fn decode(&self, input: Encoded<'_>) -> Result<(K, V), SchemaError> {
        let writers = match input.writer {
            Some(w) if w.schema_type == SchemaType::KeyValue => {
                let (k, v, _) = split_info(w)?;
                (Some(k), Some(v))
            }
            _ => (None, None),
        };
        let (key, value) = match self.encoding {
            KeyValueEncoding::Inline => {
                let (k, v) = split(SchemaType::KeyValue, input.payload)?;
                (k.unwrap_or_default(), v.unwrap_or_default())
            }
            KeyValueEncoding::Separated => (input.key.unwrap_or_default(), input.payload),
        };
        let key = self.key.decode(Encoded {
            payload: key,
            key: None,
            writer: writers.0.as_ref(),
        })?;
        let value = self.value.decode(Encoded {
            payload: value,
            key: None,
            writer: writers.1.as_ref(),
        })?;
        Ok((key, value))
    }

    fn needs_writer_schema(&self) -> bool {
        self.key.needs_writer_schema() || self.value.needs_writer_schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Primitive, StringSchema};

    #[test]
    fn the_schema_info_is_the_java_clients() {
        let schema = KeyValue::new(StringSchema, Primitive, KeyValueEncoding::Separated);
        let info = Schema::<(String, i64)>::info(&schema);
        assert_eq!(info.schema_type, SchemaType::KeyValue);
        assert_eq!(&info.data[..], &[0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(info.properties["key.schema.type"], "STRING");
        assert_eq!(info.properties["value.schema.type"], "INT64");
        assert_eq!(info.properties["key.schema.properties"], "{}");
        assert_eq!(info.properties["kv.encoding.type"], "SEPARATED");
        let (k, v, encoding) = split_info(&info).expect("split");
        assert_eq!(
            (k.schema_type, v.schema_type),
            (SchemaType::String, SchemaType::Int64)
        );
        assert_eq!(encoding, KeyValueEncoding::Separated);
    }

    #[test]
    fn separated_puts_the_key_aside_and_reads_it_back() {
        let schema = KeyValue::new(StringSchema, StringSchema, KeyValueEncoding::Separated);
        let value = ("user-1".to_owned(), "payload".to_owned());
        assert_eq!(&schema.encode(&value).expect("value")[..], b"payload");
        let key = schema.encode_key(&value).expect("key").expect("separated");
        assert_eq!(&key[..], b"user-1");
        let back = schema
            .decode(Encoded {
                payload: b"payload",
                key: Some(b"user-1"),
                writer: None,
            })
            .expect("decode");
        assert_eq!(back, value);
    }

    #[test]
    fn a_missing_part_reads_as_empty_and_truncation_is_an_error() {
        assert_eq!(
            split(
                SchemaType::KeyValue,
                &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 9]
            )
            .expect("ok"),
            (None, Some(&[9u8][..]))
        );
        assert!(split(SchemaType::KeyValue, &[0, 0, 0, 5, 1]).is_err());
        assert!(split(SchemaType::KeyValue, &[0, 0]).is_err());
        assert!(split(SchemaType::KeyValue, &[0x80, 0, 0, 0]).is_err());
    }
}
