//! A connection that stops carrying bytes with its sockets still open (a
//! black hole: no RST, no FIN) is found dead by the client's keepalive,
//! and the producer and consumer carry on over a new connection; so they
//! do after reconnect attempts that are reset, closed mid-frame or
//! trickled (every frame in pieces).

use std::time::Duration;

use super::*;
use crate::common::broker::{BrokerKind, BrokerOptions, skip_unless};
use crate::common::fault_proxy::Plan;
use crate::common::unique_topic;

#[tokio::test]
async fn a_black_holed_connection_is_declared_dead_by_keepalive_and_the_handles_recover() {
    if skip_unless(
        BrokerKind::Lite,
        "needs a broker with a 1 s keepalive of its own, so the broker drops the \
         black-holed consumer quickly instead of dispatching to it",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start_with(BrokerOptions {
        keep_alive_secs: 1,
        liveness_timeout_secs: 1,
        ..BrokerOptions::default()
    })
    .await
    else {
        return;
    };
    let proxy = FaultProxy::start(broker.addr()).await;
    let topic = unique_topic("black-hole");
    // Request and send timeouts far beyond the hang guard: within it, only
    // the keepalive (500 ms) can find the dead connection.
    init_tracing();
    let client = Client::builder()
        .service_url(broker.service_url())
        .connector(proxy.connector())
        .keepalive_interval(Duration::from_millis(500))
        .operation_timeout(Duration::from_secs(600))
        .build()
        .await
        .expect("client");
    let producer = client
        .producer(&topic)
        .send_timeout(Duration::from_secs(600))
        .create()
        .await
        .expect("producer");
    let mut consumer = fresh_consumer(&client, &topic, "hole").await;
    guard("before", async {
        producer
            .send(body(0))
            .await
            .expect("queued")
            .await
            .expect("stored");
        let m = consumer.receive().await.expect("receive");
        assert_eq!(number(m.payload()), Some(0));
        consumer.ack(&m).await.expect("ack");
    })
    .await;
    assert_eq!(proxy.accepted(), 1, "one connection so far");

    proxy.black_hole_all();
    guard("through the black hole", async {
        // Sent into the black hole; resent on the new connection.
        let receipt = producer.send(body(1)).await.expect("queued");
        receipt
            .await
            .expect("stored after the keepalive found the hole");
        // Message 0 may come again: its ack may have gone into the hole.
        loop {
            let m = consumer.receive().await.expect("receive after recovery");
            consumer.ack(&m).await.expect("ack");
            match number(m.payload()) {
                Some(1) => break,
                Some(0) => continue,
                other => panic!("unexpected message {other:?}"),
            }
        }
    })
    .await;
    assert!(
        proxy.accepted() >= 2,
        "a new connection: {}",
        proxy.accepted()
    );
    producer.close().await.expect("close producer");
    consumer.close().await.expect("close consumer");
}

#[tokio::test]
async fn reconnects_get_past_a_reset_a_mid_frame_close_and_a_trickling_link() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let proxy = FaultProxy::start(broker.addr()).await;
    let topic = unique_topic("faults");
    let client = proxied(&broker, &proxy, Duration::from_secs(30)).await;
    let producer = client.producer(&topic).create().await.expect("producer");
    let mut consumer = fresh_consumer(&client, &topic, "faults").await;
    // The next connections: reset before any byte, then closed 20 bytes
    // into the broker's answer (CONNECTED is longer: mid-frame), then
    // every later one trickled through 7 bytes at a time.
    proxy.push_plan(Plan::Reset);
    proxy.push_plan(Plan::CloseAfter(20));
    proxy.set_default(Plan::Trickle(7));
    proxy.cut_all();
    guard("through the faulty reconnects", async {
        for i in 0..10 {
            producer
                .send(body(i))
                .await
                .expect("queued")
                .await
                .expect("stored");
        }
        let mut seen = std::collections::BTreeSet::new();
        while seen.len() < 10 {
            let m = consumer.receive().await.expect("receive");
            consumer.ack(&m).await.expect("ack");
            seen.insert(number(m.payload()).expect("a test payload"));
        }
    })
    .await;
    assert!(
        proxy.accepted() >= 4,
        "one good, one reset, one cut mid-frame, then trickled ones: {}",
        proxy.accepted()
    );
    producer.close().await.expect("close producer");
    consumer.close().await.expect("close consumer");
}
