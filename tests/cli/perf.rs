//! `perf produce` / `perf consume --json`: the summaries count what was
//! asked (no timing assertions: only that the numbers are sane).

use serde_json::Value;

use crate::common::broker::TestBroker;
use crate::common::unique_topic;
use crate::pulsar_wire;

/// The one summary line, with the fields every summary has.
fn summary(lines: &[Value], op: &str, count: u64, size: u64) -> Value {
    assert_eq!(lines.len(), 1, "{lines:?}");
    let s = lines[0].clone();
    assert_eq!(s["op"], op);
    assert_eq!(s["count"], count, "{s}");
    assert_eq!(s["bytes"], count * size, "{s}");
    for k in [
        "seconds",
        "msgs_per_sec",
        "mb_per_sec",
        "cpu_user_s",
        "cpu_sys_s",
    ] {
        let v = s[k].as_f64().unwrap_or_else(|| panic!("{k} in {s}"));
        assert!(v.is_finite() && v >= 0.0, "{k} in {s}");
    }
    assert!(s["msgs_per_sec"].as_f64().unwrap() > 0.0, "{s}");
    let percentiles = [
        "lat_p50_us",
        "lat_p95_us",
        "lat_p99_us",
        "lat_p999_us",
        "lat_p9999_us",
        "lat_max_us",
    ]
    .map(|k| s[k].as_u64().unwrap_or_else(|| panic!("{k} in {s}")));
    assert!(percentiles.is_sorted(), "{s}");
    let mean = s["lat_mean_us"].as_f64().expect("lat_mean_us");
    assert!(mean >= 0.0 && mean <= percentiles[5] as f64, "{s}");
    s
}

#[tokio::test]
async fn perf_produce_then_perf_consume_report_what_was_asked() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-perf");

    let run = pulsar_wire(
        &url,
        &[
            "perf",
            "produce",
            &topic,
            "-n",
            "2000",
            "--size",
            "100",
            "--batch",
            "--json",
            "--count-hooks",
        ],
    )
    .await;
    let s = summary(&run.ok_lines(), "produce", 2000, 100);
    assert_eq!(s["latency"], "send_to_receipt");
    // The producer's own figures agree, and the hooks ran once per send
    // and once per receipt.
    let stats = &s["stats"];
    assert_eq!(stats["messages_sent"], 2000, "{s}");
    assert_eq!(stats["bytes_sent"], 200_000, "{s}");
    assert_eq!(stats["send_failures"], 0, "{s}");
    assert_eq!(stats["pending_messages"], 0, "{s}");
    assert_eq!(stats["send_latency"]["count"], 2000, "{s}");
    assert_eq!(stats["hook_calls"], 4000, "{s}");
    assert!(run.stderr.contains("client stats: "), "{run:#?}");
    assert!(
        run.stderr.contains("perf produce summary: 2000 msgs"),
        "{run:#?}"
    );

    let run = pulsar_wire(
        &url,
        &[
            "perf",
            "produce",
            &topic,
            "-n",
            "50",
            "--size",
            "100",
            "--sync",
            "--compression",
            "lz4",
            "--json",
        ],
    )
    .await;
    summary(&run.ok_lines(), "produce", 50, 100);

    let run = pulsar_wire(
        &url,
        &[
            "perf",
            "consume",
            &topic,
            "-s",
            "perf",
            "-t",
            "shared",
            "--position",
            "earliest",
            "-n",
            "2050",
            "--json",
        ],
    )
    .await;
    let s = summary(&run.ok_lines(), "consume", 2050, 100);
    assert_eq!(s["latency"], "publish_to_receive");
    let stats = &s["stats"];
    assert_eq!(stats["messages_received"], 2050, "{s}");
    assert_eq!(stats["bytes_received"], 205_000, "{s}");
    assert_eq!(stats["acks"], 2050, "{s}");
    assert_eq!(
        stats["hook_calls"],
        serde_json::Value::Null,
        "no hooks asked for"
    );

    // Everything was acked: a duration-bounded run finds nothing more.
    let run = pulsar_wire(
        &url,
        &[
            "perf",
            "consume",
            &topic,
            "-s",
            "perf",
            "-t",
            "shared",
            "--duration",
            "0.5",
            "--json",
        ],
    )
    .await;
    let lines = run.ok_lines();
    assert_eq!(lines[0]["count"], 0, "{lines:?}");
}

#[tokio::test]
async fn perf_produce_at_a_rate_sends_exactly_the_count() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-perf-rate");
    let run = pulsar_wire(
        &url,
        &[
            "perf", "produce", &topic, "-n", "30", "--rate", "100", "--size", "10", "--json",
        ],
    )
    .await;
    summary(&run.ok_lines(), "produce", 30, 10);
}

#[tokio::test]
async fn perf_latency_receives_every_message_it_sent_on_schedule() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-perf-latency");
    let run = pulsar_wire(
        &url,
        &[
            "perf",
            "latency",
            &topic,
            "--rate",
            "500",
            "--duration",
            "1",
            "--warmup",
            "0.2",
            "--size",
            "64",
            "--json",
        ],
    )
    .await;
    let lines = run.ok_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let s = &lines[0];
    assert_eq!(s["op"], "latency");
    // 0.2 s of warm-up and 1 s measured at 500/s: every message sent
    // arrives once, and the measured ones have a latency each.
    assert_eq!(s["sent"], 600, "{s}");
    assert_eq!(s["received"], 600, "{s}");
    assert_eq!(s["count"], 500, "{s}");
    let [p50, p99, p999, max] = ["lat_p50_us", "lat_p99_us", "lat_p999_us", "lat_max_us"]
        .map(|k| s[k].as_f64().unwrap_or_else(|| panic!("{k} in {s}")));
    assert!(
        0.0 <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
        "{s}"
    );
    assert!(s["late_sends"].as_u64().is_some_and(|n| n <= 500), "{s}");
    assert!(s["msgs_per_sec"].as_f64().is_some_and(|r| r > 0.0), "{s}");
    assert!(
        run.stderr.contains("perf latency summary: 500 of 600 msgs"),
        "{run:#?}"
    );
}

#[tokio::test]
async fn perf_latency_refuses_a_run_that_measures_nothing() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let run = pulsar_wire(
        &url,
        &["perf", "latency", "t", "--rate", "10", "--duration", "0.01"],
    )
    .await;
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert!(run.stderr.contains("measures no message"), "{run:#?}");
}

#[tokio::test]
async fn perf_multiplex_spreads_handles_over_the_connections_asked_for() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    for connections in ["shared", "each"] {
        let prefix = unique_topic(&format!("cli-perf-multiplex-{connections}"));
        for kind in ["produce", "consume"] {
            let run = pulsar_wire(
                &url,
                &[
                    "perf",
                    "multiplex",
                    &prefix,
                    "--kind",
                    kind,
                    "--handles",
                    "4",
                    "--connections",
                    connections,
                    "-n",
                    "1002",
                    "--size",
                    "32",
                    "--json",
                ],
            )
            .await;
            let lines = run.ok_lines();
            assert_eq!(lines.len(), 1, "{lines:?}");
            let s = &lines[0];
            assert_eq!(s["op"], format!("multiplex-{kind}"), "{s}");
            assert_eq!(s["count"], 1002, "{s}");
            assert_eq!(s["handles"], 4, "{s}");
            let tcp = s["tcp_connections"]
                .as_u64()
                .unwrap_or_else(|| panic!("{s}"));
            // A broker that advertises another name than the service URL's
            // adds the connection the lookups went through.
            if connections == "shared" {
                assert!((1..=2).contains(&tcp), "{s}");
            } else {
                assert!(tcp >= 4, "{s}");
            }
            assert!(s["msgs_per_sec"].as_f64().is_some_and(|r| r > 0.0), "{s}");
        }
    }
}

#[tokio::test]
async fn perf_produce_takes_a_name_a_send_timeout_an_access_mode_and_a_delay() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-perf-named");
    let args = [
        "perf",
        "produce",
        &topic,
        "-n",
        "3",
        "--size",
        "10",
        "--producer-name",
        "perf-named",
        "--send-timeout",
        "30",
        "--access-mode",
        "exclusive",
        "--delay",
        "1",
        "--json",
    ];
    let run = pulsar_wire(&url, &args).await;
    summary(&run.ok_lines(), "produce", 3, 10);
    let consume = [
        "consume", &topic, "-s", "s", "-t", "shared", "-p", "earliest", "-n", "3",
    ];
    let lines = pulsar_wire(&url, &consume).await.ok_lines();
    let names: Vec<_> = lines.iter().map(|l| l["producer_name"].clone()).collect();
    assert_eq!(names, ["perf-named"; 3], "{lines:?}");
}

#[tokio::test]
async fn perf_consume_takes_batch_index_acks_and_the_queue_sizes() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-perf-queues");
    let produce = [
        "perf", "produce", &topic, "-n", "300", "--size", "20", "--batch", "--json",
    ];
    summary(
        &pulsar_wire(&url, &produce).await.ok_lines(),
        "produce",
        300,
        20,
    );
    let consume = [
        "perf",
        "consume",
        &topic,
        "-s",
        "perf",
        "-t",
        "shared",
        "--position",
        "earliest",
        "-n",
        "300",
        "--batch-index-ack",
        "-q",
        "50",
        "--receiver-queue-size-across-partitions",
        "500",
        "--json",
    ];
    summary(
        &pulsar_wire(&url, &consume).await.ok_lines(),
        "consume",
        300,
        20,
    );
}

#[tokio::test]
async fn perf_consume_at_a_rate_receives_the_count_and_refuses_it_with_run() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-perf-consume-rate");
    let produce = [
        "perf", "produce", &topic, "-n", "20", "--size", "10", "--json",
    ];
    summary(
        &pulsar_wire(&url, &produce).await.ok_lines(),
        "produce",
        20,
        10,
    );
    let consume = [
        "perf",
        "consume",
        &topic,
        "-s",
        "s",
        "--position",
        "earliest",
        "-n",
        "20",
        "-r",
        "200",
        "--json",
    ];
    summary(
        &pulsar_wire(&url, &consume).await.ok_lines(),
        "consume",
        20,
        10,
    );
    let both = [
        "perf", "consume", &topic, "-s", "s", "-n", "1", "-r", "10", "--run", "2",
    ];
    crate::failures::assert_failed(&pulsar_wire(&url, &both).await, 2, "--run");
}

#[tokio::test]
async fn perf_produce_sends_the_payloads_of_a_file_in_turn() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-perf-payload-file");
    let dir = crate::common::TempDir::new("cli-payload-file");
    let file = dir.file("payloads.txt", "alpha|bb||c");
    let path = file.to_str().expect("utf-8 path");
    let produce = [
        "perf",
        "produce",
        &topic,
        "-n",
        "4",
        "--payload-file",
        path,
        "--payload-delimiter",
        "|",
        "--json",
    ];
    let lines = pulsar_wire(&url, &produce).await.ok_lines();
    let last = lines.last().expect("a summary");
    assert_eq!(last["count"], 4, "{lines:?}");
    assert_eq!(
        last["bytes"],
        5 + 2 + 1 + 5,
        "alpha, bb, c, alpha: {lines:?}"
    );
    let consume = ["consume", &topic, "-s", "s", "-p", "earliest", "-n", "4"];
    let got: Vec<String> = pulsar_wire(&url, &consume)
        .await
        .ok_lines()
        .iter()
        .map(|l| l["payload"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(got, ["alpha", "bb", "c", "alpha"]);
    let missing = [
        "perf",
        "produce",
        &topic,
        "-n",
        "1",
        "--payload-file",
        "/nonexistent/p",
    ];
    crate::failures::assert_failed(&pulsar_wire(&url, &missing).await, 1, "--payload-file");
}
