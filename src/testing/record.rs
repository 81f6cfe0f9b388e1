//! What the test broker records for assertions: events in order, and the
//! messages stored in a topic.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use crate::message_id::MessageId;

/// One thing that happened at the test broker. `at` is the time since the
/// broker started, on tokio's clock (paused in tests, so exact).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When, since the broker started.
    pub at: Duration,
    /// The topic (a partition's own name for a partitioned topic).
    pub topic: String,
    /// What happened.
    pub kind: EventKind,
}

/// What an [`Event`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// A message (an entry) was stored.
    Published {
        /// Its id.
        id: MessageId,
    },
    /// A SEND was refused with an injected error.
    SendFailed {
        /// The producer's sequence id.
        sequence_id: u64,
    },
    /// An entry was delivered to a consumer of `subscription`.
    Delivered {
        /// The subscription.
        subscription: String,
        /// The entry's id.
        id: MessageId,
        /// The redelivery count it carried.
        redelivery_count: u32,
    },
    /// A consumer of `subscription` acked the entry.
    Acked {
        /// The subscription.
        subscription: String,
        /// The entry's id.
        id: MessageId,
    },
    /// A consumer of `subscription` acked members of a batch one by one
    /// (batch index acks), the entry not acked whole yet.
    MembersAcked {
        /// The subscription.
        subscription: String,
        /// The entry's id.
        id: MessageId,
        /// The batch indexes the ack names.
        members: Vec<i32>,
    },
    /// The cursor of `subscription` was moved (a seek, or a reset from
    /// outside): its acks are forgotten and delivery starts again at
    /// entry `from`.
    CursorMoved {
        /// The subscription.
        subscription: String,
        /// The entry delivery starts again at.
        from: u64,
    },
    /// A consumer of `subscription` asked for the entry again (a nack,
    /// or the client's ack timeout: the wire does not tell them apart).
    RedeliveryRequested {
        /// The subscription.
        subscription: String,
        /// The entry's id.
        id: MessageId,
    },
}

/// A message stored in a topic of the test broker (a batch's members are
/// listed one by one, decompressed).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredMessage {
    /// Its id (with the batch index for a batch member).
    pub id: MessageId,
    /// The payload.
    pub payload: Bytes,
    /// The key.
    pub key: Option<String>,
    /// The properties.
    pub properties: BTreeMap<String, String>,
    /// The event time, ms since the Unix epoch.
    pub event_time: Option<u64>,
    /// When it was stored, since the broker started.
    pub stored_at: Duration,
    /// How long after it was stored it is delivered (delayed delivery).
    pub deliver_after: Option<Duration>,
}

impl StoredMessage {
    /// The property `name`, if set.
    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name).map(String::as_str)
    }

    /// The payload as UTF-8 text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }
}
