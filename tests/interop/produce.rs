//! What pulsar-wire produces, read by the official Python client (PyPI
//! `pulsar-client`, the C++ client underneath): batched or not, every codec,
//! keys, properties and event time arrive identical; and on a partitioned
//! topic both clients send a key to the same partition.

use std::collections::BTreeMap;
use std::path::Path;

use pulsar_wire::compression::Compression;
use pulsar_wire::producer::{HashingScheme, ProducerMessage};
use serde_json::{Value, json};

use crate::common::broker::{BrokerOptions, TestBroker};
use crate::common::{guard, init_tracing, unique_topic};

/// Runs `script` with the project's Python (`.venv`, made by `scripts/setup`)
/// and `args`; returns each stdout line parsed as JSON.
pub(crate) async fn python(script: &str, args: &[String]) -> Vec<Value> {
    let exe = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let out = tokio::process::Command::new(&exe)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("running {}: {e} (run scripts/setup)", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Reads `count` messages from each `(topic, count)` and prints one JSON line each.
const CONSUME: &str = r#"
import json, sys, pulsar
client = pulsar.Client(sys.argv[1])
for topic, count in json.loads(sys.argv[2]):
    consumer = client.subscribe(topic, "interop", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(count):
        m = consumer.receive(timeout_millis=30000)
        print(json.dumps({"topic": topic, "data": m.data().hex(), "key": m.partition_key(),
                          "properties": m.properties(), "event_time": m.event_timestamp()}), flush=True)
        consumer.acknowledge(m)
    consumer.close()
client.close()
"#;

/// Sends one message per key (batching off) and prints each key's partition.
const ROUTE: &str = r#"
import json, sys, pulsar
client = pulsar.Client(sys.argv[1])
producer = client.create_producer(sys.argv[2], batching_enabled=False)
for key in json.loads(sys.argv[3]):
    mid = producer.send(b"from python", partition_key=key)
    print(json.dumps({"key": key, "partition": mid.partition()}), flush=True)
client.close()
"#;

fn message(i: usize) -> (ProducerMessage, Value) {
    let data = format!("interop {i} ").repeat(20);
    let key = format!("key-{i}");
    let msg = ProducerMessage::new(data.clone())
        .key(key.clone())
        .property("index", i.to_string())
        .property("lang", "rust")
        .event_time(1_700_000_000_000 + i as u64);
    let want = json!({
        "data": hex(data.as_bytes()),
        "key": key,
        "properties": {"index": i.to_string(), "lang": "rust"},
        "event_time": 1_700_000_000_000u64 + i as u64,
    });
    (msg, want)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn the_official_client_reads_everything_we_produce() {
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("interop produce", async {
        let client = crate::common::broker::client(&broker).await;
        const COUNT: usize = 10;
        let mut expected: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for codec in [
            Compression::None,
            Compression::Lz4,
            Compression::Zlib,
            Compression::Zstd,
            Compression::Snappy,
        ] {
            for batching in [true, false] {
                let topic = unique_topic("interop");
                let producer = client
                    .producer(topic.clone())
                    .compression(codec)
                    .batching(batching)
                    .create()
                    .await
                    .expect("producer");
                let mut receipts = Vec::new();
                let mut want = Vec::new();
                for i in 0..COUNT {
                    let (msg, mut value) = message(i);
                    value["topic"] = json!(topic);
                    want.push(value);
                    receipts.push(producer.send(msg).await.expect("queued"));
                }
                for receipt in receipts {
                    receipt.await.expect("receipt");
                }
                producer.close().await.expect("close");
                expected.insert(topic, want);
            }
        }
        let plan: Vec<(String, usize)> = expected.keys().map(|t| (t.clone(), COUNT)).collect();
        let got = python(
            CONSUME,
            &[
                broker.service_url(),
                serde_json::to_string(&plan).expect("json"),
            ],
        )
        .await;
        let mut by_topic: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for line in got {
            let topic = line["topic"].as_str().expect("topic").to_owned();
            by_topic.entry(topic).or_default().push(line);
        }
        assert_eq!(by_topic, expected);
    })
    .await;
}

#[tokio::test]
async fn both_clients_send_a_key_to_the_same_partition() {
    init_tracing();
    let topic = unique_topic("interop-keys");
    let Some(broker) = TestBroker::start_with(BrokerOptions {
        partitioned_topics: vec![(topic.clone(), 5)],
        ..BrokerOptions::default()
    })
    .await
    else {
        return;
    };
    guard("interop keys", async {
        let keys: Vec<String> = (0..40)
            .map(|i| format!("customer-{i}"))
            .chain(["a", "é", "日本語", "a-rather-long-key-of-many-words"].map(String::from))
            .collect();
        let theirs = python(
            ROUTE,
            &[
                broker.service_url(),
                topic.clone(),
                serde_json::to_string(&keys).expect("json"),
            ],
        )
        .await;
        assert_eq!(theirs.len(), keys.len());
        let client = crate::common::broker::client(&broker).await;
        // The Python client always hashes with BoostHash (it cannot be set).
        let producer = client
            .producer(topic.clone())
            .hashing_scheme(HashingScheme::BoostHash)
            .create()
            .await
            .expect("producer");
        for (key, line) in keys.iter().zip(&theirs) {
            assert_eq!(line["key"].as_str(), Some(key.as_str()));
            let id = producer
                .send(ProducerMessage::new("from rust").key(key.clone()))
                .await
                .expect("queued")
                .await
                .expect("receipt");
            assert_eq!(
                i64::from(id.partition),
                line["partition"].as_i64().expect("partition"),
                "{key}"
            );
        }
        producer.close().await.expect("close");
    })
    .await;
}
