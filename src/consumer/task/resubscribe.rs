//! Subscribing again in the background: each attempt is a task of its own
//! that reports on one channel, so the driver's loop keeps serving receive,
//! ack and close meanwhile. Each partition keeps its backoff; a failure is
//! retried unless it is final ([`retryable`]); a subscription that arrives
//! after the consumer closed is closed on the broker, never left behind.

use super::*;
use crate::client::backoff::Backoff;
use crate::connection::ConnectionError;
use crate::proto::ServerError;

/// A new subscription: its connection, consumer id and mailbox.
pub(super) type Attached = (
    Connection,
    ConsumerId,
    mpsc::UnboundedReceiver<ConsumerEvent>,
);

/// The outcome of one resubscribe attempt of sub `index`, generation `gen`.
pub(super) type Outcome = (usize, u64, Result<Attached, ConsumerError>);

/// The resubscribe attempts under way (each a task of its own, reporting
/// on one channel) and each partition's backoff.
pub(super) struct Resubscribes {
    tx: mpsc::UnboundedSender<Outcome>,
    rx: mpsc::UnboundedReceiver<Outcome>,
    pub(super) backoff: HashMap<usize, Backoff>,
    /// The last delay each partition waited before subscribing again.
    pub(super) last_delay: HashMap<usize, Duration>,
    /// Subs between losing their subscription and getting it back.
    pub(super) running: std::collections::HashSet<usize>,
}

impl Default for Resubscribes {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            tx,
            rx,
            backoff: HashMap::new(),
            last_delay: HashMap::new(),
            running: std::collections::HashSet::new(),
        }
    }
}

impl Resubscribes {
    /// The next finished attempt (pending while none runs).
    pub(super) async fn next(&mut self) -> Outcome {
        match self.rx.recv().await {
            Some(outcome) => outcome,
            // Never: `self` holds a sender.
            None => std::future::pending().await,
        }
    }

    /// Whether sub `index` is between losing its subscription and getting
    /// it back (its connection and consumer id are stale meanwhile).
    pub(super) fn is_running(&self, index: usize) -> bool {
        self.running.contains(&index)
    }

    /// How many attempts partition `index` has made since its last success.
    pub(super) fn attempts(&self, index: usize) -> u32 {
        self.backoff.get(&index).map_or(0, Backoff::attempts)
    }

    /// No more attempts: running ones stop (or close what they make), and
    /// subscriptions that arrived but were not taken yet are closed.
    pub(super) async fn shut(&mut self) {
        self.rx.close();
        while let Ok((_, _, outcome)) = self.rx.try_recv() {
            if let Ok((conn, id, _)) = outcome {
                close_orphan(&conn, id).await;
            }
        }
    }

    /// Runs `attempt` after `delay` as a task. Once the consumer is gone
    /// (the channel closed) the task stops during its delay; an attempt
    /// already talking to the broker finishes and closes what it
    /// subscribed, so no consumer is left behind on the broker.
    pub(super) fn spawn(
        &mut self,
        delay: Duration,
        index: usize,
        generation: u64,
        attempt: impl std::future::Future<Output = Result<Attached, ConsumerError>> + Send + 'static,
    ) {
        self.running.insert(index);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = tx.closed() => return,
            }
            let outcome = attempt.await;
            if let Err(mpsc::error::SendError((_, _, Ok((conn, id, _))))) =
                tx.send((index, generation, outcome))
            {
                close_orphan(&conn, id).await;
            }
        });
    }
}

/// Closes a subscription nobody will use (made after the consumer closed,
/// or superseded).
pub(super) async fn close_orphan(conn: &Connection, id: ConsumerId) {
    debug!(
        consumer = id.0,
        "closing a subscription made after it was needed"
    );
    let _ = conn
        .request("CLOSE_CONSUMER", |r| commands::close_consumer(id, r))
        .await;
    conn.unregister_consumer(id).await;
}

/// Whether a failed subscribe *again* is worth another attempt: not when the
/// broker refuses for good (topic or subscription gone, not allowed); yes
/// for lost connections, timeouts, a busy consumer, and refused credentials.
pub(super) fn retryable(err: &ConsumerError) -> bool {
    let source = match err {
        ConsumerError::Request { source, .. } => source,
        ConsumerError::Client { source, .. } => match source {
            crate::client::ClientError::Request { source, .. }
            | crate::client::ClientError::Connect { source, .. } => source,
            crate::client::ClientError::Closed => return false,
            _ => return true,
        },
        ConsumerError::UnexpectedResponse { .. } => return true,
        _ => return false,
    };
    // Credentials refused while subscribing *again* are retried: a rotated
    // token may reach the client seconds later. (The first subscribe never
    // comes here: its refusal is final.)
    !matches!(
        source,
        ConnectionError::Server {
            code: ServerError::TopicNotFound
                | ServerError::SubscriptionNotFound
                | ServerError::NotAllowedError
                | ServerError::IncompatibleSchema
                | ServerError::InvalidTopicName
                | ServerError::TopicTerminatedError,
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientError;

    fn refused(code: ServerError) -> ConsumerError {
        ConsumerError::Request {
            op: "SUBSCRIBE",
            topic: "t".into(),
            source: ConnectionError::Server {
                op: "SUBSCRIBE",
                code,
                message: String::new(),
            },
        }
    }

    #[test]
    fn passing_trouble_is_retried_and_final_refusals_are_not() {
        assert!(retryable(&refused(ServerError::ConsumerBusy)));
        assert!(retryable(&refused(ServerError::ServiceNotReady)));
        assert!(retryable(&ConsumerError::Request {
            op: "SUBSCRIBE",
            topic: "t".into(),
            source: ConnectionError::Disconnected,
        }));
        assert!(retryable(&ConsumerError::Client {
            topic: "t".into(),
            source: ClientError::Connect {
                address: "b:6650".into(),
                source: ConnectionError::Closed,
            },
        }));
        assert!(retryable(&refused(ServerError::AuthenticationError)));
        assert!(retryable(&refused(ServerError::AuthorizationError)));
        for code in [
            ServerError::TopicNotFound,
            ServerError::SubscriptionNotFound,
            ServerError::TopicTerminatedError,
        ] {
            assert!(!retryable(&refused(code)), "{code:?}");
        }
        assert!(!retryable(&ConsumerError::Client {
            topic: "t".into(),
            source: ClientError::Closed,
        }));
        assert!(!retryable(&ConsumerError::Closed));
    }
}
