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
