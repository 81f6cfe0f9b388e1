//! Schemas shared with the official Python client (PyPI `pulsar-client`,
//! `pulsar.schema`): JSON and Avro records of a `Record` class and strings
//! that it produces read as equal typed values here, and the reverse; on
//! Apache Pulsar, Avro versions resolve across the two clients (a newer
//! writer read by an older reader, both ways).
//!
//! pulsar-lite keeps no schemas: there the Python consumer decodes Avro
//! with its own schema (it would wait for a GET_SCHEMA answer that never
//! comes), and the evolution test is skipped.

use pulsar_wire::producer::ProducerError;
use pulsar_wire::schema::{Avro, Json, StringSchema, TypedConsumer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::broker::{BrokerKind, TestBroker, client, skip_unless};
use crate::common::{guard, init_tracing, stored, typed_from_start, unique_topic};
use crate::produce::python;

/// The Python script's `Order` record: `id` and `item` required, `note`
/// nullable. The Avro schema is derived from the struct.
#[derive(Serialize, Deserialize, apache_avro::AvroSchema, Debug, Clone, PartialEq)]
struct Order {
    id: i64,
    item: String,
    note: Option<String>,
}

fn order(i: i64) -> Order {
    Order {
        id: i,
        item: format!("item {i}"),
        note: (i % 2 == 0).then(|| format!("note {i}")),
    }
}

/// The same record as Python prints it.
fn order_json(i: i64) -> Value {
    serde_json::to_value(order(i)).expect("json")
}

/// The Python side's record class and schemas.
const PRELUDE: &str = r#"
import json, sys, pulsar
from pulsar.schema import Record, Long, String, Integer, JsonSchema, AvroSchema, StringSchema
class Order(Record):
    id = Long(required=True)
    item = String(required=True)
    note = String()
def order(i):
    return Order(id=i, item=f"item {i}", note=(f"note {i}" if i % 2 == 0 else None))
def plain(o):
    return {"id": o.id, "item": o.item, "note": o.note}
client = pulsar.Client(sys.argv[1])
"#;

/// Produces `count` orders as JSON and as Avro and `count` strings, each on
/// its topic (argv 2, 3, 4).
const PRODUCE: &str = r#"
count = int(sys.argv[5])
for topic, schema, value in ((sys.argv[2], JsonSchema(Order), order),
                             (sys.argv[3], AvroSchema(Order), order),
                             (sys.argv[4], StringSchema(), lambda i: f"text {i}")):
    producer = client.create_producer(topic, schema=schema)
    for i in range(count):
        producer.send(value(i))
    producer.close()
client.close()
"#;

/// Reads `count` values from each topic (argv 2, 3, 4) and prints them;
/// with argv 6 = "registry" the Avro values decode with the writer's
/// schema version (`value()`), else with the reader's own schema.
const CONSUME: &str = r#"
count = int(sys.argv[5])
registry = sys.argv[6] == "registry"
for topic, schema in ((sys.argv[2], JsonSchema(Order)), (sys.argv[3], AvroSchema(Order)),
                      (sys.argv[4], StringSchema())):
    consumer = client.subscribe(topic, "interop", schema=schema,
                                initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(count):
        m = consumer.receive(timeout_millis=30000)
        v = m.value() if registry or not isinstance(schema, AvroSchema) else schema.decode(m.data())
        print(json.dumps({"topic": topic, "value": v if isinstance(v, str) else plain(v)}), flush=True)
        consumer.acknowledge(m)
    consumer.close()
client.close()
"#;

/// Receives `count` values from `consumer`, acking each.
async fn values<T>(consumer: &mut TypedConsumer<T>, count: usize) -> Vec<T> {
    let mut out = Vec::new();
    for _ in 0..count {
        let msg = consumer.receive().await.expect("message");
        out.push(msg.value().expect("decodes"));
        consumer.ack(&msg).await.expect("ack");
    }
    out
}

const COUNT: i64 = 5;

#[tokio::test]
async fn the_official_client_produces_records_and_strings_we_read_as_equal_values() {
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("python produces schemas", async {
        let [json_topic, avro_topic, text_topic] =
            ["py-json", "py-avro", "py-text"].map(unique_topic);
        python(
            &format!("{PRELUDE}{PRODUCE}"),
            &[
                broker.service_url(),
                json_topic.clone(),
                avro_topic.clone(),
                text_topic.clone(),
                COUNT.to_string(),
            ],
        )
        .await;
        let client = client(&broker).await;
        let want: Vec<Order> = (0..COUNT).map(order).collect();
        let count = want.len();
        let mut json = typed_from_start(&client, &json_topic, Json::<Order>::derived()).await;
        assert_eq!(values(&mut json, count).await, want);
        let mut avro = typed_from_start(&client, &avro_topic, Avro::<Order>::derived()).await;
        assert_eq!(values(&mut avro, count).await, want);
        let mut text = typed_from_start(&client, &text_topic, StringSchema).await;
        let texts: Vec<String> = (0..COUNT).map(|i| format!("text {i}")).collect();
        assert_eq!(values(&mut text, count).await, texts);
    })
    .await;
}

#[tokio::test]
async fn we_produce_records_and_strings_the_official_client_reads_as_equal_values() {
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("python consumes schemas", async {
        let client = client(&broker).await;
        let [json_topic, avro_topic, text_topic] =
            ["rs-json", "rs-avro", "rs-text"].map(unique_topic);
        let json = client
            .producer(&json_topic)
            .create_with(Json::<Order>::derived())
            .await
            .expect("json producer");
        let avro = client
            .producer(&avro_topic)
            .create_with(Avro::<Order>::derived())
            .await
            .expect("avro producer");
        let text = client
            .producer(&text_topic)
            .create_with(StringSchema)
            .await
            .expect("string producer");
        let mut receipts = Vec::new();
        for i in 0..COUNT {
            receipts.push(json.send(&order(i)).await.expect("queued"));
            receipts.push(avro.send(&order(i)).await.expect("queued"));
            receipts.push(text.send(&format!("text {i}")).await.expect("queued"));
        }
        for receipt in receipts {
            receipt.await.expect("stored");
        }
        let registry = if BrokerKind::current() == BrokerKind::Apache {
            "registry"
        } else {
            "own-schema"
        };
        let got = python(
            &format!("{PRELUDE}{CONSUME}"),
            &[
                broker.service_url(),
                json_topic.clone(),
                avro_topic.clone(),
                text_topic.clone(),
                COUNT.to_string(),
                registry.to_owned(),
            ],
        )
        .await;
        let mut want = Vec::new();
        for topic in [&json_topic, &avro_topic] {
            want.extend((0..COUNT).map(|i| json!({"topic": topic, "value": order_json(i)})));
        }
        want.extend((0..COUNT).map(|i| json!({"topic": text_topic, "value": format!("text {i}")})));
        assert_eq!(got, want);
    })
    .await;
}

/// `Order` with one more field, a default for readers of the old one. It
/// comes second, so a reader that ignored the writer's version would read
/// its bytes as the start of `item`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct OrderV2 {
    id: i64,
    quantity: i32,
    item: String,
    note: Option<String>,
}

const ORDER_V2: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"quantity","type":"int","default":1},{"name":"item","type":"string"},{"name":"note","type":["null","string"]}]}"#;

/// Produces order 0 with the `Order` class, then order 1 with the newer
/// schema (argv 3) on argv 2.
const PRODUCE_NEWER: &str = r#"
topic = sys.argv[2]
old = client.create_producer(topic, schema=AvroSchema(Order))
old.send(order(0))
old.close()
newer = client.create_producer(topic, schema=AvroSchema(None, schema_definition=json.loads(sys.argv[3])))
newer.send({"id": 1, "item": "item 1", "note": None, "quantity": 7})
newer.close()
client.close()
"#;

/// Reads argv 3 messages of argv 2 with the `Order` class (each decoded
/// with its writer's version) and prints them.
const CONSUME_OLDER: &str = r#"
consumer = client.subscribe(sys.argv[2], "older", schema=AvroSchema(Order),
                            initial_position=pulsar.InitialPosition.Earliest)
for _ in range(int(sys.argv[3])):
    m = consumer.receive(timeout_millis=30000)
    print(json.dumps({"value": plain(m.value()), "version": str(m.schema_version())}), flush=True)
    consumer.acknowledge(m)
client.close()
"#;

#[tokio::test]
async fn avro_versions_resolve_across_the_two_clients_and_an_incompatible_one_is_refused() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite keeps no schema versions and never answers GET_SCHEMA",
    ) {
        return;
    }
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("avro evolution across clients", async {
        let client = client(&broker).await;

        // Python writes the old and the newer version; our reader of the old
        // one reads both, the newer with the writer's schema resolved.
        let topic = unique_topic("py-evolve");
        python(
            &format!("{PRELUDE}{PRODUCE_NEWER}"),
            &[broker.service_url(), topic.clone(), ORDER_V2.to_owned()],
        )
        .await;
        let mut older = typed_from_start(&client, &topic, Avro::<Order>::derived()).await;
        let first = older.receive().await.expect("old version");
        let second = older.receive().await.expect("newer version");
        assert_ne!(first.schema_version(), second.schema_version());
        assert_eq!(first.value().expect("old reads old"), order(0));
        assert_eq!(
            second.value().expect("old reads newer"),
            Order {
                id: 1,
                item: "item 1".into(),
                note: None
            }
        );

        // An incompatible schema on Python's topic is refused, by name.
        let broken = Avro::<Order>::from_definition(
            r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}"#,
        )
        .expect("parses");
        match client.producer(&topic).create_with(broken).await {
            Err(ProducerError::IncompatibleSchema { topic: t, message }) => {
                assert_eq!(t, topic);
                assert!(!message.is_empty());
            }
            other => panic!("expected IncompatibleSchema, got {other:?}"),
        }

        // We write the old and the newer version; Python's reader of the old
        // one fetches each writer's version and reads both.
        let topic = unique_topic("rs-evolve");
        let old = client
            .producer(&topic)
            .create_with(Avro::<Order>::derived())
            .await
            .expect("old producer");
        stored(&old, &order(0)).await;
        let newer = client
            .producer(&topic)
            .create_with(Avro::<OrderV2>::from_definition(ORDER_V2).expect("v2"))
            .await
            .expect("a compatible newer producer");
        let v2 = OrderV2 {
            id: 1,
            quantity: 7,
            item: "item 1".into(),
            note: None,
        };
        stored(&newer, &v2).await;
        let got = python(
            &format!("{PRELUDE}{CONSUME_OLDER}"),
            &[broker.service_url(), topic.clone(), "2".to_owned()],
        )
        .await;
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0]["value"], order_json(0));
        assert_eq!(got[1]["value"], order_json(1));
        assert_ne!(got[0]["version"], got[1]["version"]);
    })
    .await;
}
