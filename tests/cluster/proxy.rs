//! Through the Pulsar proxy, with only its URL configured: lookups answer
//! `proxy_through_service_url`, so every connection goes to the proxy and
//! names the owning broker in CONNECT (`proxy_to_broker_url`); produce and
//! consume work, and a topic moved to the other broker is followed there,
//! still through the proxy. The client can reach nothing but the proxy (as
//! behind a firewall), and the test checks it never tried to: also not
//! when a broker names the new owner in CLOSE_PRODUCER / CLOSE_CONSUMER
//! (the extensible load manager does; see docs/cluster.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use pulsar_wire::Client;
use pulsar_wire::client::{BrokerAddress, BrokerStream, Connector};
use tokio::net::TcpStream;

use super::traffic::{LONG, Traffic, producer, shared};
use crate::common::acks::Fault;
use crate::common::cluster::Cluster;
use crate::common::{guard, guard_for, init_tracing, unique_topic};

/// A [`Connector`] that reaches `proxy` only, and counts attempts to dial
/// anything else.
#[derive(Debug, Clone)]
struct ProxyOnly {
    proxy: String,
    elsewhere: Arc<AtomicUsize>,
}

impl Connector for ProxyOnly {
    fn connect(
        &self,
        address: &BrokerAddress,
    ) -> BoxFuture<'static, std::io::Result<Box<dyn BrokerStream>>> {
        let (target, allowed) = (address.to_string(), address.to_string() == self.proxy);
        if !allowed {
            self.elsewhere.fetch_add(1, Ordering::SeqCst);
        }
        Box::pin(async move {
            if !allowed {
                let refused = std::io::ErrorKind::ConnectionRefused;
                return Err(std::io::Error::new(
                    refused,
                    format!("only the proxy, not {target}"),
                ));
            }
            let stream = TcpStream::connect(target).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn BrokerStream>)
        })
    }
}

#[tokio::test]
async fn through_the_proxy_alone_produce_consume_and_follow_a_move() {
    const TOTAL: u64 = 5_000;
    let Some(cluster) = Cluster::attach().await else {
        return;
    };
    let topic = unique_topic("proxy");
    cluster.place(&topic, 2).await;
    init_tracing();
    let proxy_only = ProxyOnly {
        proxy: cluster.proxy_url.trim_start_matches("pulsar://").to_owned(),
        elsewhere: Arc::default(),
    };
    let client = Client::builder()
        .service_url(&cluster.proxy_url)
        .connector(proxy_only.clone())
        .build()
        .await
        .expect("client");

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
    let producer = producer(&client, &topic).await;
    let mut traffic = Traffic::start(&client, &topic, producer, consumer, TOTAL);
    traffic.confirmed(TOTAL / 3).await;
    traffic.fault(Fault::Move);
    guard("move", cluster.place(&topic, 1)).await;
    guard_for("the rest consumed", LONG, traffic.finish("proxy")).await;

    let conn = client
        .lookup(&topic.parse().expect("topic"))
        .await
        .expect("lookup after the move");
    assert_eq!(conn.peer(), format!("{} via {proxy_addr}", broker_addr(1)));
    assert_eq!(
        proxy_only.elsewhere.load(Ordering::SeqCst),
        0,
        "dialled a broker past the proxy"
    );
    client.close().await;
}
