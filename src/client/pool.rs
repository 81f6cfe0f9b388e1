//! The connection pool: broker address → [`Connection`].
//!
//! A pool key is (logical address, physical address, slot): the logical
//! address is the broker the connection is for, the physical one where the
//! socket goes (they differ behind a proxy). With `connections_per_broker`
//! = n, requests spread round-robin over n slots per broker; the default is
//! one connection per broker.
//!
//! Concurrent requests for the same key share one connect attempt: the
//! first creates it (a spawned task, so it finishes even if that caller
//! gives up), later ones await the same shared outcome. A failed attempt is
//! removed so the next request tries afresh, and so is one whose task
//! panicked. Every live connection is
//! watched: when it ends, the pool forgets it.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tracing::{debug, error};

use super::{BrokerAddress, BrokerStream, ClientError, Connector};
use crate::connection::{Connection, ConnectionError, ConnectionId, ConnectionOptions};

type Attempt = Shared<BoxFuture<'static, Result<Connection, ClientError>>>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    logical: BrokerAddress,
    physical: BrokerAddress,
    slot: usize,
}

enum Entry {
    Connecting { attempt: u64, outcome: Attempt },
    Ready(Connection),
}

#[derive(Default)]
struct State {
    closed: bool,
    entries: HashMap<Key, Entry>,
}

/// Settings the pool opens connections with.
#[derive(Debug, Clone)]
pub(crate) struct PoolConfig {
    pub(crate) connector: Arc<dyn Connector>,
    pub(crate) options: ConnectionOptions,
    pub(crate) connection_timeout: Duration,
    pub(crate) connections_per_broker: usize,
    /// Refuse every plaintext address (the service URL is `pulsar+ssl://`).
    pub(crate) require_tls: bool,
    /// TLS for `pulsar+ssl://` addresses (set when the service URL is one).
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::tls::Tls>,
}

/// Shared connections to brokers. Cloning shares the pool.
#[derive(Clone)]
pub(crate) struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    config: PoolConfig,
    next_slot: AtomicUsize,
    next_attempt: AtomicU64,
    state: Mutex<State>,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.lock();
        f.debug_struct("Pool")
            .field("connections", &state.entries.len())
            .field("closed", &state.closed)
            .finish_non_exhaustive()
    }
}

impl Pool {
    pub(crate) fn new(config: PoolConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                next_slot: AtomicUsize::new(0),
                next_attempt: AtomicU64::new(0),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// A live connection to `logical` through `physical`: a pooled one, the
    /// outcome of an attempt already under way, or a new attempt. A TLS
    /// client's pool refuses plaintext addresses before opening anything.
    pub(crate) async fn get(
        &self,
        logical: &BrokerAddress,
        physical: &BrokerAddress,
    ) -> Result<Connection, ClientError> {
        if self.inner.config.require_tls {
            if let Some(plain) = [logical, physical].into_iter().find(|a| !a.is_tls()) {
                return Err(ClientError::PlaintextRefused { url: plain.url() });
            }
        }
        let per_broker = self.inner.config.connections_per_broker;
        let slot = match per_broker {
            0 | 1 => 0,
            n => self.inner.next_slot.fetch_add(1, Ordering::Relaxed) % n,
        };
        let key = Key {
            logical: logical.clone(),
            physical: physical.clone(),
            slot,
        };
        let outcome = {
            let mut state = self.inner.lock();
            if state.closed {
                return Err(ClientError::Closed);
            }
            match state.entries.get(&key) {
                Some(Entry::Ready(conn)) if !conn.is_closed() => return Ok(conn.clone()),
                Some(Entry::Connecting { outcome, .. }) => outcome.clone(),
                _ => {
                    let attempt = self.inner.next_attempt.fetch_add(1, Ordering::Relaxed);
                    let outcome = start(Arc::downgrade(&self.inner), key.clone(), attempt);
                    let entry = Entry::Connecting {
                        attempt,
                        outcome: outcome.clone(),
                    };
                    state.entries.insert(key, entry);
                    outcome
                }
            }
        };
        outcome.await
    }

    /// Closes every pooled connection; later requests fail with [`ClientError::Closed`].
    pub(crate) async fn close(&self) {
        let entries = {
            let mut state = self.inner.lock();
            state.closed = true;
            std::mem::take(&mut state.entries)
        };
        let closing = entries.into_values().filter_map(|entry| match entry {
            Entry::Ready(conn) => Some(async move { conn.close().await }),
            // Its task sees `closed` and closes what it opened.
            Entry::Connecting { .. } => None,
        });
        futures::future::join_all(closing).await;
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock; recover the state if one did.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records the outcome of `attempt` for `key`; returns the connection
    /// unless the pool was closed meanwhile.
    fn settle(&self, key: &Key, attempt: u64, outcome: &Result<Connection, ClientError>) -> bool {
        let mut state = self.lock();
        let current = matches!(state.entries.get(key),
            Some(Entry::Connecting { attempt: a, .. }) if *a == attempt);
        if state.closed {
            return false;
        }
        if current {
            match outcome {
                Ok(conn) => state
                    .entries
                    .insert(key.clone(), Entry::Ready(conn.clone())),
                Err(_) => state.entries.remove(key),
            };
        }
        true
    }

    /// Forgets `attempt` for `key`, whose task ended without an outcome
    /// (it panicked, or the runtime is shutting down).
    fn abandon(&self, key: &Key, attempt: u64) {
        let mut state = self.lock();
        if matches!(state.entries.get(key),
            Some(Entry::Connecting { attempt: a, .. }) if *a == attempt)
        {
            state.entries.remove(key);
        }
    }

    /// Forgets `key` if it still holds the connection `id`, which has ended.
    fn forget(&self, key: &Key, id: ConnectionId, err: &ConnectionError) {
        let mut state = self.lock();
        if matches!(state.entries.get(key), Some(Entry::Ready(c)) if c.id() == id) {
            debug!(connection = %id, broker = %key.logical, error = %err, "forgetting ended connection");
            state.entries.remove(key);
        }
    }
}

/// Spawns the connect attempt for `key` and returns its shared outcome.
fn start(pool: Weak<Inner>, key: Key, attempt: u64) -> Attempt {
    let Some(inner) = pool.upgrade() else {
        return futures::future::ready(Err(ClientError::Closed))
            .boxed()
            .shared();
    };
    let config = inner.config.clone();
    drop(inner);
    let (task_pool, task_key) = (pool.clone(), key.clone());
    let task = tokio::spawn(async move {
        let (pool, key) = (task_pool, task_key);
        let outcome = open(&config, &key).await;
        let Some(inner) = pool.upgrade() else {
            return Err(ClientError::Closed);
        };
        if !inner.settle(&key, attempt, &outcome) {
            if let Ok(conn) = &outcome {
                conn.close().await;
            }
            return Err(ClientError::Closed);
        }
        if let Ok(conn) = &outcome {
            let (closed, id) = (conn.closed_signal(), conn.id());
            let watcher = Arc::downgrade(&inner);
            tokio::spawn(async move {
                let err = closed.await;
                if let Some(inner) = watcher.upgrade() {
                    inner.forget(&key, id, &err);
                }
            });
        }
        outcome
    });
    async move {
        task.await.unwrap_or_else(|failure| {
            if let Some(inner) = pool.upgrade() {
                inner.abandon(&key, attempt);
            }
            error!(broker = %key.logical, address = %key.physical, error = %failure,
                "connect task failed; the next request connects afresh");
            Err(ClientError::ConnectTaskFailed {
                address: key.physical.to_string(),
            })
        })
    }
    .boxed()
    .shared()
}

/// Wraps `io` in TLS for a `pulsar+ssl://` address; never falls back to plaintext.
#[cfg(feature = "tls")]
async fn secure(
    config: &PoolConfig,
    address: &BrokerAddress,
    io: Box<dyn BrokerStream>,
) -> Result<Box<dyn BrokerStream>, ClientError> {
    if !address.is_tls() {
        return Ok(io);
    }
    // Lookup keeps a client on its service URL's scheme, so a TLS address
    // always comes with the TLS settings built for it.
    let tls = config
        .tls
        .as_ref()
        .ok_or_else(|| ClientError::TlsNotEnabled { url: address.url() })?;
    tls.handshake(address, io)
        .await
        .map_err(|source| ClientError::Connect {
            address: address.to_string(),
            source,
        })
}

/// Without the `tls` feature a `pulsar+ssl://` address is refused, typed.
#[cfg(not(feature = "tls"))]
async fn secure(
    _config: &PoolConfig,
    address: &BrokerAddress,
    io: Box<dyn BrokerStream>,
) -> Result<Box<dyn BrokerStream>, ClientError> {
    if address.is_tls() {
        return Err(ClientError::TlsNotEnabled { url: address.url() });
    }
    Ok(io)
}

/// Opens the stream (TCP, then TLS for `pulsar+ssl://`) and runs the
/// handshake; opening the stream is bounded by the connection timeout.
async fn open(config: &PoolConfig, key: &Key) -> Result<Connection, ClientError> {
    let fail = |source| ClientError::Connect {
        address: key.physical.to_string(),
        source,
    };
    let timeout = config.connection_timeout;
    let stream = async {
        let io = config
            .connector
            .connect(&key.physical)
            .await
            .map_err(|e| fail(e.into()))?;
        secure(config, &key.physical, io).await
    };
    let io = tokio::time::timeout(timeout, stream).await.map_err(|_| {
        fail(ConnectionError::Timeout {
            op: if key.physical.is_tls() {
                "TCP connect and TLS handshake"
            } else {
                "TCP connect"
            },
            after: timeout,
        })
    })??;
    let mut options = config.options.clone();
    if key.logical == key.physical {
        options = options.peer_name(key.physical.to_string());
    } else {
        options = options
            .peer_name(format!("{} via {}", key.logical, key.physical))
            .proxy_to_broker_url(key.logical.to_string());
    }
    Connection::connect(io, options).await.map_err(fail)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Counts connect attempts and refuses them all.
    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    impl super::super::Connector for Arc<Counting> {
        fn connect(
            &self,
            _: &BrokerAddress,
        ) -> BoxFuture<'static, std::io::Result<Box<dyn BrokerStream>>> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Box::pin(async { Err(std::io::ErrorKind::ConnectionRefused.into()) })
        }
    }

    /// Panics in its first connect, refuses the later ones.
    #[derive(Debug, Default)]
    struct PanicsFirst(AtomicUsize);

    impl super::super::Connector for Arc<PanicsFirst> {
        fn connect(
            &self,
            _: &BrokerAddress,
        ) -> BoxFuture<'static, std::io::Result<Box<dyn BrokerStream>>> {
            let call = self.0.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move {
                assert!(call > 0, "the first connect panics (on purpose)");
                Err(std::io::ErrorKind::ConnectionRefused.into())
            })
        }
    }

    fn config(connector: Arc<dyn super::super::Connector>, require_tls: bool) -> PoolConfig {
        PoolConfig {
            connector,
            options: ConnectionOptions::default(),
            connection_timeout: Duration::from_secs(1),
            connections_per_broker: 1,
            require_tls,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    #[tokio::test]
    async fn a_panicking_connect_leaves_no_entry_behind() {
        let attempts = Arc::new(PanicsFirst::default());
        let pool = Pool::new(config(Arc::new(attempts.clone()), false));
        let broker = BrokerAddress::new("b", 6650);

        let first = pool.get(&broker, &broker).await;
        assert!(
            matches!(&first, Err(ClientError::ConnectTaskFailed { address }) if address == "b:6650"),
            "{first:?}"
        );
        assert!(first.as_ref().is_err_and(ClientError::is_retryable));
        let second = pool.get(&broker, &broker).await;
        assert_eq!(
            attempts.0.load(Ordering::Relaxed),
            2,
            "the next request connects afresh: {second:?}"
        );
        assert!(
            matches!(
                &second,
                Err(ClientError::Connect {
                    source: ConnectionError::Io(_),
                    ..
                })
            ),
            "{second:?}"
        );
        assert_eq!(
            pool.inner.lock().entries.len(),
            0,
            "failed attempts leave no entry"
        );
    }

    #[tokio::test]
    async fn a_tls_pool_refuses_plaintext_before_opening_anything() {
        let attempts = Arc::new(Counting::default());
        let pool = Pool::new(config(Arc::new(attempts.clone()), true));
        let plain = BrokerAddress::new("b", 6650);
        let tls = BrokerAddress::new("proxy", 6651).with_tls(true);
        for (logical, physical) in [(&plain, &plain), (&plain, &tls), (&tls, &plain)] {
            let refused = pool.get(logical, physical).await;
            assert!(
                matches!(&refused, Err(ClientError::PlaintextRefused { url }) if url == "pulsar://b:6650"),
                "{refused:?}"
            );
        }
        assert_eq!(attempts.0.load(Ordering::Relaxed), 0, "no socket opened");
    }
}
