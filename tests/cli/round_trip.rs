//! produce → consume through the broker: content, outcomes, exits.

use std::collections::HashSet;

use serde_json::json;

use crate::common::broker::{BrokerKind, TestBroker, skip_unless};
use crate::common::unique_topic;
use crate::pulsar_wire;

/// `count` messages of `topic`, consumed (and acked) by `pulsar-wire
/// consume` on Shared subscription `s` from the earliest.
async fn consume_from_earliest(url: &str, topic: &str, count: u32) -> Vec<serde_json::Value> {
    let count = count.to_string();
    pulsar_wire(url, &from_earliest(topic, &count))
        .await
        .ok_lines()
}

/// The arguments of `pulsar-wire consume` for `count` messages of `topic`
/// on Shared subscription `s` from the earliest.
fn from_earliest<'a>(topic: &'a str, count: &'a str) -> [&'a str; 10] {
    [
        "consume",
        topic,
        "-s",
        "s",
        "-t",
        "shared",
        "--position",
        "earliest",
        "-n",
        count,
    ]
}

#[tokio::test]
async fn produce_then_consume_keeps_key_properties_and_binary_payloads() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-round-trip");

    let texts = pulsar_wire(
        &url,
        &[
            "produce", &topic, "-m", "hello", "-m", "wörld", "--key", "k1", "-p", "a=1", "-p",
            "b=x=y",
        ],
    )
    .await
    .ok_lines();
    // 0x00 0x01 0x02 0xff: not UTF-8, so it comes back as base64.
    let binary = pulsar_wire(&url, &["produce", &topic, "--base64", "-m", "AAEC/w=="])
        .await
        .ok_lines();
    assert_eq!((texts.len(), binary.len()), (2, 1));
    let produced: Vec<&str> = texts
        .iter()
        .chain(&binary)
        .map(|l| l["message_id"].as_str().expect("message_id"))
        .collect();
    for id in &produced {
        let parts: Vec<&str> = id.split(':').collect();
        assert!(
            parts.len() >= 3 && parts.iter().all(|p| p.parse::<i64>().is_ok()),
            "{id}"
        );
    }

    let lines = pulsar_wire(
        &url,
        &[
            "consume",
            &topic,
            "-s",
            "sub",
            "-t",
            "shared",
            "--position",
            "earliest",
            "-n",
            "3",
        ],
    )
    .await
    .ok_lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, produced);
    for (line, payload) in lines.iter().zip(["hello", "wörld"]) {
        assert_eq!(line["topic"], json!(topic));
        assert_eq!(line["payload"], json!(payload));
        assert_eq!(line.get("payload_base64"), None);
        assert_eq!(line["key"], json!("k1"));
        assert_eq!(line["properties"], json!({"a": "1", "b": "x=y"}));
        assert_eq!(line["redelivery_count"], json!(0));
        assert_eq!(line["outcome"], json!("ack"));
    }
    assert_eq!(lines[2]["payload"], json!("AAEC/w=="));
    assert_eq!(lines[2]["payload_base64"], json!(true));
    assert_eq!(lines[2]["key"], json!(null));
    assert_eq!(lines[2]["properties"], json!({}));

    // All three were acked: the subscription is empty now.
    let again = pulsar_wire(
        &url,
        &[
            "consume",
            &topic,
            "-s",
            "sub",
            "-t",
            "shared",
            "--idle-exit-ms",
            "500",
        ],
    )
    .await
    .ok_lines();
    assert!(again.is_empty(), "acked messages came back: {again:?}");
}

#[tokio::test]
async fn every_compression_codec_round_trips_batched_generated_payloads() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    for codec in ["none", "lz4", "zlib", "zstd", "snappy"] {
        let topic = unique_topic(&format!("cli-{codec}"));
        let sent = pulsar_wire(
            &url,
            &[
                "produce",
                &topic,
                "-n",
                "20",
                "--size",
                "300",
                "--batch",
                "--compression",
                codec,
            ],
        )
        .await
        .ok_lines();
        assert_eq!(sent.len(), 20, "{codec}");
        // Batched: the ids carry a batch index.
        assert!(
            sent.iter()
                .all(|l| l["message_id"].as_str().unwrap().split(':').count() == 4),
            "{codec}: {sent:?}"
        );
        let got = consume_from_earliest(&url, &topic, 20).await;
        let payloads: Vec<&str> = got.iter().map(|l| l["payload"].as_str().unwrap()).collect();
        assert_eq!(payloads.len(), 20, "{codec}");
        for (i, p) in payloads.iter().enumerate() {
            assert_eq!(p.len(), 300, "{codec}");
            assert!(p.starts_with(&format!("message-{i} ")), "{codec}: {p}");
        }
    }
}

#[tokio::test]
async fn a_nacked_message_comes_back_with_redelivery_count_one() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-nack");
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
            "--outcome",
            "nack",
            "-n",
            "2",
        ],
    )
    .await
    .ok_lines();
    let seen: Vec<(u64, &str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["redelivery_count"].as_u64().unwrap(),
                l["payload"].as_str().unwrap(),
                l["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, [(0, "again", "nack"), (1, "again", "nack")]);
    assert_eq!(lines[0]["message_id"], lines[1]["message_id"]);
}

#[tokio::test]
async fn consume_exits_cleanly_when_idle_and_outcome_none_keeps_the_backlog() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-idle");
    let nothing = pulsar_wire(
        &url,
        &[
            "consume",
            &topic,
            "-s",
            "s",
            "-t",
            "shared",
            "--idle-exit-ms",
            "300",
        ],
    )
    .await
    .ok_lines();
    assert!(nothing.is_empty());

    pulsar_wire(&url, &["produce", &topic, "-n", "3", "--size", "20"])
        .await
        .ok_lines();
    // Not acked: once the first consumer has closed, all three are there again.
    let args = [
        "consume",
        &topic,
        "-s",
        "s",
        "-t",
        "shared",
        "--position",
        "earliest",
        "--outcome",
        "none",
        "-n",
        "3",
    ];
    let first = pulsar_wire(&url, &args).await.ok_lines();
    let second = pulsar_wire(&url, &args).await.ok_lines();
    let ids = |lines: &[serde_json::Value]| -> HashSet<String> {
        lines
            .iter()
            .map(|l| l["message_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(first.len(), 3, "{first:?}");
    assert_eq!(ids(&first), ids(&second));
    assert!(first.iter().all(|l| l["outcome"] == json!("none")));
}

#[tokio::test]
async fn a_12_mib_message_produced_with_chunking_is_consumed_whole() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-chunking");
    let size = (12 << 20).to_string();
    let args = ["produce", &topic, "-n", "1", "--size", &size, "--chunking"];
    let sent = pulsar_wire(&url, &args).await.ok_lines();
    assert_eq!(sent.len(), 1, "{sent:?}");
    // Without chunking the broker's 5 MiB limit refuses it.
    let refused = pulsar_wire(&url, &["produce", &topic, "-n", "1", "--size", &size]).await;
    assert_ne!(refused.code, Some(0), "sent whole without chunking");
    assert!(refused.stderr.contains("max message size"), "{refused:?}");
    // Shared: pulsar-lite fails chunked messages on Exclusive.
    let got = consume_from_earliest(&url, &topic, 1).await;
    let payload = got[0]["payload"].as_str().expect("payload");
    assert_eq!(payload.len(), 12 << 20);
    assert!(payload.starts_with("message-0 "), "{}", &payload[..20]);
    assert_eq!(
        got[0]["message_id"], sent[0]["message_id"],
        "known by the same id, its first and last chunks"
    );
    let id = sent[0]["message_id"].as_str().expect("an id");
    assert!(id.contains(';'), "first;last: {id}");
}

#[tokio::test]
async fn log_lines_go_to_stderr_and_leave_stdout_to_results() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-log");
    let sent = pulsar_wire(&url, &["produce", &topic, "-m", "a", "-m", "b"]).await;
    assert_eq!(sent.ok_lines().len(), 2, "{sent:#?}");

    let args = [
        ["--url", url.as_str()].as_slice(),
        &from_earliest(&topic, "2"),
    ]
    .concat();
    let env = [("PULSAR_WIRE_LOG", "pulsar_wire::consumer=trace")];
    let run = crate::run_with_env(&args, &env).await;
    let payloads: Vec<_> = run
        .ok_lines()
        .iter()
        .map(|l| l["payload"].clone())
        .collect();
    assert_eq!(payloads, [json!("a"), json!("b")], "{run:#?}");
    for needle in ["subscribed", "FLOW", "MESSAGE"] {
        assert!(run.stderr.contains(needle), "no {needle:?} in {run:#?}");
    }
}

#[tokio::test]
async fn hide_content_prints_each_payloads_size_instead_of_it() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-hide-content");
    pulsar_wire(&url, &["produce", &topic, "-m", "wörld"])
        .await
        .ok_lines();
    pulsar_wire(&url, &["produce", &topic, "--base64", "-m", "AAEC/w=="])
        .await
        .ok_lines();
    let mut args = from_earliest(&topic, "2").to_vec();
    args.push("--hide-content");
    let lines = pulsar_wire(&url, &args).await.ok_lines();
    let sizes: Vec<_> = lines.iter().map(|l| l["payload_size"].clone()).collect();
    assert_eq!(sizes, [json!(6), json!(4)], "{lines:?}");
    for line in &lines {
        assert!(line.get("payload").is_none() && line.get("payload_base64").is_none());
    }
}

#[tokio::test]
async fn a_non_durable_subscription_reads_from_the_earliest_and_is_forgotten() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite keeps a non-durable subscription's acks once its consumer is gone",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-non-durable");
    pulsar_wire(&url, &["produce", &topic, "-m", "one"])
        .await
        .ok_lines();
    let mut args = from_earliest(&topic, "1").to_vec();
    args.extend(["-m", "NonDurable"]);
    for _ in 0..2 {
        // Nothing of the first run's subscription (nor its ack) is left:
        // the second reads the same message again.
        let lines = pulsar_wire(&url, &args).await.ok_lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["payload"], "one");
    }
}

#[tokio::test]
async fn files_are_sent_one_message_each_and_rates_bound_both_ends() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-files");
    let dir = std::env::temp_dir().join(topic.rsplit('/').next().expect("a name"));
    std::fs::create_dir_all(&dir).expect("a directory of its own");
    let (text, binary) = (dir.join("a.txt"), dir.join("b.bin"));
    std::fs::write(&text, "from a file").expect("write");
    std::fs::write(&binary, [0u8, 1, 2, 255]).expect("write");
    let files = format!("{},{}", text.display(), binary.display());
    // Twice the list, at most 50 a second: four messages.
    let sent = pulsar_wire(
        &url,
        &["produce", &topic, "-f", &files, "-n", "2", "-r", "50"],
    )
    .await
    .ok_lines();
    assert_eq!(sent.len(), 4, "{sent:?}");
    let mut args = from_earliest(&topic, "4").to_vec();
    args.extend(["-r", "100"]);
    let lines = pulsar_wire(&url, &args).await.ok_lines();
    let payloads: Vec<_> = lines
        .iter()
        .map(|l| l.get("payload").or(l.get("payload_base64")).cloned())
        .collect();
    let (a, b) = (Some(json!("from a file")), Some(json!("AAEC/w==")));
    assert_eq!(payloads, [a.clone(), b.clone(), a, b], "{lines:?}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[tokio::test]
async fn regex_reads_every_topic_whose_name_matches() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite does not answer GET_TOPICS_OF_NAMESPACE",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let stem = unique_topic("cli-regex");
    let (one, two) = (format!("{stem}-one"), format!("{stem}-two"));
    for topic in [&one, &two] {
        pulsar_wire(&url, &["produce", topic, "-m", topic])
            .await
            .ok_lines();
    }
    let pattern = format!("{stem}-.*");
    let mut args = from_earliest(&pattern, "2").to_vec();
    args.push("--regex");
    let lines = pulsar_wire(&url, &args).await.ok_lines();
    let mut got: Vec<String> = lines
        .iter()
        .map(|l| l["payload"].as_str().expect("payload").to_owned())
        .collect();
    got.sort();
    assert_eq!(got, [one, two], "{lines:?}");
}
