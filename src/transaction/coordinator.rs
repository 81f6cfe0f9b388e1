//! The transaction coordinators: found through the partitioned system
//! topic whose partition `n` is served by the broker that runs coordinator
//! `n`, attached with TC_CLIENT_CONNECT, asked NEW_TXN, ADD_PARTITION_TO_TXN,
//! ADD_SUBSCRIPTION_TO_TXN and END_TXN.
//!
//! Each coordinator has one link: a pooled connection to its broker, made
//! again (looked up again) when it is lost or the coordinator moved, with
//! the producers' backoff between attempts. A request is tried again while
//! the connection is lost or the coordinator is not ready, until the
//! operation timeout from its start has passed.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::OnceCell;
use tracing::{debug, info, warn};

use super::TransactionError;
use crate::backoff::Backoff;
use crate::client::{Client, TopicName};
use crate::clock;
use crate::connection::{Connection, ConnectionError, Response};
use crate::ids::{RequestId, TxnId};
use crate::proto::{BaseCommand, ServerError};
use crate::wire::commands;

/// The system topic whose partitions assign the transaction coordinators.
pub(crate) const ASSIGN_TOPIC: &str = "persistent://pulsar/system/transaction_coordinator_assign";

/// A request's command, built again for each attempt with a fresh id.
pub(crate) type Build<'a> = &'a (dyn Fn(RequestId) -> BaseCommand + Sync);

/// Every coordinator of the cluster, found on first use.
#[derive(Debug, Default)]
pub(crate) struct Coordinators {
    links: OnceCell<Vec<Link>>,
    next: AtomicUsize,
}

impl Coordinators {
    /// The coordinators, discovered on the first call (a failed discovery
    /// is tried again by the next call).
    async fn links(&self, client: &Client) -> Result<&[Link], TransactionError> {
        let links = self
            .links
            .get_or_try_init(|| async {
                let topic =
                    TopicName::parse(ASSIGN_TOPIC).map_err(|e| TransactionError::Lookup {
                        tc: 0,
                        source: e.into(),
                    })?;
                let partitions = client
                    .partitioned_topic_metadata(&topic)
                    .await
                    .map_err(|source| TransactionError::Lookup { tc: 0, source })?;
                info!(
                    coordinators = partitions.max(1),
                    "transaction coordinators found"
                );
                Ok::<_, TransactionError>(match partitions {
                    0 => vec![Link::new(0, topic)],
                    n => (0..n)
                        .map(|i| Link::new(u64::from(i), topic.partition(i)))
                        .collect(),
                })
            })
            .await?;
        Ok(links)
    }

    /// Starts a transaction on the next coordinator in turn.
    pub(crate) async fn new_txn(
        &self,
        client: &Client,
        timeout: std::time::Duration,
    ) -> Result<TxnId, TransactionError> {
        let links = self.links(client).await?;
        let link = &links[self.next.fetch_add(1, Ordering::Relaxed) % links.len()];
        let tc = link.tc;
        match link
            .request(client, "NEW_TXN", None, &|id| {
                commands::new_txn(tc, timeout, id)
            })
            .await?
        {
            Response::NewTxnResponse(r) => Ok(TxnId {
                most_bits: r.txnid_most_bits(),
                least_bits: r.txnid_least_bits(),
            }),
            other => Err(TransactionError::UnexpectedResponse {
                op: "NEW_TXN",
                got: other.kind(),
            }),
        }
    }

    /// Sends `build`'s request about `txn` to the coordinator that owns it.
    pub(crate) async fn request(
        &self,
        client: &Client,
        txn: TxnId,
        op: &'static str,
        build: Build<'_>,
    ) -> Result<Response, TransactionError> {
        let links = self.links(client).await?;
        let link = usize::try_from(txn.most_bits)
            .ok()
            .and_then(|i| links.get(i))
            .ok_or_else(|| TransactionError::CoordinatorNotFound {
                op,
                tc: txn.most_bits,
                message: format!("the cluster has {} coordinators", links.len()),
            })?;
        link.request(client, op, Some(txn), build).await
    }
}

/// One coordinator: its topic and the connection its broker serves it on.
#[derive(Debug)]
struct Link {
    tc: u64,
    topic: TopicName,
    conn: tokio::sync::Mutex<Option<Connection>>,
    backoff: Mutex<Backoff>,
}

/// A failed attempt, and whether another may succeed.
struct Failure {
    error: TransactionError,
    retry: bool,
}

impl Link {
    fn new(tc: u64, topic: TopicName) -> Self {
        Self {
            tc,
            topic,
            conn: tokio::sync::Mutex::new(None),
            backoff: Mutex::new(Backoff::default()),
        }
    }

    /// The connection the coordinator is attached on, attaching it first
    /// (lookup, TC_CLIENT_CONNECT) when there is none or it was lost.
    async fn connection(&self, client: &Client) -> Result<Connection, Failure> {
        let mut held = self.conn.lock().await;
        if let Some(conn) = held.as_ref().filter(|c| !c.is_closed()) {
            return Ok(conn.clone());
        }
        *held = None;
        let conn = client.lookup(&self.topic).await.map_err(|source| Failure {
            retry: source.is_retryable()
                && !matches!(
                    source,
                    crate::client::ClientError::Request {
                        source: ConnectionError::Timeout { .. },
                        ..
                    }
                ),
            error: TransactionError::Lookup {
                tc: self.tc,
                source,
            },
        })?;
        let tc = self.tc;
        conn.request("TC_CLIENT_CONNECT", |id| {
            commands::tc_client_connect(tc, id)
        })
        .await
        .map_err(|e| self.failure("TC_CLIENT_CONNECT", None, e))?;
        debug!(tc, conn = %conn.id(), "transaction coordinator attached");
        *held = Some(conn.clone());
        Ok(conn)
    }

    fn failure(&self, op: &'static str, txn: Option<TxnId>, e: ConnectionError) -> Failure {
        let retry = match &e {
            ConnectionError::Server { code, .. } => matches!(
                code,
                ServerError::TransactionCoordinatorNotFound
                    | ServerError::ServiceNotReady
                    | ServerError::TooManyRequests
            ),
            // The request had its whole operation timeout already.
            ConnectionError::Timeout { .. } => false,
            other => other.is_connection_lost(),
        };
        Failure {
            retry,
            error: TransactionError::from_request(op, self.tc, txn, e),
        }
    }

    /// Sends the request (attaching first if needed); tries again after the
    /// backoff's delay while the failure may pass, until the operation
    /// timeout from now has passed.
    async fn request(
        &self,
        client: &Client,
        op: &'static str,
        txn: Option<TxnId>,
        build: Build<'_>,
    ) -> Result<Response, TransactionError> {
        let deadline = clock::after(clock::now(), client.operation_timeout());
        loop {
            let attempt = match self.connection(client).await {
                Ok(conn) => conn
                    .request(op, build)
                    .await
                    .map_err(|e| self.failure(op, txn, e)),
                Err(failure) => Err(failure),
            };
            let failure = match attempt {
                Ok(answer) => {
                    self.backoff().reset();
                    return Ok(answer);
                }
                Err(failure) => failure,
            };
            if matches!(failure.error, TransactionError::CoordinatorNotFound { .. }) {
                // It may have moved to another broker: look it up again.
                *self.conn.lock().await = None;
            }
            let delay = self.backoff().next_delay();
            if !failure.retry || clock::after(clock::now(), delay) >= deadline {
                return Err(failure.error);
            }
            warn!(tc = self.tc, op, error = %failure.error, ?delay, "transaction coordinator request failed; trying again");
            tokio::time::sleep(delay).await;
        }
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.backoff
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
