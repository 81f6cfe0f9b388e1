//! [`Avro`]: values in Avro's binary encoding through apache-avro (feature
//! `avro`), read with the writer's schema version so a reader on an older
//! or newer compatible schema gets its own shape of the value.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use apache_avro::Schema as AvroDefinition;
use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{Encoded, Schema, SchemaError, SchemaInfo, SchemaType};

const AVRO: SchemaType = SchemaType::Avro;

/// Values of `T` in Avro's binary encoding (one datum, no container
/// header), as the Java client's `Schema.AVRO` and Python's `AvroSchema`.
///
/// The schema is derived from `T` (`#[derive(AvroSchema)]` of apache-avro)
/// or given as text; either way it is registered in the form the Java
/// client registers (`org.apache.avro.Schema#toString`: compact JSON, keys
/// in Avro's own order), so the same schema gets the same version.
///
/// A message written with another version of the schema is read with the
/// writer's schema (fetched once per version and cached by the consumer)
/// and resolved to this one: fields the reader lacks are skipped, fields
/// the writer lacks take their defaults.
///
/// # Examples
/// ```
/// use pulsar_wire::schema::{Avro, Encoded, Schema};
/// #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
/// struct User { name: String, age: i32 }
/// let schema = Avro::<User>::from_definition(
///     r#"{"type":"record","name":"User","fields":[
///         {"name":"name","type":"string"},{"name":"age","type":"int"}]}"#,
/// )?;
/// let user = User { name: "ada".into(), age: 36 };
/// let bytes = schema.encode(&user)?;
/// assert_eq!(&bytes[..], b"\x06ada\x48");
/// assert_eq!(schema.decode(Encoded::payload(&bytes))?, user);
/// # Ok::<(), pulsar_wire::schema::SchemaError>(())
/// ```
pub struct Avro<T> {
    schema: AvroDefinition,
    definition: Bytes,
    /// Writers' schemas met so far, by their definition.
    writers: Mutex<HashMap<Bytes, Arc<AvroDefinition>>>,
    _value: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Avro<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Avro")
            .field("definition", &String::from_utf8_lossy(&self.definition))
            .finish()
    }
}

impl<T> Avro<T> {
    /// The schema derived from `T`.
    pub fn derived() -> Self
    where
        T: apache_avro::AvroSchema,
    {
        let schema = T::get_schema();
        let json = serde_json::to_value(&schema).unwrap_or(Value::Null);
        Self::with_schema(schema, &json)
    }

    /// The schema given as Avro's JSON text.
    ///
    /// # Errors
    /// [`SchemaError::Definition`] if it does not parse as an Avro schema.
    pub fn from_definition(text: &str) -> Result<Self, SchemaError> {
        let schema =
            AvroDefinition::parse_str(text).map_err(|e| SchemaError::definition(AVRO, e))?;
        // The text itself, not apache-avro's rendering of it (which drops
        // the fields' docs), goes into the Java form.
        let json: Value =
            serde_json::from_str(text).map_err(|e| SchemaError::definition(AVRO, e))?;
        Ok(Self::with_schema(schema, &json))
    }

    fn with_schema(schema: AvroDefinition, json: &Value) -> Self {
        let mut definition = String::new();
        write_schema(&mut definition, json, None);
        Self {
            definition: Bytes::from(definition),
            schema,
            writers: Mutex::new(HashMap::new()),
            _value: PhantomData,
        }
    }

    /// The writer's schema for `info`, parsed once.
    fn writer(&self, info: &SchemaInfo) -> Result<Arc<AvroDefinition>, SchemaError> {
        let mut writers = self.writers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = writers.get(&info.data) {
            return Ok(w.clone());
        }
        let text = std::str::from_utf8(&info.data).map_err(|e| SchemaError::definition(AVRO, e))?;
        let parsed = Arc::new(
            AvroDefinition::parse_str(text).map_err(|e| SchemaError::definition(AVRO, e))?,
        );
        writers.insert(info.data.clone(), parsed.clone());
        Ok(parsed)
    }

    /// Reads one datum written with `input.writer` (or this schema) into
    /// this schema's shape.
    pub(crate) fn read(
        &self,
        input: Encoded<'_>,
    ) -> Result<apache_avro::types::Value, SchemaError> {
        let writer = match input.writer {
            Some(w) if w.schema_type == AVRO && w.data != self.definition => Some(self.writer(w)?),
            Some(w) if w.schema_type != AVRO && w.schema_type != SchemaType::AutoConsume => {
                return Err(SchemaError::Mismatch {
                    reader: AVRO,
                    writer: w.schema_type,
                });
            }
            _ => None,
        };
        let mut payload = input.payload;
        let value = match &writer {
            Some(w) => apache_avro::from_avro_datum(w, &mut payload, Some(&self.schema)),
            None => apache_avro::from_avro_datum(&self.schema, &mut payload, None),
        };
        value.map_err(|e| SchemaError::decode(AVRO, e))
    }
}

impl<T: Serialize + DeserializeOwned> Schema<T> for Avro<T> {
    fn info(&self) -> SchemaInfo {
        SchemaInfo::new(AVRO, self.definition.clone())
    }

    fn encode(&self, value: &T) -> Result<Bytes, SchemaError> {
        let value = apache_avro::to_value(value)
            .and_then(|v| v.resolve(&self.schema))
            .map_err(|e| SchemaError::encode(AVRO, e))?;
        apache_avro::to_avro_datum(&self.schema, value)
            .map(Bytes::from)
            .map_err(|e| SchemaError::encode(AVRO, e))
    }

    fn decode(&self, input: Encoded<'_>) -> Result<T, SchemaError> {
        let value = self.read(input)?;
        apache_avro::from_value(&value).map_err(|e| SchemaError::decode(AVRO, e))
    }

    fn needs_writer_schema(&self) -> bool {
        true
    }
}

/// Decodes an Avro datum written with `writer` into JSON (AUTO_CONSUME).
pub(crate) fn to_json(writer: &SchemaInfo, payload: &[u8]) -> Result<Value, SchemaError> {
    let text = std::str::from_utf8(&writer.data).map_err(|e| SchemaError::definition(AVRO, e))?;
    let schema = AvroDefinition::parse_str(text).map_err(|e| SchemaError::definition(AVRO, e))?;
    let mut payload = payload;
    let value = apache_avro::from_avro_datum(&schema, &mut payload, None)
        .map_err(|e| SchemaError::decode(AVRO, e))?;
    Value::try_from(value).map_err(|e| SchemaError::decode(AVRO, e))
}

/// Encodes a JSON value as an Avro datum of `definition` (the command's
/// `--value` with an Avro schema).
pub(crate) fn from_json(schema: &AvroDefinition, value: &Value) -> Result<Bytes, SchemaError> {
    let value = apache_avro::to_value(value)
        .and_then(|v| v.resolve(schema))
        .map_err(|e| SchemaError::encode(AVRO, e))?;
    apache_avro::to_avro_datum(schema, value)
        .map(Bytes::from)
        .map_err(|e| SchemaError::encode(AVRO, e))
}

impl Avro<Value> {
    /// Encodes `value` (JSON) in this schema: what a user typed on the
    /// command line, for instance.
    ///
    /// # Errors
    /// [`SchemaError::Encode`] if the value does not fit the schema.
    pub fn encode_json(&self, value: &Value) -> Result<Bytes, SchemaError> {
        from_json(&self.schema, value)
    }
}

/// The schema as the Java client registers it: `Schema#toString()` of
/// Avro for Java, compact JSON with the keys in its order and named types
/// referred to by their short name inside their own namespace.
pub(crate) fn java_form(schema: &AvroDefinition) -> String {
    let value = serde_json::to_value(schema).unwrap_or(Value::Null);
    let mut out = String::new();
    write_schema(&mut out, &value, None);
    out
}

/// A primitive's name, for a schema object that holds nothing but its
/// type (`{"type":"string"}` is written `"string"`, as Java does).
fn bare_primitive(map: &Map<String, Value>) -> Option<&str> {
    const PRIMITIVES: [&str; 8] = [
        "null", "boolean", "int", "long", "float", "double", "bytes", "string",
    ];
    match (map.len(), map.get("type")) {
        (1, Some(Value::String(t))) if PRIMITIVES.contains(&t.as_str()) => Some(t),
        _ => None,
    }
}

const SCHEMA_KEYS: [&str; 11] = [
    "type",
    "name",
    "namespace",
    "doc",
    "fields",
    "symbols",
    "items",
    "values",
    "size",
    "default",
    "aliases",
];
const FIELD_KEYS: [&str; 6] = ["name", "type", "doc", "default", "order", "aliases"];

fn write_schema(out: &mut String, v: &Value, enclosing: Option<&str>) {
    match v {
        Value::String(name) => {
            let short = match (name.rsplit_once('.'), enclosing) {
                (Some((ns, short)), Some(enc)) if ns == enc => short,
                _ => name,
            };
            write_json(out, &Value::String(short.to_owned()));
        }
        Value::Array(union) => {
            out.push('[');
            for (i, branch) in union.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_schema(out, branch, enclosing);
            }
            out.push(']');
        }
        Value::Object(map) if bare_primitive(map).is_some() => {
            write_json(
                out,
                &Value::String(bare_primitive(map).unwrap_or_default().to_owned()),
            );
        }
        Value::Object(map) if full_name(map).is_some() => {
            // `"name":"ns.N"` is written as Java does: name and namespace apart.
            let (namespace, name) = full_name(map).unwrap_or_default();
            let mut split = map.clone();
            split.insert("name".into(), Value::String(name.to_owned()));
            split.insert("namespace".into(), Value::String(namespace.to_owned()));
            write_schema(out, &Value::Object(split), enclosing);
        }
        Value::Object(map) => {
            let own = map.get("namespace").and_then(Value::as_str);
            let named = map.contains_key("name");
            let inner = if named { own.or(enclosing) } else { enclosing };
            write_object(out, map, &SCHEMA_KEYS, |out, key, value| match key {
                "namespace" if own == enclosing => false,
                "fields" => {
                    out.push('[');
                    for (i, f) in value.as_array().into_iter().flatten().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        match f {
                            Value::Object(field) => {
                                write_object(out, field, &FIELD_KEYS, |out, key, value| {
                                    if key == "type" {
                                        write_schema(out, value, inner);
                                    } else {
                                        write_json(out, value);
                                    }
                                    true
                                });
                            }
                            other => write_json(out, other),
                        }
                    }
                    out.push(']');
                    true
                }
                "items" | "values" => {
                    write_schema(out, value, inner);
                    true
                }
                _ => {
                    write_json(out, value);
                    true
                }
            });
        }
        other => write_json(out, other),
    }
}

/// The namespace and short name of a named type whose name is a full name.
fn full_name(map: &Map<String, Value>) -> Option<(&str, &str)> {
    map.get("name")?.as_str()?.rsplit_once('.')
}

/// Writes `map` with `order`'s keys first, then the rest sorted; `value`
/// writes one entry's value and returns false to leave the entry out.
fn write_object(
    out: &mut String,
    map: &Map<String, Value>,
    order: &[&str],
    mut value: impl FnMut(&mut String, &str, &Value) -> bool,
) {
    let mut keys: Vec<&str> = order
        .iter()
        .copied()
        .filter(|k| map.contains_key(*k))
        .collect();
    let mut rest: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|k| !order.contains(k))
        .collect();
    rest.sort_unstable();
    keys.extend(rest);
    out.push('{');
    let mut first = true;
    for key in keys {
        let mark = out.len();
        if !first {
            out.push(',');
        }
        write_json(out, &Value::String(key.to_owned()));
        out.push(':');
        if value(out, key, &map[key]) {
            first = false;
        } else {
            out.truncate(mark);
        }
    }
    out.push('}');
}

fn write_json(out: &mut String, v: &Value) {
    out.push_str(&serde_json::to_string(v).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Avro for Java 1.11 prints for this schema (`Schema#toString`),
    /// from a definition with its keys shuffled.
    const JAVA: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"tags","type":{"type":"array","items":"string"}},{"name":"note","type":["null","string"],"doc":"d","default":null},{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},{"name":"when","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"m","type":{"type":"map","values":"int"}},{"name":"k2","type":"Kind"},{"name":"f","type":{"type":"fixed","name":"F","size":2}},{"name":"inner","type":{"type":"record","name":"In","namespace":"other","fields":[{"name":"a","type":"int"}]}}]}"#;

    #[test]
    fn the_definition_is_registered_in_the_java_clients_form() {
        let shuffled = r#"{"namespace":"shop","fields":[{"type":"long","name":"id"},{"name":"tags","type":{"items":"string","type":"array"}},{"name":"note","type":["null","string"],"default":null,"doc":"d"},{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},{"name":"when","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"m","type":{"type":"map","values":"int"}},{"name":"k2","type":"Kind"},{"name":"f","type":{"type":"fixed","name":"F","size":2}},{"name":"inner","type":{"type":"record","name":"In","namespace":"other","fields":[{"name":"a","type":"int"}]}}],"name":"Order","type":"record"}"#;
        let schema = Avro::<Value>::from_definition(shuffled).expect("parses");
        assert_eq!(schema.info().definition(), Some(JAVA));
        let again = Avro::<Value>::from_definition(JAVA).expect("parses");
        assert_eq!(again.info().definition(), Some(JAVA));
        // Java writes a full name apart and a bare primitive as its name.
        let dotted = Avro::<Value>::from_definition(
            r#"{"type":"record","name":"a.b.R","fields":[{"name":"x","type":{"type":"int"}}]}"#,
        )
        .expect("parses");
        assert_eq!(
            dotted.info().definition(),
            Some(
                r#"{"type":"record","name":"R","namespace":"a.b","fields":[{"name":"x","type":"int"}]}"#
            )
        );
    }

    #[derive(Serialize, serde::Deserialize, apache_avro::AvroSchema, Debug, PartialEq)]
    struct V1 {
        name: String,
        age: i32,
    }

    #[derive(Serialize, serde::Deserialize, apache_avro::AvroSchema, Debug, PartialEq)]
    struct V2 {
        name: String,
        age: i32,
        #[avro(default = "\"none\"")]
        email: String,
    }

    #[test]
    fn a_reader_on_an_older_version_reads_a_newer_writer_and_the_reverse() {
        let v1 = Avro::<V1>::derived();
        let v2 = Avro::<V2>::derived();
        let newer = v2
            .encode(&V2 {
                name: "ada".into(),
                age: 36,
                email: "a@b".into(),
            })
            .expect("encode");
        let read = v1
            .decode(Encoded {
                payload: &newer,
                key: None,
                writer: Some(&v2.info()),
            })
            .expect("resolves");
        assert_eq!(
            read,
            V1 {
                name: "ada".into(),
                age: 36
            }
        );
        let older = v1.encode(&read).expect("encode");
        let read = v2
            .decode(Encoded {
                payload: &older,
                key: None,
                writer: Some(&v1.info()),
            })
            .expect("resolves");
        assert_eq!(read.email, "none", "the reader's default");
    }

    #[test]
    fn bad_data_and_a_foreign_writer_are_errors_for_the_message() {
        let v1 = Avro::<V1>::derived();
        assert!(matches!(
            v1.decode(Encoded::payload(&[0x7f])),
            Err(SchemaError::Decode { .. })
        ));
        let json = SchemaInfo::new(SchemaType::Json, "{}");
        let foreign = v1.decode(Encoded {
            payload: b"",
            key: None,
            writer: Some(&json),
        });
        assert!(matches!(foreign, Err(SchemaError::Mismatch { .. })));
        assert!(Avro::<Value>::from_definition("{").is_err());
    }

    #[test]
    fn json_values_encode_into_a_schema_and_decode_back() {
        let schema = Avro::<Value>::from_definition(
            r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":["null","string"]}]}"#,
        )
        .expect("parses");
        let bytes = schema
            .encode_json(&serde_json::json!({"a": 5, "b": "x"}))
            .expect("fits");
        let back = to_json(&schema.info(), &bytes).expect("decodes");
        assert_eq!(back, serde_json::json!({"a": 5, "b": "x"}));
    }
}
