//! Creating a producer on the broker, at the start and again after a
//! reconnect: register a mailbox, send PRODUCER, read PRODUCER_SUCCESS.
//!
//! A reconnect asks under the name the broker gave the first time (so
//! deduplication and the broker's view of the producer stay the same), on
//! the broker a CLOSE_PRODUCER / TOPIC_MIGRATED named, or found by a fresh
//! lookup. Which failures are worth another attempt is decided by
//! [`retryable`], a plain function.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::ProducerError;
use super::builder::AccessMode;
use super::task::Created;
use crate::client::{Client, ClientError, TopicName};
use crate::connection::{BrokerHint, Connection, ConnectionError, Response};
use crate::ids::ProducerId;
use crate::proto::{self, ProducerAccessMode, ServerError};
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
    let mode = match recipe.access_mode {
        AccessMode::Shared => ProducerAccessMode::Shared,
        AccessMode::Exclusive => ProducerAccessMode::Exclusive,
        AccessMode::WaitForExclusive => ProducerAccessMode::WaitForExclusive,
    };
    let body = |request_id: crate::ids::RequestId| proto::CommandProducer {
        topic: topic.to_owned(),
        producer_id: id.0,
        request_id: request_id.0,
        producer_name: recipe.name.clone(),
        user_provided_producer_name: Some(recipe.user_named),
        producer_access_mode: Some(mode as i32),
        ..proto::CommandProducer::default()
    };
    let answer = conn
        .request("PRODUCER", |request_id| {
            commands::producer(body(request_id))
        })
        .await;
    let success = match answer {
        Ok(Response::ProducerSuccess(s)) => s,
        Ok(other) => {
            conn.unregister_producer(id).await;
            return Err(ProducerError::UnexpectedResponse { got: other.kind() });
        }
        Err(e) => {
            conn.unregister_producer(id).await;
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
        events,
    })
}

/// Looks the topic up and creates the producer there.
pub(crate) async fn create(recipe: &Recipe) -> Result<Created, ProducerError> {
    let conn = recipe
        .client
        .lookup(&recipe.topic)
        .await
        .map_err(|source| ProducerError::Client {
            topic: recipe.topic.as_str().to_owned(),
            source,
        })?;
    create_on(recipe, conn).await
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
/// Dropping the receiver (the producer was closed) stops the attempt during
/// its delay; an attempt already talking to the broker finishes, and closes
/// the producer it made, so no producer is left behind on the broker.
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
        let outcome = recreate(&recipe, hint).await;
        if let Err(Ok(orphan)) = tx.send(outcome) {
            debug!(producer = %orphan.id, "producer closed during its reconnect: closing the new one");
            let id = orphan.id;
            let _ = orphan
                .conn
                .request("CLOSE_PRODUCER", |r| commands::close_producer(id, r))
                .await;
            orphan.conn.unregister_producer(id).await;
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
        let id = old.id;
        let closed = old
            .conn
            .request("CLOSE_PRODUCER", |r| commands::close_producer(id, r))
            .await;
        debug!(producer = %id, ?closed, "closed the old producer before re-creating it");
    }
    old.conn.unregister_producer(old.id).await;
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

/// Whether a failed reconnect attempt is worth another one. The broker
/// refusing the producer for good (topic gone or terminated, fenced, not
/// allowed, bad credentials) is not; lost connections, timeouts, a busy
/// producer name and unready brokers are.
pub(crate) fn retryable(err: &ProducerError) -> bool {
    let code = match err {
        ProducerError::Create { source, .. } => server_code(source),
        ProducerError::Client { source, .. } => match source {
            ClientError::Request { source, .. } | ClientError::Connect { source, .. } => {
                server_code(source)
            }
            ClientError::Closed => return false,
            _ => None,
        },
        ProducerError::UnexpectedResponse { .. } => None,
        _ => return false,
    };
    !code.is_some_and(|code| {
        matches!(
            code,
            ServerError::TopicNotFound
                | ServerError::TopicTerminatedError
                | ServerError::ProducerFenced
                | ServerError::AuthenticationError
                | ServerError::AuthorizationError
                | ServerError::NotAllowedError
                | ServerError::IncompatibleSchema
                | ServerError::InvalidTopicName
                | ServerError::UnsupportedVersionError
        )
    })
}

fn server_code(err: &ConnectionError) -> Option<ServerError> {
    match err {
        ConnectionError::Server { code, .. } => Some(*code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ServerError::AuthorizationError,
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
