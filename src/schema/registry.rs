//! The broker's schema registry: GET_SCHEMA and GET_OR_CREATE_SCHEMA on
//! the [`Client`], and the consumer's cache of writers' schemas.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use super::{SchemaError, SchemaInfo, SchemaVersion};
use crate::client::{Client, ClientError, TopicName};
use crate::connection::{ConnectionError, Response};
use crate::proto::ServerError;
use crate::wire::commands;

impl Client {
    /// The schema of `topic` at `version` (its latest when `None`) and that
    /// schema's version; `None` if the topic has no schema (or no such
    /// version).
    ///
    /// # Errors
    /// [`ClientError::InvalidTopic`] for a name that is not a topic, the
    /// errors of [`lookup`](Self::lookup), and
    /// [`ClientError::Request`] if GET_SCHEMA failed (a refusal, a timeout:
    /// pulsar-lite never answers it).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// if let Some((info, version)) = client.schema("orders", None).await? {
    ///     println!("{} schema, version {version}: {:?}", info.schema_type, info.definition());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn schema(
        &self,
        topic: &str,
        version: Option<&SchemaVersion>,
    ) -> Result<Option<(SchemaInfo, SchemaVersion)>, ClientError> {
        const OP: &str = "GET_SCHEMA";
        let name = TopicName::parse(topic).map_err(ClientError::from)?;
        let conn = self.lookup(&name).await?;
        let asked = version.map(|v| v.0.clone());
        let answer = conn
            .request(OP, |request| {
                commands::get_schema(name.as_str(), asked, request)
            })
            .await;
        match answer {
            Ok(Response::GetSchemaResponse(r)) => Ok(r.schema.as_ref().map(|s| {
                let version = r
                    .schema_version
                    .clone()
                    .or_else(|| version.map(|v| v.0.clone()))
                    .unwrap_or_default();
                (SchemaInfo::from_proto(s), SchemaVersion(version))
            })),
            Ok(other) => Err(ClientError::UnexpectedResponse {
                op: OP,
                topic: name.as_str().to_owned(),
                got: other.kind(),
            }),
            // The broker's answer for a topic without a schema.
            Err(ConnectionError::Server {
                code: ServerError::TopicNotFound,
                ..
            }) => Ok(None),
            Err(source) => Err(ClientError::Request {
                op: OP,
                topic: name.as_str().to_owned(),
                source,
            }),
        }
    }

    /// Registers `info` on `topic` (if the topic's compatibility rules
    /// allow it; an identical schema keeps its version) and returns its
    /// version. The topic must exist (a producer or consumer on it made it).
    ///
    /// # Errors
    /// [`ClientError::Request`] with the broker's `IncompatibleSchema`
    /// refusal, or another failure of GET_OR_CREATE_SCHEMA.
    pub async fn register_schema(
        &self,
        topic: &str,
        info: &SchemaInfo,
    ) -> Result<SchemaVersion, ClientError> {
        const OP: &str = "GET_OR_CREATE_SCHEMA";
        let name = TopicName::parse(topic).map_err(ClientError::from)?;
        let Some(schema) = info.to_proto() else {
            // BYTES registers nothing.
            return Ok(SchemaVersion(Bytes::new()));
        };
        let conn = self.lookup(&name).await?;
        let answer = conn
            .request(OP, |request| {
                commands::get_or_create_schema(name.as_str(), schema, request)
            })
            .await;
        match answer {
            Ok(Response::GetOrCreateSchemaResponse(r)) => {
                Ok(SchemaVersion(r.schema_version.unwrap_or_default()))
            }
            Ok(other) => Err(ClientError::UnexpectedResponse {
                op: OP,
                topic: name.as_str().to_owned(),
                got: other.kind(),
            }),
            Err(source) => Err(ClientError::Request {
                op: OP,
                topic: name.as_str().to_owned(),
                source,
            }),
        }
    }
}

/// The schemas of the versions a consumer met, each fetched once.
#[derive(Debug, Default)]
pub(crate) struct WriterSchemas {
    known: tokio::sync::Mutex<HashMap<(String, SchemaVersion), Arc<SchemaInfo>>>,
}

impl WriterSchemas {
    /// The schema `topic` had at `version`: from the cache, or fetched (one
    /// fetch at a time, so a version is fetched once). A failed fetch is
    /// not cached: the next message of that version tries again.
    pub(crate) async fn get(
        &self,
        client: &Client,
        topic: &str,
        version: &SchemaVersion,
    ) -> Result<Arc<SchemaInfo>, SchemaError> {
        let base = base_topic(topic);
        let mut known = self.known.lock().await;
        let key = (base.to_owned(), version.clone());
        if let Some(info) = known.get(&key) {
            return Ok(info.clone());
        }
        let fetched = client
            .schema(base, Some(version))
            .await
            .map_err(|source| SchemaError::Fetch {
                topic: base.to_owned(),
                version: version.clone(),
                source: Box::new(source),
            })?
            .ok_or_else(|| SchemaError::NoSuchVersion {
                topic: base.to_owned(),
                version: version.clone(),
            })?;
        let info = Arc::new(fetched.0);
        known.insert(key, info.clone());
        Ok(info)
    }
}

/// A partition's schema is its topic's: `t-partition-3` → `t`.
fn base_topic(topic: &str) -> &str {
    match topic.rsplit_once("-partition-") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => topic,
    }
}

#[cfg(test)]
mod tests {
    use super::base_topic;

    #[test]
    fn partitions_share_their_topics_schema() {
        assert_eq!(
            base_topic("persistent://p/n/t-partition-12"),
            "persistent://p/n/t"
        );
        assert_eq!(base_topic("persistent://p/n/t"), "persistent://p/n/t");
        assert_eq!(
            base_topic("persistent://p/n/t-partition-x"),
            "persistent://p/n/t-partition-x"
        );
    }
}
