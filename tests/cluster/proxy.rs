//! Through the Pulsar proxy, with only its URL configured: lookups answer
//! `proxy_through_service_url`, so every connection goes to the proxy and
//! names the owning broker in CONNECT (`proxy_to_broker_url`); produce and
//! consume work, and a topic moved to the other broker is followed there,
//! still through the proxy.

use super::traffic::{LONG, Traffic, client, producer, shared};
use crate::common::cluster::Cluster;
use crate::common::{guard, guard_for, unique_topic};

#[tokio::test]
async fn through_the_proxy_alone_produce_consume_and_follow_a_move() {
    const TOTAL: u64 = 5_000;
    let Some(cluster) = Cluster::attach().await else {
        return;
    };
    let topic = unique_topic("proxy");
    cluster.place(&topic, 2).await;
    let client = client(&cluster.proxy_url).await;

    // The connection for the topic: to broker 2, through the proxy.
    let proxy_addr = cluster.proxy_url.trim_start_matches("pulsar://");
    let broker_addr = |n: usize| {
        cluster
            .broker(n)
            .service_url
            .trim_start_matches("pulsar://")
            .to_owned()
    };
    let conn = guard(
        "lookup through the proxy",
        client.lookup(&topic.parse().expect("topic")),
    )
    .await
    .expect("lookup");
    assert_eq!(conn.peer(), format!("{} via {proxy_addr}", broker_addr(2)));

    let consumer = shared(&client, &topic, "s").await;
    let mut traffic = Traffic::start(producer(&client, &topic).await, consumer, TOTAL);
    traffic.confirmed(TOTAL / 3).await;
    guard("move", cluster.place(&topic, 1)).await;
    guard_for("the rest consumed", LONG, traffic.finish("proxy")).await;

    let conn = client
        .lookup(&topic.parse().expect("topic"))
        .await
        .expect("lookup after the move");
    assert_eq!(conn.peer(), format!("{} via {proxy_addr}", broker_addr(1)));
    client.close().await;
}
