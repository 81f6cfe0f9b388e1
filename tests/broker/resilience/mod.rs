//! Broker faults against a real broker: connections cut by the fault proxy
//! during produce and consume, a black-holed connection found dead by the
//! keepalive, the broker killed with SIGKILL and restarted on the same
//! port and data, and the topic unloaded under a producer. Each test checks what the application was promised: every
//! confirmed send is in the topic, in the producer's order, and every
//! message is delivered at least once. Shared subscriptions throughout
//! (pulsar-lite duplicates dispatch on Exclusive; see test-brokers.md).

mod black_hole;
mod cuts;
mod kill;
mod unloads;

use std::collections::HashSet;
use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::consumer::{Consumer, InitialPosition, SubscriptionType};

use crate::common::broker::TestBroker;
use crate::common::fault_proxy::FaultProxy;
use crate::common::{Progress, guard, guard_progress, init_tracing};

/// A client that talks to `broker` only through `proxy`.
async fn proxied(broker: &TestBroker, proxy: &FaultProxy, keepalive: Duration) -> Client {
    init_tracing();
    Client::builder()
        .service_url(broker.service_url())
        .connector(proxy.connector())
        .keepalive_interval(keepalive)
        .build()
        .await
        .expect("client through the proxy")
}

/// A client straight to `broker`.
async fn direct(broker: &TestBroker) -> Client {
    init_tracing();
    crate::common::broker::client(broker).await
}

/// A Shared consumer of `topic` on a new subscription from the start.
async fn fresh_consumer(client: &Client, topic: &str, subscription: &str) -> Consumer {
    crate::common::shared_from_start(client, topic, subscription).await
}

/// Sends [`body`]`(0..total)` and waits for every receipt.
async fn produce_bodies(producer: &pulsar_wire::producer::Producer, total: u64) {
    let progress = Progress::default();
    guard_progress("produce", &progress, async {
        let mut receipts = Vec::new();
        for i in 0..total {
            receipts.push(producer.send(body(i)).await.expect("queued"));
            progress.tick();
        }
        for receipt in receipts {
            receipt.await.expect("stored");
            progress.tick();
        }
    })
    .await;
}

/// The payload of message `i` (what the tests send).
fn body(i: u64) -> String {
    format!("m-{i}")
}

/// Message number of a payload [`body`] made; `None` for anything else.
fn number(payload: &[u8]) -> Option<u64> {
    std::str::from_utf8(payload)
        .ok()?
        .strip_prefix("m-")?
        .parse()
        .ok()
}

/// The end marker a direct producer sends after every confirmed message.
const END: &str = "end";

/// A producer of `topic` with room for 2,000 pending sends, so that
/// [`produce_through_faults`] never waits for room.
async fn roomy_producer(client: &Client, topic: &str) -> pulsar_wire::producer::Producer {
    client
        .producer(topic)
        .max_pending_messages(2_000)
        .create()
        .await
        .expect("producer")
}

/// Sends [`body`]`(0..total)` with up to 1,000 sends in flight and calls
/// `fault` after every `total / faults` sends, while many are in flight;
/// returns the numbers confirmed, in the order their receipts came.
async fn produce_through_faults(
    producer: &pulsar_wire::producer::Producer,
    total: u64,
    faults: u64,
    mut fault: impl FnMut(),
) -> Vec<u64> {
    let mut receipts = std::collections::VecDeque::new();
    let mut confirmed = Vec::new();
    let progress = Progress::default();
    guard_progress("produce through the faults", &progress, async {
        for i in 0..total {
            let receipt = producer.send(body(i)).await.expect("queued");
            receipts.push_back((i, receipt));
            progress.tick();
            if (i + 1) % (total / faults) == 0 {
                fault();
            }
            while receipts.len() > 1_000 {
                let (n, receipt) = receipts.pop_front().expect("non-empty");
                receipt.await.unwrap_or_else(|e| panic!("send {n}: {e}"));
                confirmed.push(n);
                progress.tick();
            }
        }
        for (n, receipt) in receipts.drain(..) {
            receipt.await.unwrap_or_else(|e| panic!("send {n}: {e}"));
            confirmed.push(n);
            progress.tick();
        }
    })
    .await;
    confirmed
}

/// Sends the [`END`] marker to `topic` from a producer of its own, and
/// waits until it is stored.
async fn send_end_marker(client: &Client, topic: &str) {
    let end = client.producer(topic).create().await.expect("end producer");
    end.send(END)
        .await
        .expect("queued")
        .await
        .expect("end marker stored");
    end.close().await.expect("close");
}

/// Reads `topic` from the start on a new subscription until the [`END`]
/// marker; returns the message numbers in the order they came (duplicates
/// included).
async fn read_back(client: &Client, topic: &str) -> Vec<u64> {
    let mut consumer = fresh_consumer(client, topic, "read-back").await;
    let mut seen = Vec::new();
    let progress = Progress::default();
    guard_progress("read back until the end marker", &progress, async {
        loop {
            let m = consumer.receive().await.expect("receive");
            progress.tick();
            consumer.ack(&m).await.expect("ack");
            if m.payload().as_ref() == END.as_bytes() {
                break;
            }
            seen.push(number(m.payload()).expect("a test payload"));
        }
    })
    .await;
    consumer.close().await.expect("close");
    seen
}

/// Checks that every number in `confirmed` is in `read`, and that the
/// first time each number appears, they appear in increasing order (the
/// producer's order; resends may add later duplicates). Returns how many
/// duplicates `read` holds.
fn check_all_there_in_order(confirmed: &[u64], read: &[u64]) -> usize {
    let mut first_seen = HashSet::new();
    let mut order = Vec::new();
    for &n in read {
        if first_seen.insert(n) {
            order.push(n);
        }
    }
    let missing: Vec<u64> = confirmed
        .iter()
        .copied()
        .filter(|n| !first_seen.contains(n))
        .take(20)
        .collect();
    assert!(
        missing.is_empty(),
        "confirmed messages missing from the topic (first 20): {missing:?}"
    );
    if let Some(pair) = order.windows(2).find(|w| w[0] >= w[1]) {
        panic!(
            "out of the producer's order: {} came before {}",
            pair[0], pair[1]
        );
    }
    read.len() - order.len()
}
