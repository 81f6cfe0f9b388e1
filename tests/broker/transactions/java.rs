//! Interop with the Java client of the broker's version: it commits a
//! transaction that pulsar-wire consumes, and consumes one that
//! pulsar-wire commits; neither sees the other's aborted transaction.
//!
//! The Java side is `tests/java/TxnPeer.java`, run as a single-file source
//! program on the broker's classpath (`scripts/apache-pulsar classpath`).

use std::collections::BTreeSet;

use pulsar_wire::consumer::{InitialPosition, SubscriptionType};

use super::{receive_until, set};
use crate::common::txn::TxnBroker;
use crate::common::{admin, guard_for, unique_topic};

const N: usize = 20;

/// Runs `TxnPeer` with `args`; returns the lines it printed that start
/// with `GOT ` (without it), after checking it printed `DONE` and succeeded.
async fn java_peer(args: &[&str]) -> Vec<String> {
    let mut peer = crate::common::java::peer("TxnPeer", args).await;
    let out = guard_for(
        "the Java client",
        std::time::Duration::from_secs(180),
        peer.output(),
    )
    .await
    .expect("run java");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "DONE"),
        "the Java client failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("GOT ").map(str::to_owned))
        .collect()
}

fn numbered(prefix: &str) -> BTreeSet<String> {
    (0..N).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test]
async fn a_transaction_the_java_client_commits_is_consumed_and_its_aborted_one_is_not() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-from-java");
    let mut consumer = client
        .consumer(&topic, "sub")
        .subscription_type(SubscriptionType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe");
    java_peer(&["produce", &broker.service_url, &topic, &N.to_string()]).await;
    let seen = receive_until(&mut consumer, "end").await;
    assert_eq!(seen.len(), N, "{seen:?}");
    assert_eq!(set(seen), numbered("java-committed"));
}

#[tokio::test]
async fn the_java_client_consumes_a_committed_transaction_and_never_an_aborted_one() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-to-java");
    let producer = client.producer(&topic).create().await.expect("producer");
    for (outcome, commit) in [("rust-committed", true), ("rust-aborted", false)] {
        let txn = client.transaction().begin().await.expect("begin");
        for payload in numbered(outcome) {
            drop(producer.send_in(&txn, payload).await.expect("send in txn"));
        }
        match commit {
            true => txn.commit().await.expect("commit"),
            false => txn.abort().await.expect("abort"),
        }
    }
    let receipt = producer.send("end").await.expect("queue");
    receipt.await.expect("stored");

    let got = java_peer(&["consume", &broker.service_url, &topic, "java"]).await;
    assert_eq!(got.len(), N, "{got:?}");
    assert_eq!(set(got), numbered("rust-committed"));
    // The Java client acked them in a transaction it committed.
    assert_eq!(
        admin::subscription_backlog(&broker.admin_url, &topic, "java").await,
        0
    );
}
