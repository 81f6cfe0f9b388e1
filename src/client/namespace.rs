//! The topics of a namespace: GET_TOPICS_OF_NAMESPACE, asked at a host of
//! the service URL (any broker answers for any namespace).

use super::{Client, ClientError};
use crate::connection::{Connection, Response};
use crate::proto::command_get_topics_of_namespace::Mode;
use crate::wire::commands;

const OP: &str = "GET_TOPICS_OF_NAMESPACE";

/// A namespace's topics as the broker listed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicListing {
    /// Full names: plain topics and partitions (`…-partition-N`).
    pub(crate) topics: Vec<String>,
    /// The broker's hash of `topics`, if it sent one.
    pub(crate) hash: Option<String>,
    /// False when the hash asked with is still the broker's: `topics` is
    /// empty then, and what the client has is current.
    pub(crate) changed: bool,
}

impl Client {
    /// A pooled connection to a host of the service URL.
    pub(crate) async fn service_connection(&self) -> Result<Connection, ClientError> {
        let (_, conn) = self.inner.service.connect(&self.inner.pool).await?;
        Ok(conn)
    }

    /// The topics of `namespace` (`tenant/ns`) in `mode`; the broker may
    /// filter them with `pattern` (the caller filters again), and lists
    /// none if their hash is still `hash`.
    pub(crate) async fn topics_of_namespace(
        &self,
        namespace: &str,
        mode: Mode,
        pattern: Option<&str>,
        hash: Option<&str>,
    ) -> Result<TopicListing, ClientError> {
        let conn = self.service_connection().await?;
        let answer = conn
            .request(OP, |id| {
                commands::get_topics_of_namespace(namespace, mode, pattern, hash, id)
            })
            .await;
        match answer {
            Ok(Response::GetTopicsOfNamespaceResponse(r)) => Ok(TopicListing {
                changed: r.changed(),
                hash: r.topics_hash,
                topics: r.topics,
            }),
            Ok(other) => Err(ClientError::UnexpectedResponse {
                op: OP,
                topic: namespace.to_owned(),
                got: other.kind(),
            }),
            Err(source) => Err(ClientError::Request {
                op: OP,
                topic: namespace.to_owned(),
                source,
            }),
        }
    }
}
