//! [`TransactionError`]: what can go wrong with a transaction.

use std::time::Duration;

use crate::client::ClientError;
use crate::connection::ConnectionError;
use crate::ids::TxnId;
use crate::proto::ServerError;

use super::TransactionState;

/// A transaction failed, or could not be started, committed or aborted.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// The client was built without
    /// [`enable_transaction(true)`](crate::ClientBuilder::enable_transaction).
    #[error(
        "transactions are not enabled on this client: build it with `enable_transaction(true)`"
    )]
    NotEnabled,
    /// A builder setting is out of range (found before any IO).
    #[error("invalid transaction option `{option}`: {reason}")]
    InvalidOption {
        /// The setting.
        option: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The transaction is not open, so `op` cannot be part of it (it was
    /// committed, aborted, or is ending).
    #[error("transaction {txn} is {state:?}; {op} needs an open transaction")]
    NotOpen {
        /// The transaction.
        txn: TxnId,
        /// Where it is.
        state: TransactionState,
        /// What was asked.
        op: &'static str,
    },
    /// The transaction outlived its timeout: the coordinator aborts it by
    /// itself, and nothing produced or acked in it takes effect.
    #[error("transaction {txn} timed out (timeout {timeout:?}); the coordinator aborts it")]
    TimedOut {
        /// The transaction.
        txn: TxnId,
        /// The timeout it was begun with.
        timeout: Duration,
    },
    /// Commit found sends or acks of the transaction that had failed, so
    /// it aborted the transaction instead.
    #[error(
        "transaction {txn} was aborted instead of committed: {failed} of its sends or acks failed"
    )]
    OperationFailed {
        /// The transaction.
        txn: TxnId,
        /// How many of its operations failed.
        failed: usize,
    },
    /// The broker has no transaction coordinator with this id (transactions
    /// off on the broker, or the coordinator is moving and did not come
    /// back within the operation timeout).
    #[error("{op}: transaction coordinator {tc} not found: {message}")]
    CoordinatorNotFound {
        /// The request.
        op: &'static str,
        /// The coordinator's id.
        tc: u64,
        /// The broker's explanation.
        message: String,
    },
    /// An ack in the transaction conflicts with an ack of another
    /// transaction (or a plain ack) of the same message.
    #[error("{op}: transaction conflict: {message}")]
    Conflict {
        /// The request.
        op: &'static str,
        /// The broker's explanation.
        message: String,
    },
    /// The coordinator does not know the transaction (it ended, or timed
    /// out and was aborted).
    #[error("{op}: transaction {txn} not found: {message}")]
    NotFound {
        /// The request.
        op: &'static str,
        /// The transaction.
        txn: TxnId,
        /// The broker's explanation.
        message: String,
    },
    /// The coordinator refused `op` in the transaction's current state (for
    /// example, a commit of a transaction that is aborting).
    #[error("{op}: transaction {txn} has an invalid status: {message}")]
    InvalidStatus {
        /// The request.
        op: &'static str,
        /// The transaction.
        txn: TxnId,
        /// The broker's explanation.
        message: String,
    },
    /// A request to the coordinator failed otherwise: another broker error,
    /// no answer within the operation timeout (a broker without
    /// transaction support, such as one that ignores these commands), or
    /// the connection was lost and could not be made again in time.
    #[error("transaction coordinator {tc}: {op} failed: {source}")]
    Request {
        /// The request.
        op: &'static str,
        /// The coordinator's id.
        tc: u64,
        /// What happened.
        #[source]
        source: ConnectionError,
    },
    /// The coordinator could not be found: the lookup of its topic failed.
    #[error("looking up transaction coordinator {tc} failed: {source}")]
    Lookup {
        /// The coordinator's id (its partition of the assign topic).
        tc: u64,
        /// What happened.
        #[source]
        source: ClientError,
    },
    /// The coordinator answered with a response of another kind.
    #[error("{op}: unexpected answer {got}")]
    UnexpectedResponse {
        /// The request.
        op: &'static str,
        /// The answer's command name.
        got: &'static str,
    },
}

impl TransactionError {
    /// Maps a coordinator request's failure to its typed error.
    pub(crate) fn from_request(
        op: &'static str,
        tc: u64,
        txn: Option<TxnId>,
        source: ConnectionError,
    ) -> Self {
        let ConnectionError::Server { code, message, .. } = &source else {
            return Self::Request { op, tc, source };
        };
        let message = message.clone();
        match (code, txn) {
            (ServerError::TransactionCoordinatorNotFound, _) => {
                Self::CoordinatorNotFound { op, tc, message }
            }
            (ServerError::TransactionConflict, _) => Self::Conflict { op, message },
            (ServerError::TransactionNotFound, Some(txn)) => Self::NotFound { op, txn, message },
            (ServerError::InvalidTxnStatus, Some(txn)) => Self::InvalidStatus { op, txn, message },
            _ => Self::Request { op, tc, source },
        }
    }

    /// Whether the coordinator no longer has the transaction open: it is
    /// not found or in another status (as after its timeout).
    pub(crate) const fn is_gone(&self) -> bool {
        matches!(self, Self::NotFound { .. } | Self::InvalidStatus { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: ServerError) -> ConnectionError {
        ConnectionError::Server {
            op: "END_TXN",
            code,
            message: "m".into(),
        }
    }

    #[test]
    fn coordinator_codes_become_typed_errors() {
        let txn = TxnId {
            most_bits: 0,
            least_bits: 7,
        };
        let map = |code| TransactionError::from_request("END_TXN", 0, Some(txn), server(code));
        assert!(matches!(
            map(ServerError::TransactionCoordinatorNotFound),
            TransactionError::CoordinatorNotFound { tc: 0, .. }
        ));
        assert!(matches!(
            map(ServerError::TransactionConflict),
            TransactionError::Conflict { .. }
        ));
        assert!(matches!(
            map(ServerError::TransactionNotFound),
            TransactionError::NotFound { .. }
        ));
        assert!(matches!(
            map(ServerError::InvalidTxnStatus),
            TransactionError::InvalidStatus { .. }
        ));
        assert!(matches!(
            map(ServerError::PersistenceError),
            TransactionError::Request { .. }
        ));
        let timeout = ConnectionError::Timeout {
            op: "TC_CLIENT_CONNECT",
            after: Duration::from_secs(2),
        };
        let err = TransactionError::from_request("TC_CLIENT_CONNECT", 0, None, timeout);
        assert!(err.to_string().contains("TC_CLIENT_CONNECT"), "{err}");
        assert!(map(ServerError::TransactionNotFound).is_gone());
    }
}
