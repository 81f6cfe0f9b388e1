//! `consume --outcome nack` on Exclusive: every nacked message comes back,
//! in whole passes over the topic (the rewind waits until the received
//! messages are printed).

use crate::common::broker::{BrokerKind, TestBroker, skip_unless};
use crate::common::unique_topic;
use crate::pulsar_wire;

#[tokio::test]
async fn nacking_everything_on_exclusive_gives_whole_passes() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite ignores REDELIVER_UNACKNOWLEDGED_MESSAGES on Exclusive",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-nack-passes");
    let texts: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    let mut produce = vec!["produce", topic.as_str()];
    for t in &texts {
        produce.extend(["-m", t.as_str()]);
    }
    pulsar_wire(&url, &produce).await.ok_lines();
    let lines = pulsar_wire(
        &url,
        &[
            "consume",
            &topic,
            "-s",
            "sub",
            "-t",
            "exclusive",
            "--position",
            "earliest",
            "--outcome",
            "nack",
            "-n",
            "30",
        ],
    )
    .await
    .ok_lines();
    let seen: Vec<&str> = lines
        .iter()
        .map(|l| l["payload"].as_str().expect("payload"))
        .collect();
    let three_passes: Vec<&str> = (0..3)
        .flat_map(|_| texts.iter().map(String::as_str))
        .collect();
    assert_eq!(seen, three_passes);
}
