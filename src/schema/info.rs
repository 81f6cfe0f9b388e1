//! [`SchemaInfo`], [`SchemaType`] and [`SchemaVersion`]: what a schema is on
//! the wire, and its conversion to and from the protocol's `Schema`.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;

use crate::proto;
use crate::proto::schema::Type as ProtoType;

/// The kind of a schema, as the Java client's `SchemaType`.
///
/// `Bytes` (the default) and `None` are the same on the wire: no schema.
/// `AutoConsume` and `AutoPublish` are not formats: a consumer with
/// `AutoConsume` decodes each message with its writer's schema, a producer
/// with `AutoPublish` takes the topic's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SchemaType {
    /// No schema (a topic without one).
    None,
    /// Raw bytes: no schema is registered (the default).
    Bytes,
    /// UTF-8 text.
    String,
    /// JSON text; the definition is an Avro schema (as Java and Python register it).
    Json,
    /// Protobuf binary; the definition is an Avro schema derived from the message.
    Protobuf,
    /// Avro binary (no container header); the definition is the Avro schema.
    Avro,
    /// One byte, 0 or 1.
    Boolean,
    /// One signed byte.
    Int8,
    /// Two bytes, big-endian.
    Int16,
    /// Four bytes, big-endian.
    Int32,
    /// Eight bytes, big-endian.
    Int64,
    /// An IEEE 754 single, big-endian.
    Float,
    /// An IEEE 754 double, big-endian.
    Double,
    /// Java's `java.util.Date`: eight bytes of milliseconds since the epoch.
    Date,
    /// Java's `java.sql.Time`: eight bytes of milliseconds.
    Time,
    /// Java's `java.sql.Timestamp`: eight bytes of milliseconds since the epoch.
    Timestamp,
    /// A key and a value, each with its own schema (see [`KeyValue`](super::KeyValue)).
    KeyValue,
    /// Java's `Instant`: eight bytes of seconds, four of nanoseconds.
    Instant,
    /// Java's `LocalDate`: eight bytes of days since the epoch.
    LocalDate,
    /// Java's `LocalTime`: eight bytes of nanoseconds of the day.
    LocalTime,
    /// Java's `LocalDateTime`: eight bytes of days, eight of nanoseconds.
    LocalDateTime,
    /// Protobuf binary; the definition is the message's file descriptor set.
    ProtobufNative,
    /// A consumer that decodes every message with the schema it was written with.
    AutoConsume,
    /// A producer that sends bytes already encoded in the topic's schema.
    AutoPublish,
}

impl SchemaType {
    /// The Java client's name of the type (`"AVRO"`, `"KEY_VALUE"`, …), as
    /// the key-value properties and the admin API spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "NONE",
            Self::Bytes => "BYTES",
            Self::String => "STRING",
            Self::Json => "JSON",
            Self::Protobuf => "PROTOBUF",
            Self::Avro => "AVRO",
            Self::Boolean => "BOOLEAN",
            Self::Int8 => "INT8",
            Self::Int16 => "INT16",
            Self::Int32 => "INT32",
            Self::Int64 => "INT64",
            Self::Float => "FLOAT",
            Self::Double => "DOUBLE",
            Self::Date => "DATE",
            Self::Time => "TIME",
            Self::Timestamp => "TIMESTAMP",
            Self::KeyValue => "KEY_VALUE",
            Self::Instant => "INSTANT",
            Self::LocalDate => "LOCAL_DATE",
            Self::LocalTime => "LOCAL_TIME",
            Self::LocalDateTime => "LOCAL_DATE_TIME",
            Self::ProtobufNative => "PROTOBUF_NATIVE",
            Self::AutoConsume => "AUTO_CONSUME",
            Self::AutoPublish => "AUTO_PUBLISH",
        }
    }

    /// The type named `name` (as [`name`](Self::name) spells it).
    pub fn from_name(name: &str) -> Option<Self> {
        ALL.iter().copied().find(|t| t.name() == name)
    }

    /// The protocol's type; `None` for the types that register no schema
    /// (BYTES, NONE) or are resolved before anything is sent (AUTO_PUBLISH).
    pub(crate) const fn to_proto(self) -> Option<ProtoType> {
        Some(match self {
            Self::None | Self::Bytes | Self::AutoPublish => return None,
            Self::String => ProtoType::String,
            Self::Json => ProtoType::Json,
            Self::Protobuf => ProtoType::Protobuf,
            Self::Avro => ProtoType::Avro,
            Self::Boolean => ProtoType::Bool,
            Self::Int8 => ProtoType::Int8,
            Self::Int16 => ProtoType::Int16,
            Self::Int32 => ProtoType::Int32,
            Self::Int64 => ProtoType::Int64,
            Self::Float => ProtoType::Float,
            Self::Double => ProtoType::Double,
            Self::Date => ProtoType::Date,
            Self::Time => ProtoType::Time,
            Self::Timestamp => ProtoType::Timestamp,
            Self::KeyValue => ProtoType::KeyValue,
            Self::Instant => ProtoType::Instant,
            Self::LocalDate => ProtoType::LocalDate,
            Self::LocalTime => ProtoType::LocalTime,
            Self::LocalDateTime => ProtoType::LocalDateTime,
            Self::ProtobufNative => ProtoType::ProtobufNative,
            Self::AutoConsume => ProtoType::AutoConsume,
        })
    }

    const fn from_proto(t: ProtoType) -> Self {
        match t {
            ProtoType::None => Self::None,
            ProtoType::String => Self::String,
            ProtoType::Json => Self::Json,
            ProtoType::Protobuf => Self::Protobuf,
            ProtoType::Avro => Self::Avro,
            ProtoType::Bool => Self::Boolean,
            ProtoType::Int8 => Self::Int8,
            ProtoType::Int16 => Self::Int16,
            ProtoType::Int32 => Self::Int32,
            ProtoType::Int64 => Self::Int64,
            ProtoType::Float => Self::Float,
            ProtoType::Double => Self::Double,
            ProtoType::Date => Self::Date,
            ProtoType::Time => Self::Time,
            ProtoType::Timestamp => Self::Timestamp,
            ProtoType::KeyValue => Self::KeyValue,
            ProtoType::Instant => Self::Instant,
            ProtoType::LocalDate => Self::LocalDate,
            ProtoType::LocalTime => Self::LocalTime,
            ProtoType::LocalDateTime => Self::LocalDateTime,
            ProtoType::ProtobufNative => Self::ProtobufNative,
            ProtoType::AutoConsume => Self::AutoConsume,
        }
    }
}

const ALL: [SchemaType; 24] = [
    SchemaType::None,
    SchemaType::Bytes,
    SchemaType::String,
    SchemaType::Json,
    SchemaType::Protobuf,
    SchemaType::Avro,
    SchemaType::Boolean,
    SchemaType::Int8,
    SchemaType::Int16,
    SchemaType::Int32,
    SchemaType::Int64,
    SchemaType::Float,
    SchemaType::Double,
    SchemaType::Date,
    SchemaType::Time,
    SchemaType::Timestamp,
    SchemaType::KeyValue,
    SchemaType::Instant,
    SchemaType::LocalDate,
    SchemaType::LocalTime,
    SchemaType::LocalDateTime,
    SchemaType::ProtobufNative,
    SchemaType::AutoConsume,
    SchemaType::AutoPublish,
];

impl fmt::Display for SchemaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A schema as the broker stores it: a name, a type, the definition (an
/// Avro schema's JSON text, a protobuf descriptor, nothing for
/// primitives) and properties.
///
/// # Examples
/// ```
/// use pulsar_wire::schema::{SchemaInfo, SchemaType};
/// let info = SchemaInfo::new(SchemaType::Avro, r#"{"type":"record","name":"User","fields":[]}"#);
/// assert_eq!(info.schema_type, SchemaType::Avro);
/// assert_eq!(info.name, "AVRO");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaInfo {
    /// The schema's name (the Java client uses the type's or the class's name).
    pub name: String,
    /// The kind of schema.
    pub schema_type: SchemaType,
    /// The definition.
    pub data: Bytes,
    /// Properties (a key-value schema's parts, JSON settings, …).
    pub properties: BTreeMap<String, String>,
}

impl SchemaInfo {
    /// A schema of `schema_type` with `data` as its definition, named after
    /// its type, without properties.
    pub fn new(schema_type: SchemaType, data: impl Into<Bytes>) -> Self {
        Self {
            name: schema_type.name().to_owned(),
            schema_type,
            data: data.into(),
            properties: BTreeMap::new(),
        }
    }

    /// Adds a property.
    #[must_use]
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.insert(key.into(), value.into());
        self
    }

    /// The definition as text (an Avro schema's JSON), if it is UTF-8.
    pub fn definition(&self) -> Option<&str> {
        std::str::from_utf8(&self.data).ok()
    }

    /// The protocol's `Schema` to send in PRODUCER, SUBSCRIBE or
    /// GET_OR_CREATE_SCHEMA; `None` for a schema that registers nothing.
    pub(crate) fn to_proto(&self) -> Option<proto::Schema> {
        let kind = self.schema_type.to_proto()?;
        Some(proto::Schema {
            name: self.name.clone(),
            schema_data: self.data.clone(),
            r#type: kind as i32,
            properties: self
                .properties
                .iter()
                .map(|(key, value)| proto::KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect(),
        })
    }

    /// The schema the broker sent.
    pub(crate) fn from_proto(schema: &proto::Schema) -> Self {
        let kind = ProtoType::try_from(schema.r#type).unwrap_or(ProtoType::None);
        Self {
            name: schema.name.clone(),
            schema_type: SchemaType::from_proto(kind),
            data: schema.schema_data.clone(),
            properties: schema
                .properties
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect(),
        }
    }
}

/// The version the broker gave a schema on a topic: opaque bytes (Apache
/// Pulsar's are a big-endian 64-bit number, shown as that number).
///
/// Every message carries the version of the schema it was written with
/// ([`Message::schema_version`](crate::Message::schema_version)).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SchemaVersion(pub Bytes);

impl SchemaVersion {
    /// The version as Apache Pulsar numbers it, when it is eight bytes.
    pub fn as_number(&self) -> Option<i64> {
        <[u8; 8]>::try_from(self.0.as_ref())
            .ok()
            .map(i64::from_be_bytes)
    }
}

impl fmt::Display for SchemaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_number() {
            Some(n) => write!(f, "{n}"),
            None => self.0.iter().try_for_each(|b| write!(f, "{b:02x}")),
        }
    }
}

impl fmt::Debug for SchemaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SchemaVersion({self})")
    }
}

impl From<i64> for SchemaVersion {
    fn from(n: i64) -> Self {
        Self(Bytes::copy_from_slice(&n.to_be_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_its_name_and_the_protocol() {
        for t in ALL {
            assert_eq!(SchemaType::from_name(t.name()), Some(t));
            if let Some(p) = t.to_proto() {
                assert_eq!(SchemaType::from_proto(p), t);
            }
        }
        assert_eq!(SchemaType::Bytes.to_proto(), None);
        assert_eq!(SchemaType::from_name("nope"), None);
    }

    #[test]
    fn info_round_trips_through_the_protocol_and_bytes_registers_nothing() {
        let info = SchemaInfo::new(SchemaType::Json, "{}").property("a", "b");
        let wire = info.to_proto().expect("json registers");
        assert_eq!(wire.r#type, ProtoType::Json as i32);
        assert_eq!(SchemaInfo::from_proto(&wire), info);
        assert_eq!(SchemaInfo::new(SchemaType::Bytes, "").to_proto(), None);
    }

    #[test]
    fn versions_show_as_apache_numbers_or_hex() {
        assert_eq!(SchemaVersion::from(3).to_string(), "3");
        assert_eq!(SchemaVersion::from(3).as_number(), Some(3));
        let odd = SchemaVersion(Bytes::from_static(&[0xab, 0x01]));
        assert_eq!(odd.to_string(), "ab01");
        assert_eq!(odd.as_number(), None);
    }
}
