//! `consume --max-redeliver / --dlq-topic / --retry-later-ms`: dead and
//! retry letters as a user sees them.

use serde_json::json;

use crate::common::broker::TestBroker;
use crate::common::unique_topic;
use crate::{finish, interrupt, pulsar_wire, spawn};

#[tokio::test]
async fn a_message_nacked_past_max_redeliver_lands_in_the_dead_letter_topic() {
    let broker = TestBroker::start().await;
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
    let broker = TestBroker::start().await;
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
    let dead = pulsar_wire(
        &url,
        &[
            "consume",
            &dlq,
            "-s",
            "r",
            "-t",
            "shared",
            "--position",
            "earliest",
            "-n",
            "1",
        ],
    )
    .await
    .ok_lines();
    assert_eq!(dead[0]["payload"], json!("again"));
    assert_eq!(dead[0]["properties"]["REAL_TOPIC"], json!(topic));
}
