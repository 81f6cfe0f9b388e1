//! `consume --max-redeliver / --dlq-topic / --retry-later-ms`: dead and
//! retry letters as a user sees them.

use serde_json::json;

use crate::common::broker::TestBroker;
use crate::common::unique_topic;
use crate::{finish, interrupt, pulsar_wire, spawn};

#[tokio::test]
async fn a_message_nacked_past_max_redeliver_lands_in_the_dead_letter_topic() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-dlq");
    let dlq = format!("{topic}-dead");
    let sent = pulsar_wire(&url, &["produce", &topic, "-m", "poison", "-p", "k=v"])
        .await
        .ok_lines();
    let origin = sent[0]["message_id"].as_str().unwrap().to_owned();

    // The DLQ reader first (it creates its subscription at the start), then
    // the consumer that nacks everything until Ctrl-C.
    let reader = spawn(&[
        "--url",
        &url,
        "consume",
        &dlq,
        "-s",
        "dlq-reader",
        "-t",
        "shared",
        "--position",
        "earliest",
        "-n",
        "1",
    ]);
    let nacker = spawn(&[
        "--url",
        &url,
        "consume",
        &topic,
        "-s",
        "s",
        "-t",
        "shared",
        "--position",
        "earliest",
        "--outcome",
        "nack",
        "--max-redeliver",
        "2",
        "--dlq-topic",
        &dlq,
    ]);
    let dead = finish(reader).await.ok_lines();
    interrupt(&nacker);
    let seen = finish(nacker).await.ok_lines();

    // Deliveries 0 and 1 reached the application; the one with count 2 was forwarded.
    let counts: Vec<u64> = seen
        .iter()
        .map(|l| l["redelivery_count"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [0, 1], "{seen:?}");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["payload"], json!("poison"));
    assert_eq!(dead[0]["properties"]["k"], json!("v"));
    assert_eq!(dead[0]["properties"]["REAL_TOPIC"], json!(topic));
    assert_eq!(dead[0]["properties"]["ORIGIN_MESSAGE_ID"], json!(origin));
}

#[tokio::test]
async fn retry_later_brings_a_message_back_through_the_retry_topic_then_dead_letters_it() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-retry");
    pulsar_wire(&url, &["produce", &topic, "-m", "again"])
        .await
        .ok_lines();
    let lines = pulsar_wire(
        &url,
        &[
            "consume",
            &topic,
            "-s",
            "s",
            "-t",
            "shared",
            "--position",
            "earliest",
            "--retry-later-ms",
            "10",
            "--max-redeliver",
            "2",
            "-n",
            "3",
        ],
    )
    .await
    .ok_lines();
    let retry_topic = format!("{topic}-s-RETRY");
    let hops: Vec<(&str, Option<&str>, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["topic"].as_str().unwrap(),
                l["properties"]["RECONSUMETIMES"].as_str(),
                l["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        hops,
        [
            (topic.as_str(), None, "retry_later"),
            (retry_topic.as_str(), Some("1"), "retry_later"),
            (retry_topic.as_str(), Some("2"), "retry_later"),
        ]
    );
    assert!(lines.iter().all(|l| l["payload"] == json!("again")));
    // The third retry went over the limit: to the dead-letter topic.
    let dlq = format!("{topic}-s-DLQ");
    let dead = first_from_earliest(&url, &dlq, "r").await;
    assert_eq!(dead[0]["payload"], json!("again"));
    assert_eq!(dead[0]["properties"]["REAL_TOPIC"], json!(topic));
}

#[tokio::test]
async fn dlq_redrive_lists_then_moves_a_dead_letter_back_to_its_real_topic() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-redrive");
    let dlq = format!("{topic}-s-DLQ");
    // The subscription that keeps the dead letters, then one dead letter
    // as a consumer's forward leaves it.
    pulsar_wire(
        &url,
        &[
            "consume",
            &dlq,
            "-s",
            "keep",
            "-t",
            "shared",
            "--idle-exit-ms",
            "100",
        ],
    )
    .await
    .ok_lines();
    let real_topic = format!("REAL_TOPIC={topic}");
    for _ in 0..2 {
        pulsar_wire(
            &url,
            &[
                "produce",
                &dlq,
                "-m",
                "poison",
                "--key",
                "k1",
                "-p",
                "k=v",
                "-p",
                &real_topic,
                "-p",
                "ORIGIN_MESSAGE_ID=1:2:-1",
                "-p",
                "DLQ_LAST_ERROR=boom",
            ],
        )
        .await
        .ok_lines();
    }
    let redrive = |extra: &'static [&'static str]| {
        let mut args = vec![
            "dlq",
            "redrive",
            "--from",
            &dlq,
            "-s",
            "keep",
            "--filter-property",
            "k=v",
            "--idle-ms",
            "500",
        ];
        args.extend_from_slice(extra);
        let url = url.clone();
        async move { pulsar_wire(&url, &args).await.ok_lines() }
    };
    let planned = redrive(&["--dry-run"]).await;
    assert_eq!(planned.len(), 2, "{planned:?}");
    assert_eq!(planned[0]["target"], json!(topic));
    assert_eq!(planned[0]["published"], json!(null));
    assert_eq!(planned[0]["properties"], json!({"k": "v"}));
    let moved = redrive(&["--limit", "1"]).await;
    assert_eq!(moved.len(), 1, "--limit 1 moves one: {moved:?}");
    assert!(moved[0]["published"].is_string(), "{moved:?}");
    assert_eq!(redrive(&["--dry-run"]).await.len(), 1, "one is left");
    assert_eq!(redrive(&[]).await.len(), 1, "the rest moves");
    assert!(redrive(&["--dry-run"]).await.is_empty(), "both were acked");

    let back = first_from_earliest(&url, &topic, "app").await;
    assert_eq!(back[0]["payload"], json!("poison"));
    assert_eq!(back[0]["key"], json!("k1"));
    assert_eq!(back[0]["properties"], json!({"k": "v"}));
}

#[tokio::test]
async fn dlq_redrive_leaves_a_dead_letter_whose_real_topic_is_another_topic() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-redrive-foreign");
    let dlq = format!("{topic}-s-DLQ");
    let other = unique_topic("cli-redrive-other");
    let real_topic = format!("REAL_TOPIC={other}");
    pulsar_wire(&url, &["produce", &dlq, "-m", "forged", "-p", &real_topic])
        .await
        .ok_lines();
    let mut args = vec!["dlq", "redrive", "--from", &dlq, "--idle-ms", "500"];
    let refused = pulsar_wire(&url, &args).await;
    assert!(refused.ok_lines().is_empty(), "{refused:#?}");
    assert!(
        refused.stderr.contains(&format!("REAL_TOPIC {other}")),
        "{refused:#?}"
    );
    args.extend(["--allow-target", other.as_str()]);
    let moved = pulsar_wire(&url, &args).await.ok_lines();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0]["target"], json!(other));
    let back = first_from_earliest(&url, &other, "app").await;
    assert_eq!(back[0]["payload"], json!("forged"));
}

/// The first message of `topic` for a new Shared subscription `sub` at
/// the earliest position, as `consume` prints it.
async fn first_from_earliest(url: &str, topic: &str, sub: &str) -> Vec<serde_json::Value> {
    let args = [
        "consume",
        topic,
        "-s",
        sub,
        "-t",
        "shared",
        "--position",
        "earliest",
        "-n",
        "1",
    ];
    pulsar_wire(url, &args).await.ok_lines()
}
