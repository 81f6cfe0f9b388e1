//! Creating a producer on the broker, at the start and again after a
//! reconnect: register a mailbox, send PRODUCER, read PRODUCER_SUCCESS.
//!
//! A reconnect asks under the name the broker gave the first time (so
//! deduplication and the broker's view of the producer stay the same), on
//! the broker a CLOSE_PRODUCER / TOPIC_MIGRATED named, or found by a fresh
//! lookup. Which failures end the attempts is decided in one place for
//! producers and consumers: `ConnectionError::is_final`.
//!
//! No producer is left behind on the broker: from the moment PRODUCER is
//! sent until a driver takes the producer over, it is [`Unclaimed`], and
//! an unclaimed producer that is dropped (the request timed out, the
//! caller gave up, a sibling partition failed) is closed on the broker.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::ProducerError;
use super::builder::AccessMode;
use super::task::Created;
use crate::client::{Client, TopicName};
use crate::connection::{BrokerHint, Connection, ConnectionError, Response};
use crate::ids::ProducerId;
use crate::proto::{self, ProducerAccessMode};
use crate::wire::commands;

/// Everything needed to create the producer of one topic (partition) again.
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    pub(crate) client: Client,
    pub(crate) topic: TopicName,
    /// The partition index, or -1 for a topic that is not partitioned.
    pub(crate) partition: i32,
    /// The name to ask for: the user's, or after the first success the broker's.
    pub(crate) name: Option<String>,
    /// Whether the name came from the user (sent as `user_provided_producer_name`).
    pub(crate) user_named: bool,
    pub(crate) access_mode: AccessMode,
    /// The topic epoch of the broker's last PRODUCER_SUCCESS, sent back on
    /// a re-create: an exclusive producer fenced off meanwhile (by an
    /// `ExclusiveWithFencing` one) is then refused instead of taking the
    /// topic back.
    pub(crate) topic_epoch: Option<u64>,
    /// The schema registered in PRODUCER (none for bytes).
    pub(crate) schema: Option<proto::Schema>,
}

/// Creates the producer on `conn`; `next_sequence` follows the broker's
/// `last_sequence_id`.
pub(crate) async fn create_on(recipe: &Recipe, conn: Connection) -> Result<Created, ProducerError> {
    let topic = recipe.topic.as_str();
    let create_err = |source: ConnectionError| ProducerError::Create {
        topic: topic.to_owned(),
        source,
    };
    let id = conn.next_producer_id();
    let (mailbox, events) = mpsc::unbounded_channel();
    conn.register_producer(id, mailbox)
        .await
        .map_err(create_err)?;
    // From here on, giving up (a timeout, a dropped future) closes it.
    let mut unclaimed = Unclaimed::new(conn.clone(), id);
    let mode = match recipe.access_mode {
        AccessMode::Shared => ProducerAccessMode::Shared,
        AccessMode::Exclusive => ProducerAccessMode::Exclusive,
        AccessMode::WaitForExclusive => ProducerAccessMode::WaitForExclusive,
        AccessMode::ExclusiveWithFencing => ProducerAccessMode::ExclusiveWithFencing,
    };
    let body = |request_id: crate::ids::RequestId| proto::CommandProducer {
        topic: topic.to_owned(),
        producer_id: id.0,
        request_id: request_id.0,
        producer_name: recipe.name.clone(),
        user_provided_producer_name: Some(recipe.user_named),
        producer_access_mode: Some(mode as i32),
        topic_epoch: recipe.topic_epoch,
        // The broker readies the topic's transaction buffer first.
        txn_enabled: recipe.client.coordinators().is_some().then_some(true),
        schema: recipe.schema.clone(),
        ..proto::CommandProducer::default()
    };
    let answer = conn
        .request("PRODUCER", |request_id| {
            commands::producer(body(request_id))
        })
        .await;
    let success = match answer {
        Ok(Response::ProducerSuccess(s)) => s,
        // Dropping `unclaimed` closes whatever the broker made of it.
        Ok(other) => return Err(ProducerError::UnexpectedResponse { got: other.kind() }),
        Err(e @ ConnectionError::Server { .. }) => {
            // Refused: there is nothing on the broker to close.
            unclaimed.claim();
            conn.unregister_producer(id).await;
            return Err(create_err(e));
        }
        Err(e) => {
            if matches!(e, ConnectionError::Timeout { .. }) {
                debug!(producer = %id, "PRODUCER timed out: closing it in case the broker made it late");
            }
            return Err(create_err(e));
        }
    };
    let last = success.last_sequence_id();
    Ok(Created {
        conn,
        id,
        topic: topic.to_owned(),
        name: success.producer_name,
        partition: recipe.partition,
        next_sequence: u64::try_from(last).map_or(0, |last| last.saturating_add(1)),
        topic_epoch: success.topic_epoch,
        // pulsar-lite answers with an empty version: no version.
        schema_version: success.schema_version.filter(|v| !v.is_empty()),
        events,
        unclaimed,
    })
}

/// A producer asked for (or made) on the broker that no driver has taken
/// over yet. Dropped unclaimed, it is closed on the broker (CLOSE_PRODUCER,
/// which also withdraws a producer still queued for exclusive access) and
/// unregistered, in a task of its own.
#[derive(Debug)]
pub(crate) struct Unclaimed(Option<(Connection, ProducerId)>);

impl Unclaimed {
    const fn new(conn: Connection, id: ProducerId) -> Self {
        Self(Some((conn, id)))
    }

    /// Someone else answers for the producer now: dropping does nothing.
    pub(crate) fn claim(&mut self) {
        self.0 = None;
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        let Some((conn, id)) = self.0.take() else {
            return;
        };
        // Without a runtime the connection's actor is gone too.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(release(Old {
                conn,
                id,
                close: true,
            }));
        }
    }
}

/// Looks the topic up and creates the producer there; a failure that may
/// pass (a cut connection, a broker not ready) is tried again until the
/// operation timeout.
pub(crate) async fn create(recipe: &Recipe) -> Result<Created, ProducerError> {
    recipe
        .client
        .retry_passing(
            &recipe.topic,
            "PRODUCER",
            || recreate(recipe, None),
            ProducerError::is_passing_at_creation,
        )
        .await
}

/// The producer the driver had before the link broke.
#[derive(Debug)]
pub(crate) struct Old {
    pub(crate) conn: Connection,
    pub(crate) id: ProducerId,
    /// Ask the broker to close it first (the connection is fine, the
    /// producer on it is not: receipts out of step, or migrated).
    pub(crate) close: bool,
}

/// Starts one reconnect attempt as a task: after `delay` it lets go of the
/// old producer, then creates it anew where `hint` says (or where a lookup
/// says). The outcome arrives on the returned channel.
///
/// Dropping the receiver (the producer was closed) stops the attempt at
/// once, in its delay or while it talks to the broker (a producer waiting
/// for exclusive access is withdrawn); whatever it made on the broker is
/// closed there, so no producer is left behind.
pub(crate) fn spawn_recreate(
    recipe: Recipe,
    old: Option<Old>,
    hint: Option<BrokerHint>,
    delay: Duration,
) -> oneshot::Receiver<Result<Created, ProducerError>> {
    let (mut tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let closed = tokio::select! {
            () = tokio::time::sleep(delay) => false,
            () = tx.closed() => true,
        };
        if let Some(old) = old {
            release(old).await;
        }
        if closed {
            return;
        }
        let outcome = tokio::select! {
            outcome = recreate(&recipe, hint) => outcome,
            // Dropping the attempt closes what it made (see `Unclaimed`).
            () = tx.closed() => return,
        };
        if let Err(Ok(orphan)) = tx.send(outcome) {
            // Closed on the broker as it drops, unclaimed.
            debug!(producer = %orphan.id, "producer closed during its reconnect: closing the new one");
        }
    });
    rx
}

/// Lets go of the producer the driver had (closing it on the broker first
/// if asked), unless its connection is gone anyway.
async fn release(old: Old) {
    if old.conn.is_closed() {
        return;
    }
    if old.close {
        let closed = old.conn.close_producer(old.id).await;
        debug!(producer = %old.id, ?closed, "closed the old producer before re-creating it");
    } else {
        old.conn.unregister_producer(old.id).await;
    }
}

/// Creates the producer again where `hint` says, or where a lookup says.
async fn recreate(recipe: &Recipe, hint: Option<BrokerHint>) -> Result<Created, ProducerError> {
    let conn = recipe
        .client
        .reconnect_to(&recipe.topic, hint.as_ref())
        .await
        .map_err(|source| ProducerError::Client {
            topic: recipe.topic.as_str().to_owned(),
            source,
        })?;
    create_on(recipe, conn).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientError;
    use crate::proto::ServerError;

    /// Whether re-creating the producer tries once more after `err`.
    fn retryable(err: &ProducerError) -> bool {
        !err.is_final()
    }

    fn create_failed(source: ConnectionError) -> ProducerError {
        ProducerError::Create {
            topic: "t".into(),
            source,
        }
    }

    fn refused(code: ServerError) -> ProducerError {
        create_failed(ConnectionError::Server {
            op: "PRODUCER",
            code,
            message: String::new(),
        })
    }

    #[test]
    fn passing_trouble_is_retried_and_final_refusals_are_not() {
        assert!(retryable(&create_failed(ConnectionError::Closed)));
        assert!(retryable(&create_failed(ConnectionError::Timeout {
            op: "PRODUCER",
            after: Duration::from_secs(30),
        })));
        assert!(retryable(&refused(ServerError::ProducerBusy)));
        assert!(retryable(&refused(ServerError::ServiceNotReady)));
        // Refused credentials may be renewed (a rotated token): retried,
        // as a consumer subscribing again retries them.
        assert!(retryable(&refused(ServerError::AuthorizationError)));
        assert!(retryable(&refused(ServerError::AuthenticationError)));
        assert!(retryable(&ProducerError::Client {
            topic: "t".into(),
            source: ClientError::Connect {
                address: "b:6650".into(),
                source: ConnectionError::Disconnected,
            },
        }));
        for code in [
            ServerError::TopicNotFound,
            ServerError::TopicTerminatedError,
            ServerError::ProducerFenced,
        ] {
            assert!(!retryable(&refused(code)), "{code:?}");
        }
        assert!(!retryable(&ProducerError::Client {
            topic: "t".into(),
            source: ClientError::Closed,
        }));
        assert!(!retryable(&ProducerError::Closed));
    }
}
