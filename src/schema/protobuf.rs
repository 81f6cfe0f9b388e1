//! [`ProtobufNative`] and [`Protobuf`]: prost messages in protobuf's
//! binary encoding (feature `protobuf`).

use std::marker::PhantomData;

use base64::Engine as _;
use bytes::Bytes;
use prost::Message as _;
use prost_types::{FileDescriptorProto, FileDescriptorSet};

use super::{Encoded, Schema, SchemaError, SchemaInfo, SchemaType};

/// Prost messages of type `T`, registered as the Java client's
/// `Schema.PROTOBUF_NATIVE`: the definition names the message and carries
/// the descriptors of its file and every file that one imports.
///
/// The file descriptor set comes from the build, e.g. prost-build's
/// `Config::file_descriptor_set_path` (or protox); it may hold other files
/// too: only the message's own and its imports are registered.
pub struct ProtobufNative<T> {
    info: SchemaInfo,
    _value: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for ProtobufNative<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtobufNative")
            .field("definition", &self.info.definition())
            .finish()
    }
}

impl<T> ProtobufNative<T> {
    /// The schema of message `full_name` (e.g. `"shop.Order"`), described in
    /// `file_descriptor_set` (an encoded `google.protobuf.FileDescriptorSet`).
    ///
    /// # Errors
    /// [`SchemaError::Definition`] if the set does not decode, or holds no
    /// file declaring `full_name`, or misses a file it imports.
    pub fn new(file_descriptor_set: &[u8], full_name: &str) -> Result<Self, SchemaError> {
        let invalid = |reason: String| SchemaError::definition(SchemaType::ProtobufNative, reason);
        let set =
            FileDescriptorSet::decode(file_descriptor_set).map_err(|e| invalid(e.to_string()))?;
        let root = set
            .file
            .iter()
            .find(|f| declares(f, full_name))
            .ok_or_else(|| invalid(format!("no file declares message {full_name}")))?;
        let mut kept = Vec::new();
        collect(&set, root, &mut kept).map_err(invalid)?;
        let trimmed = FileDescriptorSet { file: kept }.encode_to_vec();
        let definition = format!(
            r#"{{"fileDescriptorSet":"{}","rootMessageTypeName":"{}","rootFileDescriptorName":"{}"}}"#,
            base64::engine::general_purpose::STANDARD.encode(trimmed),
            full_name,
            root.name(),
        );
        Ok(Self {
            info: SchemaInfo::new(SchemaType::ProtobufNative, definition),
            _value: PhantomData,
        })
    }
}

/// Whether `file` declares the top-level message `full_name`.
fn declares(file: &FileDescriptorProto, full_name: &str) -> bool {
    let local = match file.package() {
        "" => Some(full_name),
        package => full_name
            .strip_prefix(package)
            .and_then(|rest| rest.strip_prefix('.')),
    };
    local.is_some_and(|name| file.message_type.iter().any(|m| m.name() == name))
}

/// `file` after every file it imports (each once), as Java's
/// `ProtobufNativeSchemaUtils` writes them.
fn collect(
    set: &FileDescriptorSet,
    file: &FileDescriptorProto,
    kept: &mut Vec<FileDescriptorProto>,
) -> Result<(), String> {
    if kept.iter().any(|k| k.name() == file.name()) {
        return Ok(());
    }
    for dep in &file.dependency {
        let found = set
            .file
            .iter()
            .find(|f| f.name() == dep)
            .ok_or_else(|| format!("{} imports {dep}, which the set lacks", file.name()))?;
        collect(set, found, kept)?;
    }
    kept.push(file.clone());
    Ok(())
}

impl<T: prost::Message + Default> Schema<T> for ProtobufNative<T> {
    fn info(&self) -> SchemaInfo {
        self.info.clone()
    }

    fn encode(&self, value: &T) -> Result<Bytes, SchemaError> {
        Ok(Bytes::from(value.encode_to_vec()))
    }

    fn decode(&self, input: Encoded<'_>) -> Result<T, SchemaError> {
        T::decode(input.payload).map_err(|e| SchemaError::decode(SchemaType::ProtobufNative, e))
    }
}

/// Prost messages of type `T`, registered as the Java client's
/// `Schema.PROTOBUF`: the definition is an Avro schema of the message (the
/// Java client derives it from the class; give the same text here), the
/// payload protobuf's binary encoding.
pub struct Protobuf<T> {
    definition: Bytes,
    _value: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Protobuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Protobuf")
            .field("definition", &String::from_utf8_lossy(&self.definition))
            .finish()
    }
}

impl<T> Protobuf<T> {
    /// Registered with `definition` (an Avro schema's JSON text).
    pub fn new(definition: impl Into<String>) -> Self {
        Self {
            definition: Bytes::from(definition.into()),
            _value: PhantomData,
        }
    }
}

impl<T: prost::Message + Default> Schema<T> for Protobuf<T> {
    fn info(&self) -> SchemaInfo {
        SchemaInfo::new(SchemaType::Protobuf, self.definition.clone())
    }

    fn encode(&self, value: &T) -> Result<Bytes, SchemaError> {
        Ok(Bytes::from(value.encode_to_vec()))
    }

    fn decode(&self, input: Encoded<'_>) -> Result<T, SchemaError> {
        T::decode(input.payload).map_err(|e| SchemaError::decode(SchemaType::Protobuf, e))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use prost_types::{DescriptorProto, FieldDescriptorProto, field_descriptor_proto};

    /// `shop.Order { int64 id = 1; string item = 2; }` in `shop/order.proto`,
    /// importing `shop/common.proto`; plus an unrelated file.
    pub(crate) fn descriptor_set() -> Vec<u8> {
        let field = |name: &str, number, kind: field_descriptor_proto::Type| FieldDescriptorProto {
            name: Some(name.into()),
            number: Some(number),
            label: Some(field_descriptor_proto::Label::Optional as i32),
            r#type: Some(kind as i32),
            json_name: Some(name.into()),
            ..FieldDescriptorProto::default()
        };
        let file = |name: &str, deps: Vec<String>, messages| FileDescriptorProto {
            name: Some(name.into()),
            package: Some("shop".into()),
            dependency: deps,
            message_type: messages,
            syntax: Some("proto3".into()),
            ..FileDescriptorProto::default()
        };
        let order = DescriptorProto {
            name: Some("Order".into()),
            field: vec![
                field("id", 1, field_descriptor_proto::Type::Int64),
                field("item", 2, field_descriptor_proto::Type::String),
            ],
            ..DescriptorProto::default()
        };
        FileDescriptorSet {
            file: vec![
                file("other.proto", vec![], vec![]),
                file(
                    "shop/order.proto",
                    vec!["shop/common.proto".into()],
                    vec![order],
                ),
                file("shop/common.proto", vec![], vec![]),
            ],
        }
        .encode_to_vec()
    }

    /// The message `descriptor_set` describes.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Order {
        #[prost(int64, tag = "1")]
        pub(crate) id: i64,
        #[prost(string, tag = "2")]
        pub(crate) item: String,
    }

    #[test]
    fn the_definition_names_the_message_and_keeps_its_file_and_imports() {
        let schema = ProtobufNative::<Order>::new(&descriptor_set(), "shop.Order").expect("valid");
        let info = Schema::<Order>::info(&schema);
        assert_eq!(info.schema_type, SchemaType::ProtobufNative);
        let text = info.definition().expect("utf-8");
        let json: serde_json::Value = serde_json::from_str(text).expect("json");
        assert_eq!(json["rootMessageTypeName"], "shop.Order");
        assert_eq!(json["rootFileDescriptorName"], "shop/order.proto");
        let set = base64::engine::general_purpose::STANDARD
            .decode(json["fileDescriptorSet"].as_str().expect("text"))
            .expect("base64");
        let set = FileDescriptorSet::decode(&set[..]).expect("set");
        let names: Vec<_> = set.file.iter().map(|f| f.name()).collect();
        assert_eq!(names, ["shop/common.proto", "shop/order.proto"]);
        let order = Order {
            id: 7,
            item: "tea".into(),
        };
        let bytes = schema.encode(&order).expect("encode");
        assert_eq!(
            schema.decode(Encoded::payload(&bytes)).expect("decode"),
            order
        );
        assert!(schema.decode(Encoded::payload(&[0xff])).is_err());
    }

    #[test]
    fn protobuf_registers_its_avro_definition_and_reads_prost_messages() {
        let definition = r#"{"type":"record","name":"Order","fields":[]}"#;
        let schema = Protobuf::<Order>::new(definition);
        let info = Schema::<Order>::info(&schema);
        assert_eq!(info.schema_type, SchemaType::Protobuf);
        assert_eq!(info.definition(), Some(definition));
        let order = Order {
            id: 3,
            item: "jam".into(),
        };
        let bytes = schema.encode(&order).expect("encode");
        assert_eq!(bytes, order.encode_to_vec());
        assert_eq!(
            schema.decode(Encoded::payload(&bytes)).expect("decode"),
            order
        );
        assert!(matches!(
            schema.decode(Encoded::payload(&[0xff])),
            Err(SchemaError::Decode {
                schema_type: SchemaType::Protobuf,
                ..
            })
        ));
    }

    #[test]
    fn a_set_without_the_message_or_an_import_is_refused() {
        assert!(ProtobufNative::<Order>::new(&descriptor_set(), "shop.Nope").is_err());
        assert!(ProtobufNative::<Order>::new(b"\xff", "shop.Order").is_err());
        let broken = FileDescriptorSet::decode(&descriptor_set()[..])
            .map(|mut s| {
                s.file.pop();
                s.encode_to_vec()
            })
            .expect("set");
        assert!(ProtobufNative::<Order>::new(&broken, "shop.Order").is_err());
    }
}
