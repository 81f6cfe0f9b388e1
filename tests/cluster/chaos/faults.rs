//! The chaos run's randomness and faults: a seeded generator, which
//! messages are poison, a connector through fault proxies, and the admin
//! calls that move, unload and split bundles.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use pulsar_wire::Client;
use pulsar_wire::client::{BrokerAddress, BrokerStream, Connector};
use tokio::net::TcpStream;

use crate::common::admin::{rest_path, try_call};
use crate::common::cluster::{Cluster, namespace_of};
use crate::common::fault_proxy::FaultProxy;

/// One message in this many is poison (always nacked).
const POISON_ONE_IN: u64 = 200;

/// splitmix64: a small seeded generator, so a seed replays the same faults.
#[derive(Debug)]
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether message `n` of topic `topic` is poison in the run of `seed`.
pub(super) fn poison(seed: u64, topic: usize, n: u64) -> bool {
    mix(seed ^ ((topic as u64) << 40) ^ n) % POISON_ONE_IN == 0
}

/// A [`Connector`] that dials, for each broker (or proxy) address, the fault
/// proxy in front of it, so the run can cut connections anywhere.
#[derive(Debug, Clone)]
struct Faulty {
    routes: Arc<BTreeMap<String, SocketAddr>>,
}

/// Fault proxies in front of both brokers and the Pulsar proxy, and four
/// clients that connect through them: two to the Pulsar proxy, one to
/// each broker.
pub(super) async fn clients_through_fault_proxies(
    cluster: &Cluster,
) -> (Vec<FaultProxy>, Vec<Client>) {
    let mut routes = BTreeMap::new();
    let mut proxies = Vec::new();
    for url in [
        cluster.broker(1).service_url.clone(),
        cluster.broker(2).service_url.clone(),
        cluster.proxy_url.clone(),
    ] {
        let addr = url.trim_start_matches("pulsar://").to_owned();
        let proxy = FaultProxy::start(addr.parse().expect("an IP address")).await;
        routes.insert(addr, proxy.addr());
        proxies.push(proxy);
    }
    let connector = Faulty {
        routes: Arc::new(routes),
    };
    let urls = [
        &cluster.proxy_url,
        &cluster.broker(1).service_url,
        &cluster.proxy_url,
        &cluster.broker(2).service_url,
    ];
    let mut clients = Vec::new();
    for url in urls {
        clients.push(
            Client::builder()
                .service_url(url.clone())
                .connector(connector.clone())
                .build()
                .await
                .expect("client"),
        );
    }
    (proxies, clients)
}

impl Connector for Faulty {
    fn connect(
        &self,
        address: &BrokerAddress,
    ) -> BoxFuture<'static, std::io::Result<Box<dyn BrokerStream>>> {
        let target = self.routes.get(&address.to_string()).copied();
        let name = address.to_string();
        Box::pin(async move {
            let target = target.ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, format!("no route to {name}"))
            })?;
            let stream = TcpStream::connect(target).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn BrokerStream>)
        })
    }
}

/// Unloads `topic`'s bundle, to `destination` if given; errors (a broker
/// dying under the call) are part of the run.
pub(super) async fn move_bundle(cluster: &Cluster, topic: &str, destination: Option<&str>) {
    let admin_url = cluster.admin();
    let Ok(bundle) = bundle_of(admin_url, topic).await else {
        return;
    };
    let query = destination
        .map(|d| format!("?destinationBroker={d}"))
        .unwrap_or_default();
    let url = format!(
        "{admin_url}/admin/v2/namespaces/{}/{bundle}/unload{query}",
        namespace_of(topic)
    );
    let _ = try_call("PUT", &url, None).await;
}

/// Splits `topic`'s bundle and unloads the halves.
pub(super) async fn split(cluster: &Cluster, topic: &str) {
    let admin_url = cluster.admin();
    let Ok(bundle) = bundle_of(admin_url, topic).await else {
        return;
    };
    let url = format!(
        "{admin_url}/admin/v2/namespaces/{}/{bundle}/split?unload=true",
        namespace_of(topic)
    );
    let _ = try_call("PUT", &url, None).await;
}

/// Unloads `topic` alone.
pub(super) async fn unload_topic(cluster: &Cluster, topic: &str) {
    let url = format!("{}/admin/v2/{}/unload", cluster.admin(), rest_path(topic));
    let _ = try_call("PUT", &url, None).await;
}

async fn bundle_of(admin_url: &str, topic: &str) -> Result<String, String> {
    let url = format!("{admin_url}/lookup/v2/topic/{}/bundle", rest_path(topic));
    let answer = try_call("GET", &url, None).await?;
    match answer.status {
        200..300 => Ok(answer.body.trim().trim_matches('"').to_owned()),
        status => Err(format!("HTTP {status}")),
    }
}
