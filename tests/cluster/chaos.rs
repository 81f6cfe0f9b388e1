//! The chaos run (`scripts/chaos`): producers and Shared consumers on
//! several topics for a given time while, at random (seeded), bundles are
//! unloaded, moved and split, topics unloaded, connections cut and brokers
//! killed with SIGKILL and started again. At the end every confirmed message
//! is accounted for: consumed by the application, or in the dead-letter
//! topic (the application nacks a seeded few "poison" messages until they
//! go there). Lost must be 0; duplicates are counted.
//!
//! `CHAOS_SECONDS` (default 120) and `CHAOS_SEED` (default: from the clock,
//! printed) configure it. A seed fixes the sequence of faults and the
//! progress at which each one comes; the interleaving with the brokers'
//! own timing differs from run to run. Faults come with progress (every
//! few thousand confirmed messages), not on a timer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use pulsar_wire::Client;
use pulsar_wire::client::{BrokerAddress, BrokerStream, Connector};
use pulsar_wire::consumer::{Consumer, DeadLetterPolicy, InitialPosition, SubscriptionType};
use pulsar_wire::producer::{Producer, SendReceipt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::moves::fresh_namespace;
use super::traffic::{SEND_TIMEOUT, body, number};
use crate::common::admin::{rest_path, try_call};
use crate::common::cluster::{Cluster, namespace_of};
use crate::common::fault_proxy::FaultProxy;
use crate::common::init_tracing;

const TOPICS: usize = 4;
/// Deliveries before a poison message goes to the dead-letter topic.
const MAX_REDELIVERIES: u32 = 3;
/// One message in this many is poison (always nacked).
const POISON_ONE_IN: u64 = 200;
/// Sends a producer keeps waiting for receipts.
const IN_FLIGHT: usize = 200;
/// Longest the end of the run waits without any message accounted for.
const IDLE: Duration = Duration::from_secs(120);
/// Most bundle splits in one run (each one adds a bundle for good).
const MAX_SPLITS: u32 = 3;

/// splitmix64: a small seeded generator, so a seed replays the same faults.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn poison(seed: u64, topic: usize, n: u64) -> bool {
    mix(seed ^ ((topic as u64) << 40) ^ n) % POISON_ONE_IN == 0
}

/// A [`Connector`] that dials, for each broker (or proxy) address, the fault
/// proxy in front of it, so the run can cut connections anywhere.
#[derive(Debug, Clone)]
struct Faulty {
    routes: Arc<BTreeMap<String, SocketAddr>>,
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

/// What happened to the messages of one topic.
#[derive(Debug, Default)]
struct Ledger {
    /// Deliveries to the application of each (non-poison) message.
    consumed: Vec<u32>,
    /// Copies of each message read from the dead-letter topic.
    dead: Vec<u32>,
    /// Messages consumed or dead-lettered at least once.
    accounted: u64,
}

impl Ledger {
    fn bump(list: &mut Vec<u32>, n: u64) -> bool {
        let i = n as usize;
        if list.len() <= i {
            list.resize(i + 1, 0);
        }
        list[i] += 1;
        list[i] == 1
    }

    fn seen(list: &[u32], n: u64) -> bool {
        list.get(n as usize).is_some_and(|c| *c > 0)
    }

    /// Records one delivery (or one dead letter) of `n`.
    fn record(&mut self, n: u64, dead: bool) {
        let other_seen = if dead {
            Self::seen(&self.consumed, n)
        } else {
            Self::seen(&self.dead, n)
        };
        let first = Self::bump(
            if dead {
                &mut self.dead
            } else {
                &mut self.consumed
            },
            n,
        );
        if first && !other_seen {
            self.accounted += 1;
        }
    }
}

#[derive(Debug)]
struct Books {
    ledgers: Vec<Mutex<Ledger>>,
    /// Total accounted for, across topics (for waiting on progress).
    accounted: watch::Sender<u64>,
}

impl Books {
    fn record(&self, topic: usize, n: u64, dead: bool) {
        let first = {
            let mut ledger = self.ledgers[topic].lock().expect("ledger");
            let before = ledger.accounted;
            ledger.record(n, dead);
            ledger.accounted > before
        };
        if first {
            self.accounted.send_modify(|a| *a += 1);
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

#[tokio::test]
#[ignore = "minutes long: scripts/chaos runs it on the cluster"]
async fn chaos() {
    let Some(mut cluster) = Cluster::attach().await else {
        return;
    };
    init_tracing();
    let seconds = env_u64("CHAOS_SECONDS").unwrap_or(120);
    let seed = env_u64("CHAOS_SEED").unwrap_or_else(|| {
        let now = std::time::UNIX_EPOCH
            .elapsed()
            .map_or(0, |d| d.as_nanos() as u64);
        mix(now) % 1_000_000
    });
    eprintln!(
        "chaos: seed {seed}, {seconds} s (CHAOS_SEED={seed} CHAOS_SECONDS={seconds} scripts/chaos)"
    );
    let mut rng = Rng(seed);

    // Fault proxies in front of both brokers and the Pulsar proxy.
    let mut routes = BTreeMap::new();
    let mut faults = Vec::new();
    for url in [
        cluster.broker(1).service_url.clone(),
        cluster.broker(2).service_url.clone(),
        cluster.proxy_url.clone(),
    ] {
        let addr = url.trim_start_matches("pulsar://").to_owned();
        let proxy = FaultProxy::start(addr.parse().expect("an IP address")).await;
        routes.insert(addr, proxy.addr());
        faults.push(proxy);
    }
    let connector = Faulty {
        routes: Arc::new(routes),
    };
    // Half the clients go through the Pulsar proxy, half straight to a broker.
    let urls = [
        cluster.proxy_url.clone(),
        cluster.broker(1).service_url.clone(),
        cluster.proxy_url.clone(),
        cluster.broker(2).service_url.clone(),
    ];
    let mut clients = Vec::new();
    for url in &urls {
        clients.push(
            Client::builder()
                .service_url(url)
                .connector(connector.clone())
                .build()
                .await
                .expect("client"),
        );
    }

    let namespace = fresh_namespace(&cluster, "chaos").await;
    let topics: Vec<String> = (0..TOPICS)
        .map(|i| format!("persistent://{namespace}/chaos-{i}"))
        .collect();
    let books = Arc::new(Books {
        ledgers: (0..TOPICS).map(|_| Mutex::default()).collect(),
        accounted: watch::channel(0).0,
    });

    // Per topic: a dead-letter reader, two consumers (clients via the proxy
    // and direct), one producer.
    let mut consumers = Vec::new();
    for (t, topic) in topics.iter().enumerate() {
        let dlq = format!("{topic}-s-DLQ");
        let reader = clients[t % clients.len()]
            .consumer(&dlq, "keep")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("dead-letter reader");
        consumers.push(tokio::spawn(read_dead_letters(reader, books.clone(), t)));
        for c in 0..2 {
            let consumer = clients[(t + c) % clients.len()]
                .consumer(topic, "s")
                .subscription_type(SubscriptionType::Shared)
                .initial_position(InitialPosition::Earliest)
                .dead_letter_policy(DeadLetterPolicy {
                    initial_subscription_name: Some("keep".into()),
                    ..DeadLetterPolicy::after_redeliveries(MAX_REDELIVERIES)
                })
                .subscribe()
                .await
                .expect("subscribe");
            consumers.push(tokio::spawn(consume(consumer, books.clone(), t, seed)));
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let (progress, confirmed) = watch::channel(0u64);
    let progress = Arc::new(progress);
    let mut producers = Vec::new();
    for (t, topic) in topics.iter().enumerate() {
        let producer = clients[(t + 2) % clients.len()]
            .producer(topic)
            .send_timeout(SEND_TIMEOUT)
            .create()
            .await
            .expect("producer");
        producers.push(tokio::spawn(produce(producer, deadline, progress.clone())));
    }

    // The faults, one every few thousand confirmed messages until the end.
    let mut faults_done: BTreeMap<&str, u32> = BTreeMap::new();
    let mut splits = 0;
    let mut dead: Option<usize> = None;
    let mut confirmed_rx = confirmed;
    loop {
        let next = *confirmed_rx.borrow() + 1_000 + rng.below(4_000);
        let reached = tokio::time::timeout_at(deadline, confirmed_rx.wait_for(|c| *c >= next))
            .await
            .is_ok_and(|r| r.is_ok());
        if !reached {
            break;
        }
        let fault = if let Some(n) = dead.take() {
            cluster.start_broker(n).await;
            "restart broker"
        } else {
            let topic = &topics[rng.below(TOPICS as u64) as usize];
            match rng.below(100) {
                0..25 => {
                    let to = rng.below(2) as usize + 1;
                    move_bundle(&cluster, topic, Some(&cluster.broker(to).id)).await;
                    "move bundle"
                }
                25..40 => {
                    move_bundle(&cluster, topic, None).await;
                    "unload bundle"
                }
                40..45 if splits < MAX_SPLITS => {
                    splits += 1;
                    split(&cluster, topic).await;
                    "split bundle"
                }
                40..60 => {
                    let url = format!("{}/admin/v2/{}/unload", cluster.admin(), rest_path(topic));
                    let _ = try_call("PUT", &url, None).await;
                    "unload topic"
                }
                60..85 => {
                    faults[rng.below(faults.len() as u64) as usize].cut_all();
                    "cut connections"
                }
                _ => {
                    let n = rng.below(2) as usize + 1;
                    cluster.kill_broker(n).await;
                    dead = Some(n);
                    "kill -9 broker"
                }
            }
        };
        eprintln!("chaos: {fault} at {} confirmed", *confirmed_rx.borrow());
        *faults_done.entry(fault).or_default() += 1;
    }
    if let Some(n) = dead {
        cluster.start_broker(n).await;
        *faults_done.entry("restart broker").or_default() += 1;
    }

    // The end: every confirmed message consumed or dead-lettered.
    let mut sent = Vec::new();
    for producer in producers {
        sent.push(producer.await.expect("producer task"));
    }
    let total: u64 = sent.iter().map(|confirmed| confirmed.len() as u64).sum();
    let mut accounted = books.accounted.subscribe();
    loop {
        let now = *accounted.borrow_and_update();
        if now >= total {
            break;
        }
        if tokio::time::timeout(IDLE, accounted.changed())
            .await
            .is_err()
        {
            break;
        }
    }
    for consumer in consumers {
        consumer.abort();
    }
    for client in &clients {
        client.close().await;
    }

    let (mut lost, mut duplicates, mut dead_copies, mut in_dlq, mut poisoned) = (0, 0, 0, 0, 0);
    let (mut consumed, mut both) = (0, 0);
    let mut lost_examples = Vec::new();
    for (t, confirmed) in sent.iter().enumerate() {
        let ledger = books.ledgers[t].lock().expect("ledger");
        for &n in confirmed {
            let times = ledger.consumed.get(n as usize).copied().unwrap_or(0);
            let copies = ledger.dead.get(n as usize).copied().unwrap_or(0);
            poisoned += u64::from(poison(seed, t, n));
            consumed += u64::from(times > 0);
            in_dlq += u64::from(copies > 0);
            both += u64::from(times > 0 && copies > 0);
            duplicates += u64::from(times.saturating_sub(1));
            dead_copies += u64::from(copies.saturating_sub(1));
            if times == 0 && copies == 0 {
                lost += 1;
                if lost_examples.len() < 10 {
                    lost_examples.push(format!("{}:{n}", topics[t]));
                }
            }
        }
    }
    let faults_line: Vec<String> = faults_done
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    eprintln!(
        "chaos result: seed {seed}, {seconds} s, {TOPICS} topics; confirmed {total}, consumed {consumed}, \
         in the DLQ {in_dlq} (poison {poisoned}; consumed before they went there {both}), \
         lost {lost}, duplicates {duplicates} (+{dead_copies} extra DLQ copies); faults: {}",
        faults_line.join(", ")
    );
    assert_eq!(lost, 0, "confirmed messages lost: {lost_examples:?}");
}

/// Sends numbered messages until `deadline`; returns the confirmed numbers.
async fn produce(
    producer: Producer,
    deadline: tokio::time::Instant,
    progress: Arc<watch::Sender<u64>>,
) -> Vec<u64> {
    let mut pending: std::collections::VecDeque<(u64, SendReceipt)> = Default::default();
    let mut confirmed = Vec::new();
    let mut n = 0;
    loop {
        let more = tokio::time::Instant::now() < deadline;
        if more {
            pending.push_back((n, producer.send(body(n)).await.expect("queued")));
            n += 1;
        }
        while pending.len() > IN_FLIGHT || (!more && !pending.is_empty()) {
            let (i, receipt) = pending.pop_front().expect("non-empty");
            receipt.await.unwrap_or_else(|e| panic!("send {i}: {e}"));
            confirmed.push(i);
            progress.send_modify(|c| *c += 1);
        }
        if !more {
            break;
        }
    }
    producer.close().await.expect("close producer");
    confirmed
}

/// The application: acks every message except poison ones, which it nacks
/// until the dead-letter policy takes them.
async fn consume(mut consumer: Consumer, books: Arc<Books>, topic: usize, seed: u64) {
    while let Ok(m) = consumer.receive().await {
        let n = number(m.payload());
        if poison(seed, topic, n) {
            let _ = consumer.nack(&m);
        } else {
            books.record(topic, n, false);
            let _ = consumer.ack(&m).await;
        }
    }
}

async fn read_dead_letters(mut reader: Consumer, books: Arc<Books>, topic: usize) {
    while let Ok(m) = reader.receive().await {
        books.record(topic, number(m.payload()), true);
        let _ = reader.ack(&m).await;
    }
}

/// Unloads `topic`'s bundle, to `destination` if given; errors (a broker
/// dying under the call) are part of the run.
async fn move_bundle(cluster: &Cluster, topic: &str, destination: Option<&str>) {
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

async fn split(cluster: &Cluster, topic: &str) {
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

async fn bundle_of(admin_url: &str, topic: &str) -> Result<String, String> {
    let url = format!("{admin_url}/lookup/v2/topic/{}/bundle", rest_path(topic));
    let answer = try_call("GET", &url, None).await?;
    match answer.status {
        200..300 => Ok(answer.body.trim().trim_matches('"').to_owned()),
        status => Err(format!("HTTP {status}")),
    }
}
