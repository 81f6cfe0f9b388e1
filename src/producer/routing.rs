//! Choosing a partition for a message: by key hash, or round-robin.
//!
//! Pure: the router is told `now` and never reads the clock.
//!
//! **Which hash, and why there are three.** The official clients do not agree
//! on a default:
//!
//! | client | default `HashingScheme` | source |
//! |---|---|---|
//! | Java | `JavaStringHash` | `ProducerConfigurationData.hashingScheme` |
//! | C++, and Python (built on it) | `BoostHash` | `ProducerConfigurationImpl.h` |
//! | Go | `JavaStringHash` | `pulsar/internal/hash.go` |
//!
//! The Python client cannot change it (its `create_producer` has no
//! `hashing_scheme`). So "the same key lands on the same partition from every
//! client" holds only where the schemes match; [`HashingScheme::JavaStringHash`]
//! is the default here, as in Java and Go, and [`HashingScheme::BoostHash`]
//! matches the Python and C++ clients. All three take the hash modulo the
//! partition count after clearing the sign bit (Java's `& Integer.MAX_VALUE`
//! then `signSafeMod`), so the result is never negative.
//!
//! # Examples
//! ```
//! use pulsar_wire::producer::HashingScheme;
//! // Vectors from Apache Pulsar's own `HashTest` (Java and C++ agree on them).
//! assert_eq!(HashingScheme::Murmur3_32Hash.hash("k1"), 2_110_152_746);
//! assert_eq!(HashingScheme::JavaStringHash.hash("keykeykey2"), 42_978_643);
//! assert_eq!(HashingScheme::JavaStringHash.partition("keykeykey2", 7), 42_978_643 % 7);
//! ```

use std::time::{Duration, Instant};

/// How a key is hashed to choose its partition (Pulsar's `HashingScheme`).
///
/// # Examples
/// ```
/// use pulsar_wire::producer::HashingScheme;
/// // What the Python client (C++ BoostHash) computes for "k1".
/// assert_eq!(HashingScheme::BoostHash.hash("k1"), 1_072_173_493);
/// assert_eq!(HashingScheme::default(), HashingScheme::JavaStringHash);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HashingScheme {
    /// Java's `String.hashCode()` over UTF-16 code units: the Java and Go
    /// clients' default. (The C++ client's version sums signed bytes and Go's
    /// unsigned bytes, so for non-ASCII keys those two differ from Java.)
    #[default]
    JavaStringHash,
    /// MurmurHash3 x86 32-bit, seed 0, over the key's UTF-8 bytes.
    Murmur3_32Hash,
    /// `boost::hash<std::string>` as the C++ client (and so the Python
    /// client) computes it by default: Boost.ContainerHash's 64-bit string
    /// hash. Matches the PyPI `pulsar-client` 3.x builds on x86-64; a C++
    /// client built against an older Boost hashes differently.
    BoostHash,
}

impl HashingScheme {
    /// The key's hash with the sign bit cleared, as the official clients compute it.
    pub fn hash(self, key: &str) -> u32 {
        let raw = match self {
            Self::JavaStringHash => java_string_hash(key),
            Self::Murmur3_32Hash => murmur3_32(key.as_bytes()),
            // The C++ client keeps the low 31 bits of the 64-bit size_t.
            Self::BoostHash => boost_string_hash(key.as_bytes()) as u32,
        };
        raw & 0x7fff_ffff
    }

    /// The partition (of `partitions`, at least 1) that `key` goes to.
    pub fn partition(self, key: &str, partitions: u32) -> u32 {
        self.hash(key) % partitions.max(1)
    }
}

/// Java's `String.hashCode()`: `h = 31 * h + c` over UTF-16 code units, wrapping.
fn java_string_hash(key: &str) -> u32 {
    key.encode_utf16().fold(0u32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(u32::from(unit))
    })
}

/// MurmurHash3_x86_32 with seed 0 (Pulsar's `Murmur3_32Hash` before masking).
fn murmur3_32(data: &[u8]) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mix_k1 = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h1 = 0u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let k1 = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        h1 = (h1 ^ mix_k1(k1))
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe654_6b64);
    }
    let tail = chunks
        .remainder()
        .iter()
        .enumerate()
        .fold(0u32, |k, (i, &b)| k ^ (u32::from(b) << (8 * i)));
    // Pulsar mixes the (possibly zero) tail unconditionally; mix_k1(0) == 0.
    h1 ^= mix_k1(tail);
    h1 ^= data.len() as u32;
    h1 ^= h1 >> 16;
    h1 = h1.wrapping_mul(0x85eb_ca6b);
    h1 ^= h1 >> 13;
    h1 = h1.wrapping_mul(0xc2b2_ae35);
    h1 ^ (h1 >> 16)
}

/// Boost.ContainerHash's `hash_range` for byte strings on 64-bit targets
/// (seed 0): a multiply-xor hash over 8-byte little-endian words.
fn boost_string_hash(data: &[u8]) -> u64 {
    const Q: u64 = 0x9e37_79b9_7f4a_7c15;
    const K: u64 = 0xdf44_2d22_ce48_59b9; // Q * Q
    fn mulx(x: u64, y: u64) -> u64 {
        let r = u128::from(x) * u128::from(y);
        (r as u64) ^ ((r >> 64) as u64)
    }
    let read32 = |b: &[u8]| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let mut w = mulx(Q, K);
    let mut h = w ^ data.len() as u64;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        w = w.wrapping_add(Q);
        h ^= mulx(u64::from_le_bytes(word).wrapping_add(w), K);
    }
    let rest = chunks.remainder();
    let n = rest.len();
    let v = if n >= 4 {
        (read32(&rest[n - 4..]) << ((n - 4) * 8)) | read32(rest)
    } else if n >= 1 {
        let (x1, x2) = ((n - 1) & 2, n >> 1);
        (u64::from(rest[x1]) << (x1 * 8)) | (u64::from(rest[x2]) << (x2 * 8)) | u64::from(rest[0])
    } else {
        0
    };
    w = w.wrapping_add(Q);
    h ^= mulx(v.wrapping_add(w), K);
    mulx(h.wrapping_add(w), K)
}

/// Where messages without a key go on a partitioned topic.
///
/// # Examples
/// ```no_run
/// use pulsar_wire::producer::RoutingMode;
/// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
/// let p = client.producer("t").routing_mode(RoutingMode::SinglePartition).create().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RoutingMode {
    /// Round-robin. With batching on, stays on one partition for a whole
    /// switch interval so batches fill (Java's `RoundRobinPartitionMessageRouterImpl`).
    #[default]
    RoundRobin,
    /// Every message without a key goes to one partition, chosen at start.
    SinglePartition,
}

/// Chooses partitions for one partitioned producer.
#[derive(Debug)]
pub(crate) struct Router {
    mode: RoutingMode,
    scheme: HashingScheme,
    partitions: u32,
    start: u32,
    /// `Some(interval)` when batching: switch partition once per interval.
    switch_every: Option<Duration>,
    epoch: Instant,
    counter: u32,
}

impl Router {
    /// A router over `partitions` partitions starting at partition `start`
    /// (the driver picks it at random, as Java does, so producers spread).
    /// `switch_every` is `Some(10 × max batch delay)` when batching is on.
    pub(crate) fn new(
        mode: RoutingMode,
        scheme: HashingScheme,
        partitions: u32,
        start: u32,
        switch_every: Option<Duration>,
        now: Instant,
    ) -> Self {
        let partitions = partitions.max(1);
        Self {
            mode,
            scheme,
            partitions,
            start: start % partitions,
            switch_every: switch_every.map(|d| d.max(Duration::from_millis(1))),
            epoch: now,
            counter: 0,
        }
    }

    /// Routes over `partitions` partitions from now on (partitions were
    /// added); keyed messages follow the new count, as in Java.
    pub(crate) fn set_partitions(&mut self, partitions: u32) {
        self.partitions = partitions.max(1);
        self.start %= self.partitions;
        self.counter %= self.partitions;
    }

    /// The partition for a message with partition key `key`, sent at `now`.
    pub(crate) fn choose(&mut self, now: Instant, key: Option<&str>) -> u32 {
        if let Some(key) = key {
            return self.scheme.partition(key, self.partitions);
        }
        let step = match (self.mode, self.switch_every) {
            (RoutingMode::SinglePartition, _) => 0,
            (RoutingMode::RoundRobin, Some(every)) => {
                let windows =
                    now.saturating_duration_since(self.epoch).as_nanos() / every.as_nanos();
                (windows % u128::from(self.partitions)) as u32
            }
            (RoutingMode::RoundRobin, None) => {
                let step = self.counter;
                self.counter = (self.counter + 1) % self.partitions;
                step
            }
        };
        (self.start + step) % self.partitions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From Apache Pulsar's `pulsar-client/src/test/java/.../impl/HashTest.java`
    /// ("Same value as C++ client").
    #[test]
    fn java_hashtest_vectors() {
        let murmur = [
            ("k1", 2_110_152_746),
            ("k2", 1_479_966_664),
            ("key1", 462_881_061),
            ("key2", 1_936_800_180),
            ("key01", 39_696_932),
            ("key02", 751_761_803),
        ];
        for (key, want) in murmur {
            assert_eq!(HashingScheme::Murmur3_32Hash.hash(key), want, "{key}");
        }
        let java = [
            ("keykeykeykeykey1", 434_058_482),
            ("keykeykey2", 42_978_643),
        ];
        for (key, want) in java {
            assert_eq!(HashingScheme::JavaStringHash.hash(key), want, "{key}");
        }
    }

    /// Java's `hashCode` is over UTF-16 units, so non-ASCII and surrogate
    /// pairs follow Java, not the bytes.
    #[test]
    fn java_string_hash_follows_utf16() {
        assert_eq!(HashingScheme::JavaStringHash.hash(""), 0);
        assert_eq!(HashingScheme::JavaStringHash.hash("abc"), 96_354);
        assert_eq!(HashingScheme::JavaStringHash.hash("é"), 233);
        // "😀" is the pair D83D DE00: 0xD83D * 31 + 0xDE00.
        assert_eq!(
            HashingScheme::JavaStringHash.hash("😀"),
            0xD83D * 31 + 0xDE00
        );
    }

    /// Values computed by `pulsar::BoostHash::makeHash` and
    /// `pulsar::Murmur3_32Hash::makeHash` in the libpulsar of PyPI
    /// `pulsar-client` 3.13 (called through ctypes), covering every tail length.
    #[test]
    fn libpulsar_vectors() {
        let boost = [
            ("k1", 1_072_173_493),
            ("k2", 1_373_383_201),
            ("key1", 2_071_103_098),
            ("key2", 78_330_853),
            ("key01", 2_101_636_627),
            ("key02", 95_556_565),
            ("keykeykeykeykey1", 504_830_233),
            ("keykeykey2", 49_504_370),
            ("", 2_133_126_054),
            ("a", 2_135_870_748),
            ("abc", 1_074_445_565),
            ("é", 348_017_353),
            ("日本語", 18_892_553),
        ];
        for (key, want) in boost {
            assert_eq!(HashingScheme::BoostHash.hash(key), want, "{key:?}");
        }
        let murmur = [
            ("", 0),
            ("a", 1_009_084_850),
            ("abc", 870_159_354),
            ("é", 269_551_495),
            ("日本語", 631_534_231),
            ("keykeykey2", 304_171_170),
        ];
        for (key, want) in murmur {
            assert_eq!(HashingScheme::Murmur3_32Hash.hash(key), want, "{key:?}");
        }
    }

    #[test]
    fn keyed_messages_always_go_to_the_same_partition() {
        let t0 = crate::clock::now();
        let mut router = Router::new(
            RoutingMode::RoundRobin,
            HashingScheme::Murmur3_32Hash,
            7,
            3,
            None,
            t0,
        );
        let first = router.choose(t0, Some("k1"));
        assert_eq!(first, 2_110_152_746 % 7);
        for i in 0..20 {
            assert_eq!(
                router.choose(t0 + Duration::from_secs(i), Some("k1")),
                first
            );
        }
    }

    #[test]
    fn unbatched_round_robin_visits_every_partition_in_turn() {
        let t0 = crate::clock::now();
        let mut router = Router::new(
            RoutingMode::RoundRobin,
            HashingScheme::default(),
            4,
            2,
            None,
            t0,
        );
        let seen: Vec<u32> = (0..6).map(|_| router.choose(t0, None)).collect();
        assert_eq!(seen, [2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn batched_round_robin_stays_for_a_window_then_moves() {
        let t0 = crate::clock::now();
        let every = Duration::from_millis(100);
        let mut router = Router::new(
            RoutingMode::RoundRobin,
            HashingScheme::default(),
            3,
            1,
            Some(every),
            t0,
        );
        let ms = Duration::from_millis;
        assert_eq!(router.choose(t0, None), 1);
        assert_eq!(router.choose(t0 + ms(99), None), 1);
        assert_eq!(router.choose(t0 + ms(100), None), 2);
        assert_eq!(router.choose(t0 + ms(250), None), 0);
        assert_eq!(router.choose(t0 + ms(300), None), 1);
    }

    #[test]
    fn added_partitions_join_the_round_robin_and_the_key_hash() {
        let t0 = crate::clock::now();
        let mut router = Router::new(
            RoutingMode::RoundRobin,
            HashingScheme::JavaStringHash,
            2,
            0,
            None,
            t0,
        );
        assert_eq!(router.choose(t0, Some("keykeykey2")), 42_978_643 % 2);
        router.set_partitions(4);
        let seen: std::collections::BTreeSet<u32> =
            (0..4).map(|_| router.choose(t0, None)).collect();
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert_eq!(router.choose(t0, Some("keykeykey2")), 42_978_643 % 4);
    }

    #[test]
    fn single_partition_mode_never_moves_and_one_partition_is_zero() {
        let t0 = crate::clock::now();
        let mut single = Router::new(
            RoutingMode::SinglePartition,
            HashingScheme::default(),
            5,
            7,
            None,
            t0,
        );
        assert!((0..5).all(|_| single.choose(t0, None) == 2));
        let mut one = Router::new(
            RoutingMode::RoundRobin,
            HashingScheme::BoostHash,
            0,
            9,
            None,
            t0,
        );
        assert_eq!(one.choose(t0, Some("x")), 0);
        assert_eq!(one.choose(t0, None), 0);
    }
}
