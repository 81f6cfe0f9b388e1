//! Typed ids, so a producer id is never passed where a request id belongs.
//!
//! The protocol uses plain `uint64` for request, producer, consumer and
//! sequence ids; mixing them up compiles in most clients. Here each is its
//! own type, and a connection hands out request, producer and consumer ids
//! from one [`IdGen`].

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
    /// A producer's sequence number for one message (or the first of a batch).
    SequenceId
);

/// Hands out request, producer and consumer ids for one connection.
///
/// Ids are never reused while the connection lives, so a late answer to a
/// request that timed out can never be taken for the answer to a new one.
///
/// # Examples
/// ```
/// use pulsar_wire::ids::{IdGen, RequestId};
/// let mut ids = IdGen::default();
/// assert_eq!(ids.next_request(), RequestId(0));
/// assert_eq!(ids.next_request(), RequestId(1));
/// ```
#[derive(Debug, Default)]
pub struct IdGen {
    request: u64,
    producer: u64,
    consumer: u64,
}

impl IdGen {
    /// The next unused request id.
    pub fn next_request(&mut self) -> RequestId {
        RequestId(bump(&mut self.request))
    }

    /// The next unused producer id.
    pub fn next_producer(&mut self) -> ProducerId {
        ProducerId(bump(&mut self.producer))
    }

    /// The next unused consumer id.
    pub fn next_consumer(&mut self) -> ConsumerId {
        ConsumerId(bump(&mut self.consumer))
    }
}

fn bump(counter: &mut u64) -> u64 {
    let id = *counter;
    *counter = counter.wrapping_add(1);
    id
}
