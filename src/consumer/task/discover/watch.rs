//! The broker side of discovery: setting up a topic-list watcher, closing
//! it, and undoing what a finding nobody takes set up.

use super::*;

/// Closes watcher `id` on `conn` and stops routing its updates.
pub(super) async fn close_watcher(conn: Connection, id: WatcherId) {
    let _ = conn
        .request("WATCH_TOPIC_LIST_CLOSE", |r| {
            commands::watch_topic_list_close(id, r)
        })
        .await;
    conn.unregister_watcher(id).await;
}

/// Undoes what a finding nobody takes set up on the broker (the consumer
/// is gone): closes the consumers it subscribed and its watcher.
pub(super) async fn discard(found: Found) {
    match found {
        Found::Subscribed { added, .. } => {
            for (_, attached) in added {
                if let Ok((conn, id, _)) = attached {
                    close_orphan(&conn, id).await;
                }
            }
        }
        Found::Watching(Ok(Some(w))) => {
            close_watcher(w.conn, w.id).await;
        }
        Found::Listing { .. } | Found::Watching(_) => {}
    }
}

/// Sets up a topic-list watcher for `pattern` at a host of the service URL.
pub(super) async fn watch_topics(
    client: &Client,
    pattern: &TopicsPattern,
    hash: Option<&str>,
) -> Result<Option<Watching>, ClientError> {
    const OP: &str = "WATCH_TOPIC_LIST";
    let conn = client.service_connection().await?;
    if !conn.supports_topic_watchers() {
        return Ok(None);
    }
    let failed = |source| ClientError::Request {
        op: OP,
        topic: pattern.given.clone(),
        source,
    };
    let id = conn.next_watcher_id();
    let (tx, events) = mpsc::unbounded_channel();
    conn.register_watcher(id, tx).await.map_err(failed)?;
    let answer = conn
        .request(OP, |r| {
            commands::watch_topic_list(id, &pattern.namespace, &pattern.wire, hash, r)
        })
        .await;
    match answer {
        Ok(Response::WatchTopicListSuccess(s)) => Ok(Some(Watching {
            conn,
            id,
            events,
            topics: (hash != Some(s.topics_hash.as_str())).then_some(s.topic),
            hash: s.topics_hash,
        })),
        other => {
            conn.unregister_watcher(id).await;
            match other {
                Err(source) => Err(failed(source)),
                Ok(got) => Err(ClientError::UnexpectedResponse {
                    op: OP,
                    topic: pattern.given.clone(),
                    got: got.kind(),
                }),
            }
        }
    }
}
