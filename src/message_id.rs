//! [`MessageId`]: where a message sits in a topic.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use crate::proto::MessageIdData;

/// The position of a message: ledger, entry, partition and, for a member of
/// a batched entry, its index in the batch.
///
/// Its text form is the one Pulsar tools print and the dead-letter property
/// `ORIGIN_MESSAGE_ID` carries: `ledger:entry:partition`, plus `:batch` for a
/// batch member. A non-partitioned topic has partition `-1`.
///
/// Ids of one topic partition order by ledger, then entry, then batch index
/// (a whole entry, `batch_index == -1`, sorts before its members).
///
/// A chunked message is stored in several entries. Its id is where it
/// ends, its last chunk, and carries its first chunk beside it
/// ([`first_chunk`](Self::first_chunk)), as the Java client's
/// `ChunkMessageId` does: it orders, compares and hashes by its last chunk,
/// so ids handed out on an Exclusive or Failover subscription rise, and a
/// seek or a reader's start at it reads from its first chunk. Its text form
/// is the Java client's too: `first;last`, e.g. `12:7:-1;12:9:-1`.
///
/// # Examples
/// ```
/// use pulsar_wire::MessageId;
/// let id: MessageId = "12:7:-1:3".parse()?;
/// assert_eq!((id.ledger_id, id.entry_id, id.partition, id.batch_index), (12, 7, -1, 3));
/// assert_eq!(id.to_string(), "12:7:-1:3");
/// assert_eq!(MessageId::new(12, 7).to_string(), "12:7:-1");
/// # Ok::<(), pulsar_wire::message_id::ParseMessageIdError>(())
/// ```
#[derive(Clone, Copy)]
pub struct MessageId {
    /// The BookKeeper ledger holding the entry.
    pub ledger_id: u64,
    /// The entry in that ledger.
    pub entry_id: u64,
    /// The partition index, or `-1` for a non-partitioned topic.
    pub partition: i32,
    /// The index inside a batched entry, or `-1` when the entry is not a batch.
    pub batch_index: i32,
    /// A chunked message's first chunk, as (ledger, entry); `NO_CHUNK`
    /// for any other message.
    pub(crate) first_chunk: (u64, u64),
}

/// `first_chunk` of a message that is not chunked.
pub(crate) const NO_CHUNK: (u64, u64) = (u64::MAX, u64::MAX);

impl MessageId {
    /// An id for a whole entry of a non-partitioned topic.
    pub const fn new(ledger_id: u64, entry_id: u64) -> Self {
        Self {
            ledger_id,
            entry_id,
            partition: -1,
            batch_index: -1,
            first_chunk: NO_CHUNK,
        }
    }

    /// The position before any message: subscribe or seek here to read from the start.
    pub const EARLIEST: Self = Self {
        ledger_id: u64::MAX,
        entry_id: u64::MAX,
        partition: -1,
        batch_index: -1,
        first_chunk: NO_CHUNK,
    };

    /// The position after the last message: subscribe or seek here to read only new ones.
    pub const LATEST: Self = Self {
        ledger_id: i64::MAX as u64,
        entry_id: i64::MAX as u64,
        partition: -1,
        batch_index: -1,
        first_chunk: NO_CHUNK,
    };

    /// The same id with `partition` set (ids from a partition's own connection
    /// do not always carry it).
    #[must_use]
    pub const fn with_partition(self, partition: i32) -> Self {
        Self { partition, ..self }
    }

    /// The same id with `batch_index` set.
    #[must_use]
    pub const fn with_batch_index(self, batch_index: i32) -> Self {
        Self {
            batch_index,
            ..self
        }
    }

    /// The id of the whole entry this message belongs to (batch index cleared).
    #[must_use]
    pub const fn entry(self) -> Self {
        self.with_batch_index(-1)
    }

    /// The id of a chunked message whose first chunk is at `first` and
    /// last chunk at `self` (see [`first_chunk`](Self::first_chunk)).
    #[must_use]
    pub const fn with_first_chunk(self, first: Self) -> Self {
        Self {
            first_chunk: (first.ledger_id, first.entry_id),
            ..self
        }
    }

    /// For a chunked message, the id of its first chunk (its own id is
    /// its last chunk's); `None` for any other message.
    ///
    /// # Examples
    /// ```
    /// use pulsar_wire::MessageId;
    /// let id: MessageId = "12:7:-1;12:9:-1".parse()?;
    /// assert_eq!(id, MessageId::new(12, 9));
    /// assert_eq!(id.first_chunk(), Some(MessageId::new(12, 7)));
    /// assert_eq!(MessageId::new(12, 9).first_chunk(), None);
    /// # Ok::<(), pulsar_wire::message_id::ParseMessageIdError>(())
    /// ```
    pub const fn first_chunk(&self) -> Option<Self> {
        if self.first_chunk.0 == NO_CHUNK.0 && self.first_chunk.1 == NO_CHUNK.1 {
            return None;
        }
        Some(Self {
            ledger_id: self.first_chunk.0,
            entry_id: self.first_chunk.1,
            partition: self.partition,
            batch_index: -1,
            first_chunk: NO_CHUNK,
        })
    }

    /// Where the message at this id ends in its topic: the id without a
    /// chunked message's first chunk beside it.
    pub(crate) const fn position(self) -> Self {
        Self {
            first_chunk: NO_CHUNK,
            ..self
        }
    }

    /// Where the broker is to start for a message at this id: its first
    /// chunk, for a chunked message; the id itself otherwise.
    pub(crate) const fn start(self) -> Self {
        match self.first_chunk() {
            Some(first) => first,
            None => self,
        }
    }

    /// Whether this id names a member of a batched entry.
    pub const fn is_batch_member(&self) -> bool {
        self.batch_index >= 0
    }

    /// Whether this send receipt's id says "stored before, position
    /// unknown": the broker has deduplication on and had already stored a
    /// message with this sequence id from this producer name, so it stored
    /// nothing new and answered with the position (-1, -1), as
    /// `ledger_id` and `entry_id` both `u64::MAX` (Java's
    /// `MessageIdImpl(-1, -1, partition)`). `partition` is still the
    /// partition written to, and a batch member keeps its `batch_index`.
    ///
    /// The send succeeded: the message is in the topic once. It happens
    /// when a send is made again under a sequence id the broker already
    /// has, such as a send this producer resends after a lost connection
    /// whose first attempt was stored but whose receipt was lost.
    ///
    /// Only meaningful on a receipt's id: the same position also spells
    /// [`EARLIEST`](Self::EARLIEST), which is never a receipt.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(producer: pulsar_wire::producer::Producer) -> Result<(), pulsar_wire::Error> {
    /// let id = producer.send("hello").await?.await?;
    /// if id.is_duplicate() {
    ///     println!("stored before; its position is not known");
    /// }
    /// # Ok(()) }
    /// ```
    pub const fn is_duplicate(&self) -> bool {
        self.ledger_id == u64::MAX && self.entry_id == u64::MAX
    }

    /// Builds the protocol form. `batch_index` is written only for batch members.
    pub fn to_proto(&self) -> MessageIdData {
        MessageIdData {
            ledger_id: self.ledger_id,
            entry_id: self.entry_id,
            partition: (self.partition >= 0).then_some(self.partition),
            batch_index: self.is_batch_member().then_some(self.batch_index),
            ..MessageIdData::default()
        }
    }

    /// Reads the protocol form; absent partition and batch index become `-1`.
    pub fn from_proto(data: &MessageIdData) -> Self {
        Self {
            ledger_id: data.ledger_id,
            entry_id: data.entry_id,
            partition: data.partition(),
            batch_index: data.batch_index(),
            first_chunk: NO_CHUNK,
        }
    }
}

/// A [`MessageId`] without a chunked message's first chunk, in 24 bytes:
/// for tables that hold one per message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BareId {
    ledger_id: u64,
    entry_id: u64,
    partition: i32,
    batch_index: i32,
}

impl From<MessageId> for BareId {
    fn from(id: MessageId) -> Self {
        Self {
            ledger_id: id.ledger_id,
            entry_id: id.entry_id,
            partition: id.partition,
            batch_index: id.batch_index,
        }
    }
}

impl From<BareId> for MessageId {
    fn from(id: BareId) -> Self {
        Self::new(id.ledger_id, id.entry_id)
            .with_partition(id.partition)
            .with_batch_index(id.batch_index)
    }
}

impl From<&MessageIdData> for MessageId {
    fn from(data: &MessageIdData) -> Self {
        Self::from_proto(data)
    }
}

impl From<MessageId> for MessageIdData {
    fn from(id: MessageId) -> Self {
        id.to_proto()
    }
}

impl fmt::Debug for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("MessageId");
        d.field("ledger_id", &self.ledger_id)
            .field("entry_id", &self.entry_id)
            .field("partition", &self.partition)
            .field("batch_index", &self.batch_index);
        if let Some(first) = self.first_chunk() {
            d.field("first_chunk", &(first.ledger_id, first.entry_id));
        }
        d.finish()
    }
}

impl PartialEq for MessageId {
    /// Equal when they name the same position: a chunked message's first
    /// chunk takes no part (as in the Java client).
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for MessageId {}

impl std::hash::Hash for MessageId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl MessageId {
    /// What equality, hashing and order look at, in the order they sort.
    fn key(&self) -> (u64, u64, i32, i32) {
        (
            self.ledger_id,
            self.entry_id,
            self.batch_index,
            self.partition,
        )
    }
}

impl PartialOrd for MessageId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MessageId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(first) = self.first_chunk() {
            write!(f, "{first};")?;
        }
        write!(f, "{}:{}:{}", self.ledger_id, self.entry_id, self.partition)?;
        if self.is_batch_member() {
            write!(f, ":{}", self.batch_index)?;
        }
        Ok(())
    }
}

/// The text was not `ledger:entry:partition[:batch]`, or a chunked
/// message's `first;last` of two such ids on one partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid message id {input:?}: expected ledger:entry:partition[:batch], \
     or first;last for a chunked message"
)]
pub struct ParseMessageIdError {
    /// The text that failed to parse.
    pub input: String,
}

impl FromStr for MessageId {
    type Err = ParseMessageIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseMessageIdError {
            input: s.to_owned(),
        };
        if let Some((first, last)) = s.split_once(';') {
            let (first, last) = (Self::parse_one(first), Self::parse_one(last));
            return match (first, last) {
                (Some(first), Some(last))
                    if first.partition == last.partition
                        && !first.is_batch_member()
                        && !last.is_batch_member() =>
                {
                    Ok(last.with_first_chunk(first))
                }
                _ => Err(err()),
            };
        }
        Self::parse_one(s).ok_or_else(err)
    }
}

impl MessageId {
    /// Parses `ledger:entry:partition[:batch]`.
    fn parse_one(s: &str) -> Option<Self> {
        let mut parts = s.split(':');
        let ledger_id = parts.next()?.parse().ok()?;
        let entry_id = parts.next()?.parse().ok()?;
        let partition = parts.next()?.parse().ok()?;
        let batch_index = match parts.next() {
            None => -1,
            Some(b) => b.parse().ok()?,
        };
        if parts.next().is_some() || partition < -1 || batch_index < -1 {
            return None;
        }
        Some(Self {
            ledger_id,
            entry_id,
            partition,
            batch_index,
            first_chunk: NO_CHUNK,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        for text in ["0:0:-1", "1:0:-1:0", "7:42:3", "7:42:3:9", "7:40:3;7:42:3"] {
            let id: MessageId = text.parse().unwrap();
            assert_eq!(id.to_string(), text);
        }
    }

    #[test]
    fn bad_text_is_a_typed_error_naming_the_input() {
        let bad = [
            "",
            "1",
            "1:2",
            "a:2:3",
            "1:2:3:4:5",
            "1:2:-2",
            "1:2:3:x",
            "1:2:3;",
            "1:2:0;1:4:1",
            "1:2:0:1;1:4:0",
            "1:2:0;1:4:0;1:5:0",
        ];
        for text in bad {
            let err = text.parse::<MessageId>().unwrap_err();
            assert_eq!(err.input, text);
        }
    }

    #[test]
    fn proto_form_omits_absent_partition_and_batch() {
        let data = MessageId::new(5, 6).to_proto();
        assert_eq!((data.partition, data.batch_index), (None, None));
        let id = MessageId::new(5, 6).with_partition(2).with_batch_index(0);
        assert_eq!(MessageId::from_proto(&id.to_proto()), id);
    }

    #[test]
    fn a_chunked_message_is_its_last_chunk_with_its_first_beside() {
        let last = MessageId::new(3, 9).with_partition(1);
        let id = last.with_first_chunk(MessageId::new(3, 4));
        assert_eq!(id, last, "equal by the last chunk");
        assert_eq!(id.cmp(&last), Ordering::Equal);
        assert!(MessageId::new(3, 5).with_partition(1) < id);
        assert_eq!(
            id.first_chunk(),
            Some(MessageId::new(3, 4).with_partition(1))
        );
        assert_eq!(id.start(), MessageId::new(3, 4).with_partition(1));
        assert_eq!(last.first_chunk(), None);
        assert_eq!(last.start(), last);
        let state = std::hash::RandomState::new();
        assert_eq!(
            std::hash::BuildHasher::hash_one(&state, id),
            std::hash::BuildHasher::hash_one(&state, last)
        );
        assert_eq!(id.to_string(), "3:4:1;3:9:1");
    }

    #[test]
    fn orders_by_ledger_entry_then_batch() {
        let whole = MessageId::new(1, 5);
        let first = whole.with_batch_index(0);
        let second = whole.with_batch_index(1);
        assert!(whole < first && first < second && second < MessageId::new(1, 6));
        assert!(MessageId::new(1, 900) < MessageId::new(2, 0));
    }
}
