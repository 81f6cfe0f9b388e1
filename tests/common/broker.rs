//! `TestBroker`: the real broker a test runs against.
//!
//! `PULSAR_TEST_BROKER` chooses it: `lite` (default) starts a pulsar-lite per
//! test, on free loopback ports with its own data directory, killed when
//! dropped (also when the test panics); `apache` uses the Apache Pulsar
//! standalone that `scripts/apache-pulsar run` started for the whole suite
//! (`PULSAR_SERVICE_URL`, `PULSAR_ADMIN_URL`), with unique topic names;
//! `kit` runs an in-process `pulsar_wire::testing::TestBroker` per test,
//! reached through the client's connector (only tests that build their
//! client with [`client`] reach it: `scripts/test` runs a subset of them
//! there, to keep the test kit honest).
//!
//! The pulsar-lite binary is found through `PULSAR_LITE_BIN`, then the
//! project's `.venv` (made by `scripts/setup`), then `PATH`. Where none is
//! found and `PULSAR_TEST_BROKER` is unset (a plain `cargo test` on a fresh
//! clone), the tests that need a broker are skipped, each printing why;
//! `PULSAR_TEST_BROKER=lite` (as `scripts/test` sets it) makes a missing
//! pulsar-lite a failure instead.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

/// How to start a broker.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    /// The broker's keepalive PING interval.
    pub keep_alive_secs: u64,
    /// How long the broker waits for a PONG before closing the connection.
    pub liveness_timeout_secs: u64,
    /// Partitioned topics to create before start: (full name, partitions).
    pub partitioned_topics: Vec<(String, u32)>,
}

impl Default for BrokerOptions {
    fn default() -> Self {
        Self {
            keep_alive_secs: 30,
            liveness_timeout_secs: 10,
            partitioned_topics: Vec::new(),
        }
    }
}

/// Which broker the real-broker tests run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerKind {
    /// pulsar-lite, one per test (the default).
    Lite,
    /// The shared Apache Pulsar standalone of this test run.
    Apache,
    /// The test kit's in-process broker, one per test.
    Kit,
}

impl BrokerKind {
    /// The kind `PULSAR_TEST_BROKER` names.
    pub fn current() -> Self {
        match std::env::var("PULSAR_TEST_BROKER").as_deref() {
            Err(_) | Ok("lite") | Ok("") => Self::Lite,
            Ok("apache") => Self::Apache,
            Ok("kit") => Self::Kit,
            Ok(other) => {
                panic!("PULSAR_TEST_BROKER={other:?}: expected \"lite\", \"apache\" or \"kit\"")
            }
        }
    }
}

/// Skips the calling test unless the current broker is `needed`, printing
/// the reason (past the test harness's output capture, so it shows in every
/// run). Returns `true` when the test must return at once.
pub fn skip_unless(needed: BrokerKind, reason: &str) -> bool {
    let current = BrokerKind::current();
    if current == needed {
        return false;
    }
    let test = std::thread::current().name().unwrap_or("test").to_owned();
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test} on {current:?}: runs on {needed:?} only: {reason}"
    );
    true
}

/// Skips the calling test on the broker `lacking` (a behaviour pulsar-lite
/// lacks that Apache Pulsar and the test kit both have), printing the
/// reason as [`skip_unless`] does. Returns `true` when the test must
/// return at once.
pub fn skip_on(lacking: BrokerKind, reason: &str) -> bool {
    let current = BrokerKind::current();
    if current != lacking {
        return false;
    }
    let test = std::thread::current().name().unwrap_or("test").to_owned();
    let _ = writeln!(std::io::stderr(), "SKIPPED {test} on {current:?}: {reason}");
    true
}

/// A running broker. Dropping a pulsar-lite one kills the process and
/// removes its data.
#[derive(Debug)]
pub struct TestBroker {
    addr: SocketAddr,
    own: Option<OwnProcess>,
    kit: Option<pulsar_wire::testing::TestBroker>,
}

#[derive(Debug)]
struct OwnProcess {
    child: Child,
    dir: PathBuf,
    bin: PathBuf,
    config: PathBuf,
}

impl TestBroker {
    /// Starts (or, for Apache, attaches to) a broker with default options;
    /// `None` when the calling test is skipped (see [`Self::start_with`]).
    pub async fn start() -> Option<Self> {
        Self::start_with(BrokerOptions::default()).await
    }

    /// Starts a broker and waits until it accepts connections.
    ///
    /// Returns `None`, after printing that the calling test is skipped and
    /// why, when pulsar-lite is not installed and `PULSAR_TEST_BROKER` is
    /// unset: a plain `cargo test` on a fresh clone. With
    /// `PULSAR_TEST_BROKER=lite` a missing pulsar-lite fails the test.
    ///
    /// On Apache Pulsar only `partitioned_topics` applies (created through
    /// the admin API); tests that need other options skip there first.
    pub async fn start_with(options: BrokerOptions) -> Option<Self> {
        match BrokerKind::current() {
            BrokerKind::Apache => return Some(Self::attach_apache(&options).await),
            BrokerKind::Kit => return Some(Self::start_kit(&options)),
            BrokerKind::Lite => {}
        }
        let bin = match lite_binary() {
            Some(bin) => bin,
            None if std::env::var_os("PULSAR_TEST_BROKER").is_some() => panic!(
                "pulsar-lite not found: run scripts/setup (it installs it into .venv), \
                 or set PULSAR_LITE_BIN"
            ),
            None => {
                let test = std::thread::current().name().unwrap_or("test").to_owned();
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED {test}: needs a broker, and pulsar-lite is not installed \
                     (scripts/setup installs it; scripts/test runs every test)"
                );
                return None;
            }
        };
        let mut last_error = String::new();
        // No test of this process takes a port of ours (see `reserve_addr`),
        // but another process binding a port of our range by number (another
        // run of this suite) can take it between the probe and the broker's
        // bind: then a fresh pair of ports, a few times.
        for _ in 0..3 {
            match Self::try_start(&bin, &options).await {
                Ok(broker) => return Some(broker),
                Err(e) => last_error = e,
            }
        }
        panic!("pulsar-lite did not start: {last_error}");
    }

    async fn try_start(bin: &Path, options: &BrokerOptions) -> Result<Self, String> {
        let bin = bin.to_path_buf();
        let dir = fresh_dir();
        let addr = reserve_addr();
        let metrics = reserve_addr();
        let config = dir.join("broker.toml");
        std::fs::write(
            &config,
            format!(
                "keep_alive_interval_secs = {}\nconnection_liveness_check_timeout_secs = {}\n\
                 [metrics]\nenabled = true\naddr = \"{metrics}\"\n",
                options.keep_alive_secs, options.liveness_timeout_secs
            ),
        )
        .map_err(|e| e.to_string())?;
        write_partitions(&dir.join("db.metadata.json"), &options.partitioned_topics)?;

        let (child, ready_rx) = spawn_lite(&bin, addr, &dir, &config)?;
        let broker = Self {
            addr,
            own: Some(OwnProcess {
                child,
                dir,
                bin,
                config,
            }),
            kit: None,
        };
        match tokio::time::timeout(Duration::from_secs(30), ready_rx).await {
            Ok(Ok(())) => Ok(broker),
            _ => Err(format!(
                "no \"Server listening\" line; log:\n{}",
                broker.log()
            )),
        }
    }

    /// Kills the broker with SIGKILL (no shutdown of any kind) and starts
    /// it again on the same address, data directory and config; returns
    /// once it accepts connections. pulsar-lite only: tests skip on Apache
    /// first (`skip_unless(BrokerKind::Lite, ..)`), where the process is not ours.
    pub async fn kill9_and_restart(&mut self) {
        let addr = self.addr;
        let own = self
            .own
            .as_mut()
            .expect("kill9_and_restart needs pulsar-lite: skip_unless(BrokerKind::Lite, ..)");
        own.child.kill().expect("SIGKILL the broker");
        own.child.wait().expect("reap the broker");
        // The port is still reserved for this broker (`reserve_addr`), and
        // pulsar-lite binds with SO_REUSEADDR, so the dead broker's
        // connections do not keep it from binding again.
        let (child, ready) = spawn_lite(&own.bin, addr, &own.dir, &own.config)
            .unwrap_or_else(|e| panic!("restart pulsar-lite: {e}"));
        own.child = child;
        if !matches!(
            tokio::time::timeout(Duration::from_secs(30), ready).await,
            Ok(Ok(()))
        ) {
            let log = std::fs::read_to_string(own.dir.join("broker.log")).unwrap_or_default();
            panic!("pulsar-lite did not restart on {addr}; log:\n{log}");
        }
    }

    /// `pulsar://127.0.0.1:PORT` (the kit's own URL for the kit, reached
    /// only through its connector: use [`client`]).
    pub fn service_url(&self) -> String {
        match &self.kit {
            Some(kit) => kit.service_url().to_owned(),
            None => format!("pulsar://{}", self.addr),
        }
    }

    /// The broker's binary-protocol address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The broker's log so far (pulsar-lite only).
    pub fn log(&self) -> String {
        match &self.own {
            Some(own) => std::fs::read_to_string(own.dir.join("broker.log")).unwrap_or_default(),
            None => "(Apache Pulsar: see broker.log in the scripts/apache-pulsar run dir)".into(),
        }
    }

    /// Unloads `topic` on Apache Pulsar (admin REST): the broker closes
    /// its consumers and producers, which come back. pulsar-lite has no
    /// unload: skip there first (`skip_unless(BrokerKind::Apache, ..)`).
    pub async fn unload(&self, topic: &str) {
        assert!(
            self.own.is_none(),
            "unload needs Apache Pulsar: skip_unless(BrokerKind::Apache, ..)"
        );
        let admin = std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL");
        super::admin::unload_topic(&admin, topic).await;
    }

    /// Which broker this is.
    pub fn kind(&self) -> BrokerKind {
        if self.own.is_some() {
            BrokerKind::Lite
        } else if self.kit.is_some() {
            BrokerKind::Kit
        } else {
            BrokerKind::Apache
        }
    }

    /// The test kit's broker with `options`' partitioned topics (the
    /// keepalive options do not apply: it sends no PING).
    fn start_kit(options: &BrokerOptions) -> Self {
        let kit = pulsar_wire::testing::TestBroker::start();
        for (topic, partitions) in &options.partitioned_topics {
            kit.create_partitioned_topic(topic, *partitions);
        }
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            own: None,
            kit: Some(kit),
        }
    }

    async fn attach_apache(options: &BrokerOptions) -> Self {
        let defaults = BrokerOptions::default();
        assert!(
            options.keep_alive_secs == defaults.keep_alive_secs
                && options.liveness_timeout_secs == defaults.liveness_timeout_secs,
            "broker keepalive options need a broker of their own: skip_unless(BrokerKind::Lite, ..)"
        );
        let url = std::env::var("PULSAR_SERVICE_URL").expect(
            "PULSAR_TEST_BROKER=apache needs PULSAR_SERVICE_URL (scripts/apache-pulsar run)",
        );
        let addr = url
            .strip_prefix("pulsar://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("PULSAR_SERVICE_URL {url:?} is not pulsar://IP:PORT"));
        let admin = std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL");
        for (topic, partitions) in &options.partitioned_topics {
            super::admin::create_partitioned_topic(&admin, topic, *partitions).await;
        }
        Self {
            addr,
            own: None,
            kit: None,
        }
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(own) = self.own.as_mut() {
            let _ = own.child.kill();
            let _ = own.child.wait();
            let _ = std::fs::remove_dir_all(&own.dir);
        }
    }
}

/// Starts pulsar-lite on `addr` with its data and config in `dir`; the
/// receiver fires once it accepts connections.
fn spawn_lite(
    bin: &Path,
    addr: SocketAddr,
    dir: &Path,
    config: &Path,
) -> Result<(Child, oneshot::Receiver<()>), String> {
    let mut child = Command::new(bin)
        .arg("--addr")
        .arg(addr.to_string())
        .arg("--db-path")
        .arg(dir.join("db"))
        .arg("--config")
        .arg(config)
        .arg("--log-level")
        .arg("info")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    // The broker logs "Server listening on" once it accepts connections;
    // a thread copies its log to a file and reports that line.
    let (ready_tx, ready_rx) = oneshot::channel();
    let stderr = child.stderr.take().expect("piped stderr");
    let log_path = dir.join("broker.log");
    std::thread::spawn(move || forward_log(stderr, &log_path, ready_tx));
    Ok((child, ready_rx))
}

fn forward_log(stderr: std::process::ChildStderr, path: &Path, ready: oneshot::Sender<()>) {
    let mut ready = Some(ready);
    // Appends: a restarted broker logs after its first life.
    let opened = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    let Ok(mut log) = opened else {
        return;
    };
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        let _ = writeln!(log, "{line}");
        if line.contains("Server listening on") {
            if let Some(tx) = ready.take() {
                let _ = tx.send(());
            }
        }
    }
}

fn write_partitions(path: &Path, topics: &[(String, u32)]) -> Result<(), String> {
    if topics.is_empty() {
        return Ok(());
    }
    let entries: Vec<String> = topics
        .iter()
        .map(|(name, n)| format!("\"{name}\":{{\"partitions\":{n}}}"))
        .collect();
    let json = format!(
        "{{\"version\":2,\"partitioned_topics\":{{{}}}}}",
        entries.join(",")
    );
    std::fs::write(path, json).map_err(|e| e.to_string())
}

/// The pulsar-lite binary: `PULSAR_LITE_BIN`, the project's `.venv`, or `PATH`.
fn lite_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("PULSAR_LITE_BIN") {
        return Some(PathBuf::from(bin));
    }
    let venv_lib = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib");
    if let Ok(entries) = std::fs::read_dir(&venv_lib) {
        for entry in entries.flatten() {
            let bin = entry
                .path()
                .join("site-packages/pulsar_lite/bin/pulsar-lite");
            if bin.is_file() {
                return Some(bin);
            }
        }
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("pulsar-lite"))
        .find(|bin| bin.is_file())
}

/// A loopback address no test of this process uses or will be given:
/// each port is handed out once per process, so a broker keeps its port
/// for a restart after a kill, and a port a test keeps closed stays so.
///
/// The ports come from below the kernel's ephemeral range, which is where
/// outgoing connections and listeners on port 0 (fault proxies, the
/// Apache Pulsar JVMs) get theirs; each is probed free first. Each process
/// starts at an offset of its own in the range, so concurrent runs of the
/// suite rarely meet.
pub fn reserve_addr() -> SocketAddr {
    use std::sync::OnceLock;
    use std::sync::atomic::AtomicU32;
    static RANGE: OnceLock<(u32, u32, u32)> = OnceLock::new();
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let &(low, span, offset) = RANGE.get_or_init(|| {
        let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or(32_768);
        let low = 10_000;
        assert!(
            ephemeral_low > low + 1_000,
            "the ephemeral port range starts at {ephemeral_low}: no room below it"
        );
        let span = ephemeral_low - low;
        (low, span, std::process::id() % span)
    });
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < span, "all {span} test ports of this process handed out");
        let port = u16::try_from(low + (offset + n) % span).expect("a port below 65536");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if TcpListener::bind(addr).is_ok() {
            return addr;
        }
    }
}

fn fresh_dir() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "pulsar-wire-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A client builder for `broker`: its service URL (and the kit's
/// connector), to add settings to.
pub fn client_builder(broker: &TestBroker) -> pulsar_wire::ClientBuilder {
    super::init_tracing();
    match &broker.kit {
        Some(kit) => kit.client_builder(),
        None => pulsar_wire::Client::builder().service_url(broker.service_url()),
    }
}

/// A client of `broker`, with default settings: what most real-broker
/// tests start with.
pub async fn client(broker: &TestBroker) -> pulsar_wire::Client {
    if let Some(kit) = &broker.kit {
        super::init_tracing();
        return kit.client().await.expect("client of the test kit");
    }
    super::client_at(broker.service_url()).await
}
