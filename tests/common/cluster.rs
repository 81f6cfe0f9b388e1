//! The local Apache Pulsar cluster the cluster tests run on: two brokers,
//! ZooKeeper, a bookie and the Pulsar proxy, started once for the whole run
//! by `scripts/apache-pulsar cluster start DIR` (its `DIR/env` exported).
//!
//! Tests take turns ([`Cluster::attach`] holds a process-wide lock): they
//! move bundles and kill brokers, which would disturb each other. A test
//! that killed a broker and did not start it again (it failed half-way)
//! gets it started again when its [`Cluster`] is dropped, so the next test
//! finds both brokers.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use tokio::sync::{Mutex, MutexGuard};

use super::admin;

/// One broker of the cluster.
#[derive(Debug, Clone)]
pub struct Broker {
    /// `pulsar://127.0.0.1:PORT`.
    pub service_url: String,
    /// `http://127.0.0.1:WEBPORT`.
    pub admin_url: String,
    /// The broker id the admin API uses: `127.0.0.1:WEBPORT`.
    pub id: String,
}

/// The running cluster, for one test at a time.
#[derive(Debug)]
pub struct Cluster {
    brokers: [Broker; 2],
    /// `pulsar://` URL of the Pulsar proxy.
    pub proxy_url: String,
    dir: PathBuf,
    alive: [bool; 2],
    _turn: MutexGuard<'static, ()>,
}

static TURN: Mutex<()> = Mutex::const_new(());

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} missing from the cluster's env"))
}

impl Cluster {
    /// The cluster of this run, or `None` (printing `SKIPPED` and why) when
    /// no cluster env is exported. Waits for the other tests' turns.
    pub async fn attach() -> Option<Self> {
        if std::env::var_os("PULSAR_CLUSTER_DIR").is_none() {
            let test = std::thread::current().name().unwrap_or("test").to_owned();
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: needs the local Apache Pulsar cluster \
                 (scripts/apache-pulsar cluster start DIR, then export DIR/env)"
            );
            return None;
        }
        let turn = TURN.lock().await;
        let broker = |service: &str, admin: &str| {
            let admin_url = var(admin);
            Broker {
                service_url: var(service),
                id: admin_url.trim_start_matches("http://").to_owned(),
                admin_url,
            }
        };
        Some(Self {
            brokers: [
                broker("PULSAR_SERVICE_URL", "PULSAR_ADMIN_URL"),
                broker("PULSAR_SERVICE_URL_2", "PULSAR_ADMIN_URL_2"),
            ],
            proxy_url: var("PULSAR_PROXY_URL"),
            dir: PathBuf::from(var("PULSAR_CLUSTER_DIR")),
            alive: [true, true],
            _turn: turn,
        })
    }

    /// The brokers' load manager (`PULSAR_CLUSTER_LOAD_MANAGER`): `modular`
    /// (Pulsar's default) or `extensible`.
    pub fn load_manager(&self) -> String {
        std::env::var("PULSAR_CLUSTER_LOAD_MANAGER").unwrap_or_else(|_| "modular".into())
    }

    /// Broker `n` (1 or 2).
    pub fn broker(&self, n: usize) -> &Broker {
        &self.brokers[n - 1]
    }

    /// The other broker's number.
    pub fn other(n: usize) -> usize {
        3 - n
    }

    /// Which broker (1 or 2) `url` (`pulsar://host:port` or `host:port`) is.
    pub fn which(&self, url: &str) -> usize {
        let addr = url.trim_start_matches("pulsar://");
        self.brokers
            .iter()
            .position(|b| b.service_url.trim_start_matches("pulsar://") == addr)
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("{url} is neither broker of the cluster"))
    }

    /// Which broker (1 or 2) has the broker id `id` (`host:webport`).
    pub fn which_admin(&self, id: &str) -> usize {
        self.brokers
            .iter()
            .position(|b| b.id == id)
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("{id} is neither broker of the cluster"))
    }

    /// The admin URL of a broker that is running.
    pub fn admin(&self) -> &str {
        let i = self.alive.iter().position(|a| *a).expect("a live broker");
        &self.brokers[i].admin_url
    }

    /// Which broker owns `topic` (a lookup: assigns an unowned bundle).
    pub async fn owner(&self, topic: &str) -> usize {
        self.which(&admin::topic_owner(self.admin(), topic).await)
    }

    /// Moves `topic`'s bundle to broker `n`: unloads it with `n` as the
    /// destination, then looks the topic up so that `n` takes it. Returns
    /// the bundle range.
    ///
    /// The destination is a hint the leader keeps per bundle range and
    /// uses once; a lookup racing the unload (a handle reconnecting, a
    /// split bundle being assigned) can take it first, so it unloads again
    /// until [`admin::HANDOVER_DEADLINE`] has passed.
    pub async fn place(&self, topic: &str, n: usize) -> String {
        let admin_url = self.admin();
        let namespace = namespace_of(topic);
        let mut owners = Vec::new();
        let end = tokio::time::Instant::now() + admin::HANDOVER_DEADLINE;
        while tokio::time::Instant::now() < end {
            let bundle = admin::topic_bundle(admin_url, topic).await;
            if self.owner(topic).await == n {
                return bundle;
            }
            admin::unload_bundle(admin_url, &namespace, &bundle, Some(&self.broker(n).id)).await;
            let owner = self.owner(topic).await;
            if owner == n {
                return bundle;
            }
            owners.push(owner);
        }
        panic!(
            "{topic} should be on broker {n}; after {} unloads in {:?} it was on {owners:?}",
            owners.len(),
            admin::HANDOVER_DEADLINE
        );
    }

    /// Splits `topic`'s bundle in two at its middle, unloads the half that
    /// holds `topic`, and returns the broker that owns `topic` next.
    ///
    /// The broker could unload both halves itself (`split?unload=true`),
    /// but it does that in the background after it answers, and an admin
    /// call about a half meanwhile fails ("is being unloaded"). So the
    /// split keeps the halves where they are, and the unload here returns
    /// once the half is released. Both go through the owner, which knows
    /// the new halves as soon as it answers the split.
    pub async fn split(&self, topic: &str) -> usize {
        let owner = &self.broker(self.owner(topic).await).admin_url;
        let namespace = namespace_of(topic);
        let bundle = admin::topic_bundle(owner, topic).await;
        admin::split_bundle(owner, &namespace, &bundle).await;
        let half = admin::topic_bundle(owner, topic).await;
        assert_ne!(half, bundle, "{topic}'s bundle after its split");
        admin::unload_bundle(owner, &namespace, &half, None).await;
        self.owner(topic).await
    }

    /// `kill -9` broker `n` (through the cluster script).
    pub async fn kill_broker(&mut self, n: usize) {
        self.script("kill-broker", n).await;
        self.alive[n - 1] = false;
    }

    /// Starts broker `n` again on its ports; returns once it is ready.
    pub async fn start_broker(&mut self, n: usize) {
        self.script("start-broker", n).await;
        self.alive[n - 1] = true;
    }

    async fn script(&self, command: &str, n: usize) {
        let status = tokio::process::Command::new(script_path())
            .args(["cluster", command])
            .arg(&self.dir)
            .arg(n.to_string())
            .status()
            .await
            .expect("run scripts/apache-pulsar");
        assert!(status.success(), "cluster {command} {n}: {status}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (i, alive) in self.alive.iter().enumerate() {
            if !alive {
                let _ = Command::new(script_path())
                    .args(["cluster", "start-broker"])
                    .arg(&self.dir)
                    .arg((i + 1).to_string())
                    .status();
            }
        }
    }
}

fn script_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/apache-pulsar")
}

/// `persistent://tenant/ns/name` → `tenant/ns`.
pub fn namespace_of(topic: &str) -> String {
    let path = topic.split_once("://").map_or(topic, |(_, p)| p);
    let mut parts = path.splitn(3, '/');
    let (tenant, ns) = (parts.next(), parts.next());
    format!(
        "{}/{}",
        tenant.expect("tenant"),
        ns.expect("namespace in the topic name")
    )
}
