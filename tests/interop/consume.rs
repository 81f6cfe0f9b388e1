//! What the official client produces — batched, with each codec, keys,
//! properties and event times — pulsar-wire's consumer receives with
//! identical content.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use pulsar_wire::Client;
use pulsar_wire::consumer::{Consumer, ConsumerBuilder, InitialPosition, SubscriptionType};
use serde_json::Value;

use crate::common::broker::{TestBroker, client};
use crate::common::{guard, init_tracing, unique_topic};

/// A Shared consumer of `topic` on `subscription` from the earliest
/// message, with what `setup` adds.
pub(crate) async fn shared_consumer(
    client: &Client,
    topic: &str,
    subscription: &str,
    setup: impl FnOnce(ConsumerBuilder) -> ConsumerBuilder,
) -> Consumer {
    let builder = client
        .consumer(topic, subscription)
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest);
    setup(builder).subscribe().await.expect("subscribe")
}

fn python() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python")
}

#[tokio::test]
async fn batches_of_every_codec_from_the_official_client_arrive_intact() {
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let topic = unique_topic("interop-consume");
    guard("interop consume", async {
        let client = client(&broker).await;
        let mut consumer = shared_consumer(&client, &topic, "interop", |b| b).await;

        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/produce_batches.py");
        let sent_file = std::env::temp_dir().join(format!(
            "pulsar-wire-interop-{}.jsonl",
            topic.rsplit('/').next().expect("local name")
        ));
        let out = tokio::process::Command::new(python())
            .arg(script)
            .arg(broker.service_url())
            .arg(&topic)
            .arg(&sent_file)
            .output()
            .await
            .expect("run the official client (scripts/setup makes .venv)");
        assert!(
            out.status.success(),
            "official client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines = std::fs::read_to_string(&sent_file).expect("what the official client sent");
        let _ = std::fs::remove_file(&sent_file);
        let sent: Vec<Value> = lines
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(sent.len(), 20);

        let mut received = HashMap::new();
        while received.len() < sent.len() {
            let m = consumer.receive().await.expect("receive");
            consumer.ack(&m).await.expect("ack");
            let text = String::from_utf8(m.payload().to_vec()).expect("utf-8");
            received.insert(text, m);
        }
        for expected in &sent {
            let text = expected["payload"].as_str().expect("payload");
            let m = received
                .get(text)
                .unwrap_or_else(|| panic!("{text} not received"));
            assert_eq!(m.key(), expected["key"].as_str(), "{text}");
            let props: BTreeMap<&str, &str> = m
                .properties()
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let want: BTreeMap<&str, &str> = expected["properties"]
                .as_object()
                .expect("properties")
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str().expect("text")))
                .collect();
            assert_eq!(props, want, "{text}");
            assert_eq!(m.event_time(), expected["event_time"].as_u64(), "{text}");
            assert!(m.id().is_batch_member(), "{text} arrived batched");
        }
    })
    .await;
}
