//! Support shared by the test binaries: the real test broker, a client
//! for it, unique topic names, log set-up and a hang guard.

#![allow(dead_code, unreachable_pub)] // each binary uses its own subset

pub mod acks;
pub mod admin;
pub mod broker;
pub mod cluster;
pub mod fake_broker;
pub mod fault_proxy;
pub mod frame_watch;
pub mod java;
pub mod jwt;
#[cfg(feature = "oauth2")]
pub mod oauth2_issuer;
pub mod secured;
#[cfg(feature = "tls")]
pub mod tls;
pub mod txn;

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A topic name no other test (nor an earlier run on a shared broker) uses.
pub fn unique_topic(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let run = RandomState::new().build_hasher().finish() & 0xffff_ffff;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "persistent://public/default/{prefix}-{}-{run:08x}-{n}",
        std::process::id()
    )
}

/// A Shared consumer of `topic` on `subscription`, from the start of the topic.
pub async fn shared_from_start(
    client: &pulsar_wire::Client,
    topic: &str,
    subscription: &str,
) -> pulsar_wire::Consumer {
    use pulsar_wire::consumer::{InitialPosition, SubscriptionType};
    client
        .consumer(topic, subscription)
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe")
}

/// As [`shared_from_start`], with `schema` (subscription "typed").
pub async fn typed_from_start<T>(
    client: &pulsar_wire::Client,
    topic: &str,
    schema: impl pulsar_wire::schema::Schema<T> + 'static,
) -> pulsar_wire::schema::TypedConsumer<T> {
    use pulsar_wire::consumer::{InitialPosition, SubscriptionType};
    client
        .consumer(topic, "typed")
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .subscribe_with(schema)
        .await
        .expect("subscribe with the schema")
}

/// Sends `value` with a typed producer and waits for the broker to store it.
pub async fn stored<T>(producer: &pulsar_wire::schema::TypedProducer<T>, value: &T) {
    producer
        .send(value)
        .await
        .expect("queued")
        .await
        .expect("stored");
}

/// Sends `tracing` output to the test's captured output (`RUST_LOG` filters it).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A timeout in a test that needs one to fire: the operation timeout of
/// a client whose request the broker never answers (or holds), or a
/// transaction's timeout. Generous, so that a loaded test broker answers
/// every other request within it: the test then fails only if the
/// timeout itself misbehaves.
pub const FIRING_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `f`, failing the test if it takes longer than a generous limit. A
/// guard against hangs only: tests never assert on time.
pub async fn guard<F: Future>(what: &str, f: F) -> F::Output {
    guard_for(what, Duration::from_secs(60), f).await
}

/// [`guard`] with a limit of its own, for runs that are long by design.
pub async fn guard_for<F: Future>(what: &str, limit: Duration, f: F) -> F::Output {
    match tokio::time::timeout(limit, f).await {
        Ok(out) => out,
        Err(_) => panic!("{what}: no outcome within {limit:?} (hang guard)"),
    }
}

/// What a long test has done so far, for [`guard_progress`]: each
/// [`tick`](Self::tick) is one step (a message received, a receipt). Clones
/// count together, so tasks of the test can tick too.
#[derive(Debug, Clone)]
pub struct Progress(std::sync::Arc<std::sync::Mutex<(u64, tokio::time::Instant)>>);

impl Default for Progress {
    fn default() -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new((
            0,
            tokio::time::Instant::now(),
        ))))
    }
}

impl Progress {
    /// One more step done.
    pub fn tick(&self) {
        let mut last = self.0.lock().expect("progress");
        last.0 += 1;
        last.1 = tokio::time::Instant::now();
    }

    /// Steps done so far, and when the last one was.
    fn last(&self) -> (u64, tokio::time::Instant) {
        *self.0.lock().expect("progress")
    }
}

/// Runs `f`, failing the test if `progress` makes no step for a generous
/// limit (60 s): the hang guard of a long test, measuring progress rather
/// than wall time, so a slow machine that still moves never trips it.
pub async fn guard_progress<F: Future>(what: &str, progress: &Progress, f: F) -> F::Output {
    const STALL: Duration = Duration::from_secs(60);
    let started = tokio::time::Instant::now();
    tokio::pin!(f);
    loop {
        let (steps, at) = progress.last();
        tokio::select! {
            out = &mut f => return out,
            () = tokio::time::sleep_until(at.max(started) + STALL) => {
                if progress.last().0 == steps {
                    panic!("{what}: no progress for {STALL:?}, after {steps} steps (hang guard)");
                }
            }
        }
    }
}

/// Returns once every task of this runtime is idle. For tests on tokio's
/// paused clock only: the clock moves (by the smallest step, 1 ms) only
/// when nothing else can run, so this waits for exactly that event, never
/// for wall time.
pub async fn until_idle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// Everything `tracing` prints at TRACE while `f` runs on this thread
/// (plain text, every field). Run it in a current-thread runtime so the
/// connection tasks log here too.
pub async fn capture_logs<F: Future>(f: F) -> (F::Output, String) {
    use std::sync::{Arc, Mutex};
    use tracing::instrument::WithSubscriber;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let out = f.with_current_subscriber().await;
    let text = String::from_utf8_lossy(&sink.0.lock().expect("sink")).into_owned();
    (out, text)
}

/// A fresh directory under the system temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// Creates an empty directory named after `prefix`.
    pub fn new(prefix: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let run = RandomState::new().build_hasher().finish() & 0xffff_ffff;
        let dir = std::env::temp_dir().join(format!(
            "pulsar-wire-{prefix}-{}-{run:08x}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    /// Writes `contents` to `name` in the directory; returns its path.
    pub fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> std::path::PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write temp file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A client of the broker at `service_url`, with default settings (and
/// the test log set up).
pub async fn client_at(service_url: impl Into<String>) -> pulsar_wire::Client {
    init_tracing();
    pulsar_wire::Client::builder()
        .service_url(service_url)
        .build()
        .await
        .expect("client")
}

/// Asserts that a pattern consumer's `subscribe()` for `pattern` failed
/// because the broker never answered GET_TOPICS_OF_NAMESPACE (pulsar-lite
/// does not): a typed timeout naming the request.
pub fn assert_listing_timed_out(
    result: Result<pulsar_wire::consumer::Consumer, pulsar_wire::ConsumerError>,
    pattern: &str,
) {
    use pulsar_wire::ConsumerError;
    use pulsar_wire::client::ClientError;
    use pulsar_wire::connection::ConnectionError;
    match result {
        Err(ConsumerError::Client {
            topic,
            source:
                ClientError::Request {
                    op: "GET_TOPICS_OF_NAMESPACE",
                    source:
                        ConnectionError::Timeout {
                            op: "GET_TOPICS_OF_NAMESPACE",
                            ..
                        },
                    ..
                },
        }) => assert_eq!(topic, pattern),
        other => panic!("expected a GET_TOPICS_OF_NAMESPACE timeout, got {other:?}"),
    }
}
