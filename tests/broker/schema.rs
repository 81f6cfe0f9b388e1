//! Schemas against a real broker: typed producers and consumers, schema
//! versions on messages, the registry (GET_SCHEMA, GET_OR_CREATE_SCHEMA),
//! Avro evolution, the broker's refusal of an incompatible schema,
//! key-value schemas with a separated key, AUTO_CONSUME and AUTO_PUBLISH.
//!
//! pulsar-lite takes a schema in PRODUCER and SUBSCRIBE and ignores it: it
//! gives no schema version, checks nothing, and never answers GET_SCHEMA;
//! what needs the registry runs on Apache Pulsar only.

use bytes::Bytes;
use pulsar_wire::consumer::{ConsumerError, InitialPosition};
use pulsar_wire::producer::{ProducerError, ProducerMessage};
use pulsar_wire::schema::{
    AutoConsume, AutoPublish, Avro, GenericValue, Json, KeyValue, KeyValueEncoding, Primitive,
    Schema, SchemaError, SchemaType, StringSchema,
};
use serde::{Deserialize, Serialize};

use crate::common::broker::{BrokerKind, BrokerOptions, TestBroker, client, skip_unless};
use crate::common::{guard, stored, typed_from_start, unique_topic};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Order {
    id: i64,
    item: String,
    note: Option<String>,
}

const ORDER: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"},{"name":"note","type":["null","string"],"default":null}]}"#;

/// The order with one more field, a default for readers of the old one.
/// It comes second, so a reader that ignored the writer's version would
/// read its bytes as the start of `item`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct OrderV2 {
    id: i64,
    quantity: i32,
    item: String,
    note: Option<String>,
}

const ORDER_V2: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"quantity","type":"int","default":1},{"name":"item","type":"string"},{"name":"note","type":["null","string"],"default":null}]}"#;

/// The order with `id` turned into text: no reader of the old one can
/// read it, nor it the old one.
const ORDER_BROKEN: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"item","type":"string"}]}"#;

fn order(i: i64) -> Order {
    Order {
        id: i,
        item: format!("item {i}"),
        note: (i % 2 == 0).then(|| format!("note {i}")),
    }
}

fn is_apache() -> bool {
    BrokerKind::current() == BrokerKind::Apache
}

#[tokio::test]
async fn json_values_round_trip_with_the_schema_version_on_every_message() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("json round trip", async {
        let client = client(&broker).await;
        let topic = unique_topic("schema-json");
        let mut consumer = typed_from_start(&client, &topic, Json::<Order>::new(ORDER)).await;
        let producer = client
            .producer(&topic)
            .create_with(Json::<Order>::new(ORDER))
            .await
            .expect("producer with the schema");
        for i in 0..4 {
            let template = ProducerMessage::default().property("index", i.to_string());
            let receipt = producer
                .send_message(&order(i), template)
                .await
                .expect("queued");
            receipt.await.expect("stored");
        }
        let mut versions = Vec::new();
        for i in 0..4 {
            let msg = consumer.receive().await.expect("message");
            assert_eq!(msg.value().expect("decodes"), order(i));
            assert_eq!(msg.properties()["index"], i.to_string());
            versions.push(msg.schema_version());
            consumer.ack(&msg).await.expect("ack");
        }
        if is_apache() {
            let (info, version) = client
                .schema(&topic, None)
                .await
                .expect("GET_SCHEMA")
                .expect("the topic has a schema");
            assert_eq!(info.schema_type, SchemaType::Json);
            assert_eq!(info.definition(), Some(ORDER));
            assert!(
                versions.iter().all(|v| v.as_ref() == Some(&version)),
                "{versions:?}"
            );
        } else {
            // pulsar-lite gives producers no schema version.
            assert!(versions.iter().all(Option::is_none), "{versions:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_payload_the_schema_cannot_read_is_an_error_for_that_message_only() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("decode failure", async {
        let client = client(&broker).await;
        let topic = unique_topic("schema-bad");
        let mut consumer = typed_from_start(&client, &topic, Json::<Order>::new(ORDER)).await;
        let raw = client
            .producer(&topic)
            .create()
            .await
            .expect("bytes producer");
        raw.send("not json")
            .await
            .expect("queued")
            .await
            .expect("stored");
        let typed = client
            .producer(&topic)
            .create_with(Json::<Order>::new(ORDER))
            .await
            .expect("typed producer");
        stored(&typed, &order(1)).await;
        let bad = consumer
            .receive()
            .await
            .expect("the bad message is handed out");
        assert!(matches!(
            bad.value(),
            Err(SchemaError::Decode {
                schema_type: SchemaType::Json,
                ..
            })
        ));
        assert_eq!(&bad.payload()[..], b"not json");
        consumer.ack(&bad).await.expect("ack of the bad message");
        let good = consumer.receive().await.expect("the next one");
        assert_eq!(good.value().expect("decodes"), order(1));
    })
    .await;
}

#[tokio::test]
async fn primitives_and_key_values_separated_and_inline_round_trip() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("primitives and key-values", async {
        let client = client(&broker).await;
        let ints = unique_topic("schema-int");
        let mut consumer = typed_from_start::<i64>(&client, &ints, Primitive).await;
        let producer = client
            .producer(&ints)
            .create_with::<i64>(Primitive)
            .await
            .expect("producer");
        stored(&producer, &-42).await;
        let msg = consumer.receive().await.expect("message");
        assert_eq!(&msg.payload()[..], &(-42i64).to_be_bytes());
        assert_eq!(msg.value().expect("decodes"), -42);

        let kv_topic = unique_topic("schema-kv");
        let kv = || {
            KeyValue::new(
                StringSchema,
                Json::<Order>::new(ORDER),
                KeyValueEncoding::Separated,
            )
        };
        let mut consumer = typed_from_start(&client, &kv_topic, kv()).await;
        let producer = client
            .producer(&kv_topic)
            .create_with(kv())
            .await
            .expect("producer");
        let value = ("customer-7".to_owned(), order(3));
        stored(&producer, &value).await;
        let msg = consumer.receive().await.expect("message");
        // The key travels in the message key (base64 of its bytes), the
        // value alone in the payload.
        assert!(msg.key_is_base64());
        assert_eq!(msg.key(), Some("Y3VzdG9tZXItNw=="));
        assert_eq!(
            &msg.payload()[..],
            serde_json::to_vec(&order(3)).expect("json").as_slice()
        );
        assert_eq!(msg.value().expect("decodes"), value);
        if is_apache() {
            let (info, _) = client
                .schema(&kv_topic, None)
                .await
                .expect("GET_SCHEMA")
                .expect("schema");
            assert_eq!(info.schema_type, SchemaType::KeyValue);
            assert_eq!(info.properties["kv.encoding.type"], "SEPARATED");
            assert_eq!(info.properties["value.schema.type"], "JSON");
        }

        // Inline: both in the payload, each behind its 4-byte length.
        let inline_topic = unique_topic("schema-kv-inline");
        let inline = || KeyValue::new(StringSchema, Primitive, KeyValueEncoding::Inline);
        let mut consumer = typed_from_start(&client, &inline_topic, inline()).await;
        let producer = client
            .producer(&inline_topic)
            .create_with(inline())
            .await
            .expect("producer");
        stored(&producer, &("k".to_owned(), 7i32)).await;
        let msg = consumer.receive().await.expect("message");
        assert_eq!(msg.key(), None);
        assert_eq!(
            &msg.payload()[..],
            &[0, 0, 0, 1, b'k', 0, 0, 0, 4, 0, 0, 0, 7]
        );
        assert_eq!(msg.value().expect("decodes"), ("k".to_owned(), 7));
    })
    .await;
}

#[tokio::test]
async fn the_registry_gives_versions_and_the_schema_of_each() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite never answers GET_SCHEMA or GET_OR_CREATE_SCHEMA",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("registry", async {
        let client = client(&broker).await;
        let topic = unique_topic("schema-registry");
        assert_eq!(client.schema(&topic, None).await.expect("GET_SCHEMA"), None);
        // GET_OR_CREATE_SCHEMA needs the topic: a bytes producer makes it.
        let _bytes = client
            .producer(&topic)
            .create()
            .await
            .expect("bytes producer");
        let v1 = Schema::<Order>::info(&Avro::<Order>::from_definition(ORDER).expect("v1"));
        let v2 = Schema::<OrderV2>::info(&Avro::<OrderV2>::from_definition(ORDER_V2).expect("v2"));
        let first = client
            .register_schema(&topic, &v1)
            .await
            .expect("registers v1");
        let again = client.register_schema(&topic, &v1).await.expect("v1 again");
        assert_eq!(first, again, "the same schema keeps its version");
        let second = client
            .register_schema(&topic, &v2)
            .await
            .expect("registers v2");
        assert_ne!(first, second);
        let (latest, version) = client
            .schema(&topic, None)
            .await
            .expect("latest")
            .expect("some");
        assert_eq!((latest.definition(), &version), (Some(ORDER_V2), &second));
        let (old, version) = client
            .schema(&topic, Some(&first))
            .await
            .expect("v1")
            .expect("some");
        assert_eq!((old.definition(), &version), (Some(ORDER), &first));
        let broken =
            Schema::<Order>::info(&Avro::<Order>::from_definition(ORDER_BROKEN).expect("parses"));
        match client.register_schema(&topic, &broken).await {
            Err(e) => assert!(e.to_string().contains("IncompatibleSchema"), "{e}"),
            Ok(v) => panic!("an incompatible schema got version {v}"),
        }
    })
    .await;
}

#[tokio::test]
async fn an_avro_reader_on_the_older_version_reads_the_newer_writer() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite gives no schema versions and no GET_SCHEMA",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("avro evolution", async {
        let client = client(&broker).await;
        let topic = unique_topic("schema-evolve");
        let mut old_reader = typed_from_start(
            &client,
            &topic,
            Avro::<Order>::from_definition(ORDER).expect("v1"),
        )
        .await;
        let old_writer = client
            .producer(&topic)
            .create_with(Avro::<Order>::from_definition(ORDER).expect("v1"))
            .await
            .expect("v1 producer");
        stored(&old_writer, &order(1)).await;
        let new_writer = client
            .producer(&topic)
            .create_with(Avro::<OrderV2>::from_definition(ORDER_V2).expect("v2"))
            .await
            .expect("a compatible v2 producer");
        let newer = OrderV2 {
            id: 2,
            item: "item 2".into(),
            note: Some("note 2".into()),
            quantity: 5,
        };
        stored(&new_writer, &newer).await;
        let first = old_reader.receive().await.expect("v1 message");
        let second = old_reader.receive().await.expect("v2 message");
        assert_ne!(first.schema_version(), second.schema_version());
        assert_eq!(first.value().expect("v1 reads v1"), order(1));
        // The field the old reader lacks is skipped.
        assert_eq!(second.value().expect("v1 reads v2"), order(2));

        // A reader of the new version gives the old message the default.
        let mut new_reader = client
            .consumer(&topic, "v2-reader")
            .initial_position(InitialPosition::Earliest)
            .subscribe_with(Avro::<OrderV2>::from_definition(ORDER_V2).expect("v2"))
            .await
            .expect("v2 reader");
        let old = new_reader.receive().await.expect("v1 message");
        assert_eq!(old.value().expect("v2 reads v1").quantity, 1);

        // AUTO_CONSUME reads each with its writer's schema.
        let mut auto = client
            .consumer(&topic, "auto")
            .initial_position(InitialPosition::Earliest)
            .subscribe_with(AutoConsume)
            .await
            .expect("auto consumer");
        let a = auto.receive().await.expect("first");
        let b = auto.receive().await.expect("second");
        assert_eq!(
            a.value().expect("decodes"),
            GenericValue::Json(serde_json::json!({"id": 1, "item": "item 1", "note": null}))
        );
        assert_eq!(
            b.value().expect("decodes"),
            GenericValue::Json(
                serde_json::json!({"id": 2, "item": "item 2", "note": "note 2", "quantity": 5})
            )
        );
    })
    .await;
}

#[tokio::test]
async fn an_incompatible_schema_is_refused_with_the_topic_and_the_brokers_words() {
    if skip_unless(BrokerKind::Apache, "pulsar-lite checks no schema") {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("incompatible", async {
        let client = client(&broker).await;
        let topic = unique_topic("schema-refused");
        let _v1 = client
            .producer(&topic)
            .create_with(Avro::<Order>::from_definition(ORDER).expect("v1"))
            .await
            .expect("v1 producer");
        let broken = || Avro::<Order>::from_definition(ORDER_BROKEN).expect("parses");
        match client.producer(&topic).create_with(broken()).await {
            Err(ProducerError::IncompatibleSchema { topic: t, message }) => {
                assert_eq!(t, topic);
                assert!(!message.is_empty());
            }
            other => panic!("expected IncompatibleSchema, got {other:?}"),
        }
        let refused = client.consumer(&topic, "s").subscribe_with(broken()).await;
        match refused {
            Err(ConsumerError::IncompatibleSchema { topic: t, message }) => {
                assert_eq!(t, topic);
                assert!(!message.is_empty());
            }
            other => panic!("expected IncompatibleSchema, got {:?}", other.map(|_| ())),
        }
    })
    .await;
}

#[tokio::test]
async fn auto_publish_takes_the_topics_schema_and_checks_each_payload() {
    if skip_unless(BrokerKind::Apache, "pulsar-lite never answers GET_SCHEMA") {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("auto publish", async {
        let client = client(&broker).await;
        let topic = unique_topic("schema-autopub");
        let mut consumer = typed_from_start(&client, &topic, Json::<Order>::new(ORDER)).await;
        let typed = client
            .producer(&topic)
            .create_with(Json::<Order>::new(ORDER))
            .await
            .expect("registers the schema");
        stored(&typed, &order(1)).await;
        let auto = client
            .producer(&topic)
            .create_with(AutoPublish)
            .await
            .expect("auto publish");
        let json = Bytes::from(serde_json::to_vec(&order(2)).expect("json"));
        stored(&auto, &json).await;
        let refused = auto.send(&Bytes::from_static(b"{not json")).await;
        assert!(
            matches!(refused, Err(ProducerError::Encode { .. })),
            "{refused:?}"
        );
        let one = consumer.receive().await.expect("first");
        let two = consumer.receive().await.expect("second");
        assert_eq!(one.schema_version(), two.schema_version());
        assert_eq!(two.value().expect("decodes"), order(2));
    })
    .await;
}

#[cfg(feature = "protobuf")]
#[tokio::test]
async fn protobuf_native_messages_round_trip_and_register_their_descriptor() {
    use prost::Message as _;
    use prost_types::{
        DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet,
        field_descriptor_proto::{Label, Type},
    };
    use pulsar_wire::schema::ProtobufNative;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Reading {
        #[prost(string, tag = "1")]
        sensor: String,
        #[prost(double, tag = "2")]
        value: f64,
    }
    let field = |name: &str, number, kind: Type| FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(kind as i32),
        ..FieldDescriptorProto::default()
    };
    let set = FileDescriptorSet {
        file: vec![FileDescriptorProto {
            name: Some("iot/reading.proto".into()),
            package: Some("iot".into()),
            syntax: Some("proto3".into()),
            message_type: vec![DescriptorProto {
                name: Some("Reading".into()),
                field: vec![
                    field("sensor", 1, Type::String),
                    field("value", 2, Type::Double),
                ],
                ..DescriptorProto::default()
            }],
            ..FileDescriptorProto::default()
        }],
    }
    .encode_to_vec();
    let schema = || ProtobufNative::<Reading>::new(&set, "iot.Reading").expect("valid set");
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("protobuf native", async {
        let client = client(&broker).await;
        let topic = unique_topic("schema-proto");
        let mut consumer = typed_from_start(&client, &topic, schema()).await;
        let producer = client
            .producer(&topic)
            .create_with(schema())
            .await
            .expect("producer");
        let reading = Reading {
            sensor: "t-1".into(),
            value: 21.5,
        };
        stored(&producer, &reading).await;
        let msg = consumer.receive().await.expect("message");
        assert_eq!(msg.value().expect("decodes"), reading);
        if is_apache() {
            let (info, _) = client
                .schema(&topic, None)
                .await
                .expect("GET_SCHEMA")
                .expect("schema");
            assert_eq!(info.schema_type, SchemaType::ProtobufNative);
            let definition: serde_json::Value =
                serde_json::from_str(info.definition().expect("text")).expect("json");
            assert_eq!(definition["rootMessageTypeName"], "iot.Reading");
        }
    })
    .await;
}

#[tokio::test]
async fn on_a_partitioned_topic_every_partition_reads_with_the_topics_schema_versions() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite gives no schema versions and no GET_SCHEMA",
    ) {
        return;
    }
    let topic = unique_topic("schema-partitioned");
    let Some(broker) = TestBroker::start_with(BrokerOptions {
        partitioned_topics: vec![(topic.clone(), 3)],
        ..BrokerOptions::default()
    })
    .await
    else {
        return;
    };
    guard("partitioned schemas", async {
        let client = client(&broker).await;
        let old_writer = client
            .producer(&topic)
            .create_with(Avro::<Order>::from_definition(ORDER).expect("v1"))
            .await
            .expect("v1 producer");
        let new_writer = client
            .producer(&topic)
            .create_with(Avro::<OrderV2>::from_definition(ORDER_V2).expect("v2"))
            .await
            .expect("v2 producer");
        // Keys spread the messages over the partitions.
        for i in 0..6 {
            let key = ProducerMessage::default().key(format!("k{i}"));
            if i % 2 == 0 {
                let receipt = old_writer.send_message(&order(i), key).await;
                receipt.expect("queued").await.expect("stored");
            } else {
                let newer = OrderV2 {
                    id: i,
                    quantity: 9,
                    item: format!("item {i}"),
                    note: None,
                };
                let receipt = new_writer.send_message(&newer, key).await;
                receipt.expect("queued").await.expect("stored");
            }
        }
        let mut reader = typed_from_start(
            &client,
            &topic,
            Avro::<Order>::from_definition(ORDER).expect("v1"),
        )
        .await;
        let mut partitions = std::collections::BTreeSet::new();
        let mut ids = Vec::new();
        for _ in 0..6 {
            let msg = reader.receive().await.expect("message");
            partitions.insert(msg.topic().to_owned());
            let value = msg
                .value()
                .expect("each partition resolves the writer's version");
            // The v2 messages lose their quantity; they have no note.
            assert_eq!(value, order(value.id));
            ids.push(value.id);
            reader.ack(&msg).await.expect("ack");
        }
        ids.sort_unstable();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5]);
        assert!(partitions.len() > 1, "{partitions:?}");
    })
    .await;
}
