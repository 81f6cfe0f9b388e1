//! Schemas on the command line: `produce --schema json|avro --value JSON`
//! registers the schema and sends the values; `consume` prints each
//! message's value decoded in its writer's schema.
//!
//! pulsar-lite keeps no schemas (no versions on messages, no GET_SCHEMA), so
//! the decoding runs on Apache Pulsar only; refusing a value that does not
//! fit happens before anything is sent, on both.

use serde_json::{Value, json};

use crate::common::broker::{BrokerKind, TestBroker, skip_unless};
use crate::common::unique_topic;
use crate::failures::assert_failed;
use crate::{Run, pulsar_wire};

const ORDER: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"},{"name":"note","type":["null","string"]}]}"#;

fn orders() -> [Value; 2] {
    [
        json!({"id": 1, "item": "tea", "note": null}),
        json!({"id": 2, "item": "milk", "note": "oat"}),
    ]
}

/// Runs `produce` with `values` in `schema` (with `definition`, else the topic's).
async fn produce_values(
    url: &str,
    topic: &str,
    schema: &str,
    definition: Option<&str>,
    values: &[String],
) -> Run {
    let mut args = vec!["produce", topic, "--schema", schema];
    if let Some(d) = definition {
        args.extend(["--definition", d]);
    }
    for v in values {
        args.extend(["--value", v.as_str()]);
    }
    pulsar_wire(url, &args).await
}

/// Sends [`orders`] in `schema`.
async fn produce(url: &str, topic: &str, schema: &str, definition: Option<&str>) -> Vec<Value> {
    let values: Vec<String> = orders().iter().map(Value::to_string).collect();
    produce_values(url, topic, schema, definition, &values)
        .await
        .ok_lines()
}

/// Consumes from the earliest on subscription "s": `-n count`, or until
/// idle when `count` is `None`.
async fn consume(url: &str, topic: &str, count: Option<&str>) -> Vec<Value> {
    let mut args = vec!["consume", topic, "-s", "s", "--position", "earliest"];
    match count {
        Some(n) => args.extend(["-n", n]),
        None => args.extend(["--idle-exit-ms", "500"]),
    }
    pulsar_wire(url, &args).await.ok_lines()
}

#[tokio::test]
async fn produce_registers_json_and_avro_schemas_and_consume_prints_decoded_values() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite gives no schema versions and never answers GET_SCHEMA",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    for schema in ["json", "avro"] {
        let topic = unique_topic(&format!("cli-{schema}"));
        assert_eq!(produce(&url, &topic, schema, Some(ORDER)).await.len(), 2);
        // Without --definition: the topic's schema, now registered.
        assert_eq!(produce(&url, &topic, schema, None).await.len(), 2);
        let lines = consume(&url, &topic, Some("4")).await;
        let values: Vec<&Value> = lines.iter().map(|l| &l["value"]).collect();
        let want = orders();
        assert_eq!(
            values,
            [&want[0], &want[1], &want[0], &want[1]],
            "{lines:?}"
        );
        if schema == "json" {
            // The payload is the JSON text itself.
            let payload: Value =
                serde_json::from_str(lines[0]["payload"].as_str().expect("text")).expect("json");
            assert_eq!(payload, want[0]);
        }
    }
    // A message without a schema has no value.
    let topic = unique_topic("cli-bytes");
    pulsar_wire(&url, &["produce", &topic, "-m", "raw"])
        .await
        .ok_lines();
    let lines = consume(&url, &topic, Some("1")).await;
    assert_eq!(lines[0]["payload"], json!("raw"));
    assert_eq!(lines[0].get("value"), None, "{lines:?}");
}

#[tokio::test]
async fn a_value_that_does_not_fit_the_schema_is_refused_before_anything_is_sent() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-misfit");
    let good = orders()[0].to_string();
    let misfit = r#"{"id":"three","item":"x","note":null}"#.to_owned();
    let run = produce_values(&url, &topic, "avro", Some(ORDER), &[good.clone(), misfit]).await;
    assert_failed(&run, 1, "--value #2");
    let run = produce_values(&url, &topic, "json", Some(ORDER), &["{nope".to_owned()]).await;
    assert_failed(&run, 1, "--value #1: not JSON");
    let run = produce_values(&url, &topic, "avro", Some("{"), &[good]).await;
    assert_failed(&run, 1, "--definition");
    // Nothing was sent.
    let lines = consume(&url, &topic, None).await;
    assert!(lines.is_empty(), "{lines:?}");
}
