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
/// # Examples
/// ```
/// use pulsar_wire::MessageId;
/// let id: MessageId = "12:7:-1:3".parse()?;
/// assert_eq!((id.ledger_id, id.entry_id, id.partition, id.batch_index), (12, 7, -1, 3));
/// assert_eq!(id.to_string(), "12:7:-1:3");
/// assert_eq!(MessageId::new(12, 7).to_string(), "12:7:-1");
/// # Ok::<(), pulsar_wire::message_id::ParseMessageIdError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageId {
    /// The BookKeeper ledger holding the entry.
    pub ledger_id: u64,
    /// The entry in that ledger.
    pub entry_id: u64,
    /// The partition index, or `-1` for a non-partitioned topic.
    pub partition: i32,
    /// The index inside a batched entry, or `-1` when the entry is not a batch.
    pub batch_index: i32,
}

impl MessageId {
    /// An id for a whole entry of a non-partitioned topic.
    pub const fn new(ledger_id: u64, entry_id: u64) -> Self {
        Self {
            ledger_id,
            entry_id,
            partition: -1,
            batch_index: -1,
        }
    }

    /// The position before any message: subscribe or seek here to read from the start.
    pub const EARLIEST: Self = Self {
        ledger_id: u64::MAX,
        entry_id: u64::MAX,
        partition: -1,
        batch_index: -1,
    };

    /// The position after the last message: subscribe or seek here to read only new ones.
    pub const LATEST: Self = Self {
        ledger_id: i64::MAX as u64,
        entry_id: i64::MAX as u64,
        partition: -1,
        batch_index: -1,
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
        }
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

impl PartialOrd for MessageId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MessageId {
    fn cmp(&self, other: &Self) -> Ordering {
        (
            self.ledger_id,
            self.entry_id,
            self.batch_index,
            self.partition,
        )
            .cmp(&(
                other.ledger_id,
                other.entry_id,
                other.batch_index,
                other.partition,
            ))
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.ledger_id, self.entry_id, self.partition)?;
        if self.is_batch_member() {
            write!(f, ":{}", self.batch_index)?;
        }
        Ok(())
    }
}

/// The text was not `ledger:entry:partition[:batch]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid message id {input:?}: expected ledger:entry:partition[:batch]")]
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
        let mut parts = s.split(':');
        let mut next = || parts.next().ok_or_else(err);
        let ledger_id = next()?.parse().map_err(|_| err())?;
        let entry_id = next()?.parse().map_err(|_| err())?;
        let partition = next()?.parse().map_err(|_| err())?;
        let batch_index = match parts.next() {
            None => -1,
            Some(b) => b.parse().map_err(|_| err())?,
        };
        if parts.next().is_some() || partition < -1 || batch_index < -1 {
            return Err(err());
        }
        Ok(Self {
            ledger_id,
            entry_id,
            partition,
            batch_index,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        for text in ["0:0:-1", "1:0:-1:0", "7:42:3", "7:42:3:9"] {
            let id: MessageId = text.parse().unwrap();
            assert_eq!(id.to_string(), text);
        }
    }

    #[test]
    fn bad_text_is_a_typed_error_naming_the_input() {
        for text in ["", "1", "1:2", "a:2:3", "1:2:3:4:5", "1:2:-2", "1:2:3:x"] {
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
    fn orders_by_ledger_entry_then_batch() {
        let whole = MessageId::new(1, 5);
        let first = whole.with_batch_index(0);
        let second = whole.with_batch_index(1);
        assert!(whole < first && first < second && second < MessageId::new(1, 6));
        assert!(MessageId::new(1, 900) < MessageId::new(2, 0));
    }
}
