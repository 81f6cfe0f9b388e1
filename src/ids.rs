//! Typed ids, so a producer id is never passed where a request id belongs.
//!
//! The protocol uses plain `uint64` for request, producer, consumer and
//! sequence ids; mixing them up compiles in most clients. Here each is its
//! own type.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// Correlates a request (lookup, subscribe, …) with its response on one connection.
    RequestId
);
id_type!(
    /// Names a producer on one connection; receipts and send errors carry it.
    ProducerId
);
id_type!(
    /// Names a consumer on one connection; messages, acks and flow carry it.
    ConsumerId
);
id_type!(
    /// Names a topic-list watcher on one connection; WATCH_TOPIC_UPDATE carries it.
    WatcherId
);
id_type!(
    /// A producer's sequence number for one message (or the first of a batch).
    SequenceId
);

/// A transaction's id: the coordinator that owns it (`most_bits`, the
/// coordinator's partition of the assign topic) and its number there
/// (`least_bits`). Shown as `(most,least)`, as the Java client does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxnId {
    /// The transaction coordinator's id.
    pub most_bits: u64,
    /// The transaction's number on its coordinator.
    pub least_bits: u64,
}

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{})", self.most_bits, self.least_bits)
    }
}

impl TxnId {
    /// The transaction a message's metadata names, if any.
    pub fn of_metadata(metadata: &crate::proto::MessageMetadata) -> Option<Self> {
        match (metadata.txnid_most_bits, metadata.txnid_least_bits) {
            (Some(most_bits), Some(least_bits)) => Some(Self {
                most_bits,
                least_bits,
            }),
            _ => None,
        }
    }

    /// Writes this transaction into a message's metadata.
    pub fn write_to(self, metadata: &mut crate::proto::MessageMetadata) {
        metadata.txnid_most_bits = Some(self.most_bits);
        metadata.txnid_least_bits = Some(self.least_bits);
    }
}
