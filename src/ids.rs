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

/// Maps keyed by the ids above, hashed cheaply: the client hands the ids
/// out (counters), so SipHash's protection against chosen keys buys
/// nothing, and a MESSAGE frame looks its consumer up more than once.
pub(crate) type IdMap<K, V> = std::collections::HashMap<K, V, BuildIdHasher>;

/// Builds [`IdHasher`]s.
pub(crate) type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;

/// Multiplies the id by an odd constant (Fibonacci hashing): consecutive
/// ids land in distinct buckets, and the high bits hashbrown keeps as tags
/// are mixed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_hash_apart_in_low_and_high_bits() {
        use std::hash::BuildHasher;
        let build = BuildIdHasher::default();
        let hashes: Vec<u64> = (0..64).map(|n| build.hash_one(ConsumerId(n))).collect();
        let low: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 63).collect();
        let high: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert_eq!(low.len(), 64);
        assert!(high.len() > 32, "{} distinct tags", high.len());
    }

    #[test]
    fn an_id_map_finds_what_it_holds() {
        let mut map: IdMap<ConsumerId, u32> = IdMap::default();
        for n in 0..1000 {
            map.insert(ConsumerId(n * 7), n as u32);
        }
        assert!((0..1000).all(|n| map.get(&ConsumerId(n * 7)) == Some(&(n as u32))));
        assert_eq!(map.get(&ConsumerId(1)), None);
    }
}
