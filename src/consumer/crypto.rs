//! Entries the consumer cannot decode (pure): encrypted ones (this client
//! holds no keys) and those compressed with a codec it does not know.
//!
//! Such an entry is never deleted behind the application's back. What
//! happens to an encrypted one is the consumer's [`CryptoFailureAction`];
//! an unknown codec is always treated as [`CryptoFailureAction::Fail`].
//! Either way the entry stays one message (an encrypted batch is not split:
//! its members are inside the ciphertext) with its [`EncryptionContext`].

use std::collections::HashMap;

use bytes::Bytes;

use crate::compression::Compression;
use crate::proto::{EncryptionKeys, KeyValue, MessageMetadata};

/// What the consumer does with an encrypted message it cannot decrypt, as
/// the Java client's `ConsumerCryptoFailureAction`.
///
/// # Examples
/// ```
/// use pulsar_wire::consumer::CryptoFailureAction;
/// assert_eq!(CryptoFailureAction::default(), CryptoFailureAction::Fail);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CryptoFailureAction {
    /// Never ack it and never hand it out: `receive()` (and `run`) return
    /// [`ConsumerError::Unreadable`](super::ConsumerError::Unreadable)
    /// naming it, and it stays unacked in the subscription, so a consumer
    /// with the key can read it. The consumer keeps it as a message the
    /// application holds: the ack timeout, if set, asks for it again;
    /// otherwise it returns to the subscription when this consumer closes
    /// or reconnects. The default.
    #[default]
    Fail,
    /// Ack it (reporting a decryption error to the broker): it is deleted
    /// from the subscription unread.
    Discard,
    /// Hand it out undecrypted: the payload is the ciphertext (of the
    /// compressed entry, and of the whole batch for a batch), and
    /// [`Message::encryption_context`](super::Message::encryption_context)
    /// says how to decrypt and decode it.
    Consume,
}

/// One data key of an encrypted message: the symmetric key, encrypted with
/// the public key named `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptionKey {
    /// The name of the public key the data key was encrypted with.
    pub name: String,
    /// The encrypted data key.
    pub value: Bytes,
    /// The key's metadata, as the producer's key reader gave it.
    pub metadata: HashMap<String, String>,
}

/// How the payload of a message handed out undecoded is encoded: its
/// encryption (keys, algorithm, parameter) and, under the encryption, its
/// compression and batching. As the Java client's `EncryptionContext`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptionContext {
    keys: Vec<EncryptionKey>,
    algorithm: Option<String>,
    param: Option<Bytes>,
    compression: i32,
    uncompressed_size: u32,
    batch_size: Option<u32>,
}

impl EncryptionContext {
    /// The encoding fields of an entry's metadata.
    pub(crate) fn of(metadata: &MessageMetadata) -> Self {
        Self {
            keys: metadata
                .encryption_keys
                .iter()
                .map(|k| EncryptionKey {
                    name: k.key.clone(),
                    value: k.value.clone(),
                    metadata: k
                        .metadata
                        .iter()
                        .map(|p| (p.key.clone(), p.value.clone()))
                        .collect(),
                })
                .collect(),
            algorithm: metadata.encryption_algo.clone(),
            param: metadata.encryption_param.clone(),
            compression: metadata.compression.unwrap_or_default(),
            uncompressed_size: metadata.uncompressed_size.unwrap_or(0),
            batch_size: metadata
                .num_messages_in_batch
                .map(|n| u32::try_from(n).unwrap_or(0)),
        }
    }

    /// Writes the encoding fields back into `metadata` (for a copy of the
    /// message, e.g. to the dead-letter topic, that stays readable with
    /// the key).
    pub(crate) fn write_to(&self, metadata: &mut MessageMetadata) {
        metadata.encryption_keys = self
            .keys
            .iter()
            .map(|k| {
                let mut metadata: Vec<KeyValue> = k
                    .metadata
                    .iter()
                    .map(|(key, value)| KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect();
                metadata.sort_by(|a, b| a.key.cmp(&b.key));
                EncryptionKeys {
                    key: k.name.clone(),
                    value: k.value.clone(),
                    metadata,
                }
            })
            .collect();
        metadata.encryption_algo.clone_from(&self.algorithm);
        metadata.encryption_param.clone_from(&self.param);
        metadata.compression = (self.compression != 0).then_some(self.compression);
        metadata.uncompressed_size = (self.compression != 0).then_some(self.uncompressed_size);
        metadata.num_messages_in_batch = self
            .batch_size
            .map(|n| i32::try_from(n).unwrap_or(i32::MAX));
    }

    /// Whether the payload is encrypted (otherwise it is compressed with a
    /// codec this client does not know).
    pub fn is_encrypted(&self) -> bool {
        !self.keys.is_empty()
    }

    /// The encrypted data keys, one per public key the producer used.
    pub fn keys(&self) -> &[EncryptionKey] {
        &self.keys
    }

    /// The encryption algorithm, if the producer named one.
    pub fn algorithm(&self) -> Option<&str> {
        self.algorithm.as_deref()
    }

    /// The encryption parameter (the initialisation vector).
    pub fn param(&self) -> Option<&Bytes> {
        self.param.as_ref()
    }

    /// The codec of the payload under the encryption, or the protocol
    /// value this client does not know.
    ///
    /// # Errors
    /// The raw `compression` value when it names no known codec.
    pub fn compression(&self) -> Result<Compression, i32> {
        Compression::from_proto(self.compression).map_err(|_| self.compression)
    }

    /// The payload's size once decrypted and decompressed (0 when not
    /// compressed).
    pub fn uncompressed_size(&self) -> u32 {
        self.uncompressed_size
    }

    /// For a batch, the number of messages in it: the decrypted payload is
    /// then a batch to split.
    pub fn batch_size(&self) -> Option<u32> {
        self.batch_size
    }
}

/// Why a message was not handed to the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unreadable {
    /// It is encrypted and the crypto failure action is
    /// [`CryptoFailureAction::Fail`].
    Encrypted,
    /// Its `compression` names a codec this client does not know.
    UnknownCompression(i32),
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Encrypted => f.write_str("it is encrypted and this consumer cannot decrypt it"),
            Self::UnknownCompression(codec) => write!(f, "unknown compression type {codec}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_round_trips_through_metadata() {
        let metadata = MessageMetadata {
            encryption_keys: vec![EncryptionKeys {
                key: "k1".into(),
                value: Bytes::from_static(&[1, 2, 3]),
                metadata: vec![KeyValue {
                    key: "a".into(),
                    value: "b".into(),
                }],
            }],
            encryption_algo: Some("RSA".into()),
            encryption_param: Some(Bytes::from_static(&[9; 12])),
            compression: Some(2),
            uncompressed_size: Some(77),
            num_messages_in_batch: Some(4),
            ..MessageMetadata::default()
        };
        let context = EncryptionContext::of(&metadata);
        assert!(context.is_encrypted());
        assert_eq!(context.keys()[0].name, "k1");
        assert_eq!(context.keys()[0].metadata["a"], "b");
        assert_eq!(context.algorithm(), Some("RSA"));
        assert_eq!(context.compression(), Ok(Compression::Zlib));
        assert_eq!(
            (context.uncompressed_size(), context.batch_size()),
            (77, Some(4))
        );
        let mut copy = MessageMetadata::default();
        context.write_to(&mut copy);
        assert_eq!(copy, metadata);
    }

    #[test]
    fn an_unknown_codec_is_reported_as_its_raw_value() {
        let metadata = MessageMetadata {
            compression: Some(42),
            ..MessageMetadata::default()
        };
        let context = EncryptionContext::of(&metadata);
        assert!(!context.is_encrypted());
        assert_eq!(context.compression(), Err(42));
    }
}
