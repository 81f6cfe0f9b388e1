//! The dead-letter copies pulsar-wire publishes, read back by the official
//! client (PyPI `pulsar-client`): with a maximum of 3 the application sees
//! deliveries 0, 1, 2 and the fourth is in `<topic>-<sub>-DLQ`, kept by the
//! `initial_subscription_name`, with `REAL_TOPIC` and `ORIGIN_MESSAGE_ID`
//! right (a batch member's id carrying its batch index).

use std::path::Path;
use std::time::Duration;

use pulsar_wire::consumer::{DeadLetterPolicy, InitialPosition, SubscriptionType};
use pulsar_wire::producer::ProducerMessage;
use serde_json::Value;

use crate::common::broker::TestBroker;
use crate::common::{guard, init_tracing, unique_topic};

/// Reads `count` messages from subscription `argv[3]` of `argv[2]` (it
/// exists already: no initial position given) and prints one JSON line each.
const READ_DLQ: &str = r#"
import json, sys, pulsar
client = pulsar.Client(sys.argv[1])
consumer = client.subscribe(sys.argv[2], sys.argv[3], consumer_type=pulsar.ConsumerType.Shared)
for _ in range(int(sys.argv[4])):
    m = consumer.receive(timeout_millis=30000)
    print(json.dumps({"data": m.data().decode(), "key": m.partition_key(),
                      "properties": m.properties(), "event_time": m.event_timestamp()}), flush=True)
    consumer.acknowledge(m)
client.close()
"#;

async fn python(args: &[&str]) -> Vec<Value> {
    let exe = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let out = tokio::process::Command::new(&exe)
        .arg("-c")
        .arg(READ_DLQ)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("running {}: {e} (run scripts/setup)", exe.display()));
    assert!(
        out.status.success(),
        "python failed: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[tokio::test]
async fn the_official_client_reads_the_dead_letter_copies() {
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("dead letters read by the official client", async {
        let client = crate::common::broker::client(&broker).await;
        let topic = unique_topic("interop-dlq");
        let mut consumer = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .nack_policy(pulsar_wire::consumer::NackPolicy::Immediate)
            .dead_letter_policy(DeadLetterPolicy {
                initial_subscription_name: Some("audit".into()),
                ..DeadLetterPolicy::after_redeliveries(3)
            })
            .subscribe()
            .await
            .expect("subscribe");
        // One plain message, and a batch of two whose second member fails.
        let plain = client
            .producer(&topic)
            .batching(false)
            .create()
            .await
            .expect("producer");
        let batched = client
            .producer(&topic)
            .batching_max_delay(Duration::from_secs(60))
            .batching_max_messages(2)
            .create()
            .await
            .expect("batching producer");
        let id = plain
            .send(
                ProducerMessage::new("plain")
                    .key("k1")
                    .property("n", "1")
                    .event_time(1_700_000_000_001),
            )
            .await
            .expect("queued")
            .await
            .expect("stored");
        let ok = batched
            .send(ProducerMessage::new("member-ok"))
            .await
            .expect("queued");
        let bad = batched
            .send(ProducerMessage::new("member-bad").key("k2"))
            .await
            .expect("queued");
        let (_, bad_id) = (ok.await.expect("stored"), bad.await.expect("stored"));
        assert!(bad_id.is_batch_member(), "{bad_id:?}");

        let mut counts: Vec<(String, u32)> = Vec::new();
        while counts.iter().filter(|(t, _)| t != "member-ok").count() < 6 {
            let m = consumer.receive().await.expect("receive");
            let text = String::from_utf8(m.payload().to_vec()).expect("utf-8");
            if text == "member-ok" {
                consumer.ack(&m).await.expect("ack");
            } else {
                consumer.nack(&m).expect("nack");
            }
            counts.push((text, m.redelivery_count()));
        }
        for name in ["plain", "member-bad"] {
            let seen: Vec<u32> = counts
                .iter()
                .filter(|(t, _)| t == name)
                .map(|(_, c)| *c)
                .collect();
            assert_eq!(
                seen,
                [0, 1, 2],
                "{name}: the application sees deliveries 0, 1, 2"
            );
        }

        let dlq = format!("{topic}-s-DLQ");
        let mut copies = python(&[&broker.service_url(), &dlq, "audit", "2"]).await;
        copies.sort_by_key(|c| c["data"].as_str().map(str::to_owned));
        let props = |c: &Value, k: &str| c["properties"][k].as_str().map(str::to_owned);
        let (bad_copy, plain_copy) = (&copies[0], &copies[1]);
        assert_eq!(plain_copy["data"], "plain");
        assert_eq!(plain_copy["key"], "k1");
        assert_eq!(plain_copy["event_time"], 1_700_000_000_001u64);
        assert_eq!(props(plain_copy, "n").as_deref(), Some("1"));
        assert_eq!(
            props(plain_copy, "REAL_TOPIC").as_deref(),
            Some(topic.as_str())
        );
        assert_eq!(props(plain_copy, "ORIGIN_MESSAGE_ID"), Some(id.to_string()));
        assert_eq!(
            props(plain_copy, "ORIGIN_MESSAGE_ID"),
            Some(format!("{}:{}:-1", id.ledger_id, id.entry_id))
        );
        assert_eq!(bad_copy["data"], "member-bad");
        assert_eq!(bad_copy["key"], "k2");
        assert_eq!(
            props(bad_copy, "REAL_TOPIC").as_deref(),
            Some(topic.as_str())
        );
        assert_eq!(
            props(bad_copy, "ORIGIN_MESSAGE_ID"),
            Some(format!(
                "{}:{}:-1:{}",
                bad_id.ledger_id, bad_id.entry_id, bad_id.batch_index
            ))
        );
    })
    .await;
}
