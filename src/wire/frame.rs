//! Frames: taking them off a byte buffer and writing them into one.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message as _;

use super::FrameError;
use super::checksum::{MAGIC_BROKER_ENTRY_METADATA, MAGIC_CRC32C, crc32c, read_u16, read_u32};
use crate::proto::base_command::Type;
use crate::proto::{BaseCommand, BrokerEntryMetadata, MessageMetadata};

/// One decoded frame: a command and, for SEND and MESSAGE, its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The command envelope; its `type` says which sub-command is set.
    pub command: BaseCommand,
    /// The payload section, for SEND and MESSAGE frames (boxed: a frame
    /// passes through several hands, and its metadata is most of its size).
    pub payload: Option<Box<Payload>>,
}

/// The payload section of a SEND or MESSAGE frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    /// Metadata a broker put in front of the entry (magic `0x0e02`), if any.
    pub broker_entry_metadata: Option<BrokerEntryMetadata>,
    /// Whether the section carried a checksum and whether it matched.
    pub checksum: Checksum,
    /// The message (or batch) metadata.
    pub metadata: MessageMetadata,
    /// The message bytes as they travel: a batch and/or compressed. A view
    /// into the received frame, not a copy.
    pub data: Bytes,
}

/// The checksum state of a payload section.
///
/// On decode it reports what arrived; on encode it says what to write:
/// `Valid` computes the checksum, `Mismatch` writes `carried` as given (for
/// tests that play a faulty peer), `Absent` writes no checksum section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// No `0x0e01` section (the protocol allows this; some brokers send so).
    Absent,
    /// The checksum matched the bytes.
    Valid,
    /// The checksum did not match: the message must not reach the application.
    Mismatch {
        /// The checksum the frame carried.
        carried: u32,
        /// The checksum of the bytes that arrived.
        computed: u32,
    },
}

impl Frame {
    /// A frame without payload.
    pub fn simple(command: BaseCommand) -> Self {
        Self {
            command,
            payload: None,
        }
    }
}

/// Takes one frame off the front of `src`, or returns `Ok(None)` until enough
/// bytes have arrived.
///
/// `max_frame` bounds the whole frame, size field included; a larger
/// announcement is an error before any byte of it is buffered. At most
/// [`DEFAULT_MAX_FRAME_SIZE`](super::DEFAULT_MAX_FRAME_SIZE) is reserved
/// ahead of the bytes that have arrived. The payload of the returned frame
/// is a view into the bytes taken from `src`.
///
/// # Errors
/// A [`FrameError`] describing the first thing wrong with the frame; after it
/// the stream cannot be resynchronised.
pub fn decode(src: &mut BytesMut, max_frame: usize) -> Result<Option<Frame>, FrameError> {
    let Some(total) = read_u32(src, 0) else {
        return Ok(None);
    };
    let size = (total as usize).saturating_add(4);
    if size > max_frame {
        return Err(FrameError::TooLarge {
            size,
            max: max_frame,
        });
    }
    if total < 4 {
        return Err(FrameError::TooShort {
            total: total as usize,
        });
    }
    if src.len() < size {
        // Room for the rest, but never more than a default-sized frame ahead
        // of the bytes that came: a limit raised by the broker's
        // `max_message_size` must not let one header reserve gigabytes.
        src.reserve((size - src.len()).min(super::DEFAULT_MAX_FRAME_SIZE));
        return Ok(None);
    }
    let command_size = read_u32(src, 4).unwrap_or(0) as usize;
    let available = size.saturating_sub(8);
    if command_size > available {
        src.advance(size);
        return Err(FrameError::CommandSizeExceedsFrame {
            command_size,
            available,
        });
    }
    // The frame is built where it is returned from, and the command decoded
    // into it: no move of the (large) command and metadata structs.
    let mut frame = Frame::simple(BaseCommand::default());
    if command_size == available {
        // No payload section: the command is decoded from the buffer as it
        // lies, without taking a shared view of it.
        let merged = frame.command.merge(&src[8..size]);
        src.advance(size);
        merged.map_err(|source| FrameError::Protobuf {
            what: "BaseCommand",
            source,
        })?;
        check_command(&frame.command, false)?;
    } else {
        let mut body = src.split_to(size).freeze();
        body.advance(8);
        frame
            .command
            .merge(body.split_to(command_size))
            .map_err(|source| FrameError::Protobuf {
                what: "BaseCommand",
                source,
            })?;
        check_command(&frame.command, true)?;
        parse_payload(body, frame.payload.insert(Box::new(Payload::empty())))?;
    }
    Ok(Some(frame))
}

/// Checks that the command's sub-message is there and that a payload
/// section follows only a command that carries one.
fn check_command(command: &BaseCommand, with_payload: bool) -> Result<(), FrameError> {
    let kind = command.r#type();
    if has_body(command) == Some(false) {
        return Err(FrameError::MissingSubMessage { command: kind });
    }
    if with_payload && !matches!(kind, Type::Send | Type::Message) {
        return Err(FrameError::UnexpectedPayload { command: kind });
    }
    Ok(())
}

impl Payload {
    /// A payload section to decode into.
    fn empty() -> Self {
        Self {
            broker_entry_metadata: None,
            checksum: Checksum::Absent,
            metadata: MessageMetadata::default(),
            data: Bytes::new(),
        }
    }
}

/// Parses the payload section `rest` into `payload`.
fn parse_payload(mut rest: Bytes, payload: &mut Payload) -> Result<(), FrameError> {
    if read_u16(&rest, 0) == Some(MAGIC_BROKER_ENTRY_METADATA) {
        rest.advance(2);
        let section = take_sized(&mut rest, "broker entry metadata")?;
        payload.broker_entry_metadata = Some(decode_proto(section, "BrokerEntryMetadata")?);
    }
    let carried = match read_u16(&rest, 0) {
        Some(MAGIC_CRC32C) => {
            let carried = read_u32(&rest, 2).ok_or(FrameError::SectionExceedsFrame {
                what: "checksum",
                size: 4,
                available: rest.len() - 2,
            })?;
            rest.advance(6);
            Some(carried)
        }
        Some(found) if found >> 8 == 0x0e => return Err(FrameError::BadMagic { found }),
        _ => None,
    };
    payload.checksum = match carried {
        None => Checksum::Absent,
        Some(carried) => match crc32c(&[&rest]) {
            computed if computed == carried => Checksum::Valid,
            computed => Checksum::Mismatch { carried, computed },
        },
    };
    payload
        .metadata
        .merge(take_sized(&mut rest, "message metadata")?)
        .map_err(|source| FrameError::Protobuf {
            what: "MessageMetadata",
            source,
        })?;
    payload.data = rest;
    Ok(())
}

/// Splits `[size u32][size bytes]` off the front of `rest`.
fn take_sized(rest: &mut Bytes, what: &'static str) -> Result<Bytes, FrameError> {
    let size = read_u32(rest, 0).ok_or(FrameError::SectionExceedsFrame {
        what,
        size: 4,
        available: rest.len(),
    })? as usize;
    let available = rest.len() - 4;
    if size > available {
        return Err(FrameError::SectionExceedsFrame {
            what,
            size,
            available,
        });
    }
    rest.advance(4);
    Ok(rest.split_to(size))
}

fn decode_proto<M: prost::Message + Default>(
    bytes: Bytes,
    what: &'static str,
) -> Result<M, FrameError> {
    M::decode(bytes).map_err(|source| FrameError::Protobuf { what, source })
}

/// Whether the sub-message that `type` names is present: `None` for types
/// whose body is empty or that this client does not model, and for type
/// numbers it does not know (a newer protocol's; prost would read those as
/// the first enum value, CONNECT).
fn has_body(c: &BaseCommand) -> Option<bool> {
    let kind = Type::try_from(c.r#type).ok()?;
    Some(match kind {
        Type::Connect => c.connect.is_some(),
        Type::Connected => c.connected.is_some(),
        Type::Subscribe => c.subscribe.is_some(),
        Type::Producer => c.producer.is_some(),
        Type::Send => c.send.is_some(),
        Type::SendReceipt => c.send_receipt.is_some(),
        Type::SendError => c.send_error.is_some(),
        Type::Message => c.message.is_some(),
        Type::Ack => c.ack.is_some(),
        Type::Flow => c.flow.is_some(),
        Type::Unsubscribe => c.unsubscribe.is_some(),
        Type::Success => c.success.is_some(),
        Type::Error => c.error.is_some(),
        Type::CloseProducer => c.close_producer.is_some(),
        Type::CloseConsumer => c.close_consumer.is_some(),
        Type::ProducerSuccess => c.producer_success.is_some(),
        Type::RedeliverUnacknowledgedMessages => c.redeliver_unacknowledged_messages.is_some(),
        Type::PartitionedMetadata => c.partition_metadata.is_some(),
        Type::PartitionedMetadataResponse => c.partition_metadata_response.is_some(),
        Type::Lookup => c.lookup_topic.is_some(),
        Type::LookupResponse => c.lookup_topic_response.is_some(),
        Type::ReachedEndOfTopic => c.reached_end_of_topic.is_some(),
        Type::Seek => c.seek.is_some(),
        Type::GetLastMessageId => c.get_last_message_id.is_some(),
        Type::GetLastMessageIdResponse => c.get_last_message_id_response.is_some(),
        Type::ActiveConsumerChange => c.active_consumer_change.is_some(),
        Type::GetTopicsOfNamespace => c.get_topics_of_namespace.is_some(),
        Type::GetTopicsOfNamespaceResponse => c.get_topics_of_namespace_response.is_some(),
        Type::GetSchema => c.get_schema.is_some(),
        Type::GetSchemaResponse => c.get_schema_response.is_some(),
        Type::GetOrCreateSchema => c.get_or_create_schema.is_some(),
        Type::GetOrCreateSchemaResponse => c.get_or_create_schema_response.is_some(),
        Type::AuthChallenge => c.auth_challenge.is_some(),
        Type::AuthResponse => c.auth_response.is_some(),
        Type::AckResponse => c.ack_response.is_some(),
        Type::TopicMigrated => c.topic_migrated.is_some(),
        Type::WatchTopicList => c.watch_topic_list.is_some(),
        Type::WatchTopicListSuccess => c.watch_topic_list_success.is_some(),
        Type::WatchTopicUpdate => c.watch_topic_update.is_some(),
        Type::WatchTopicListClose => c.watch_topic_list_close.is_some(),
        _ => return None,
    })
}

/// The number of bytes [`encode`] writes for `frame`.
pub fn encoded_len(frame: &Frame) -> usize {
    let command = 8 + frame.command.encoded_len();
    command
        + frame.payload.as_ref().map_or(0, |p| {
            let entry = p
                .broker_entry_metadata
                .as_ref()
                .map_or(0, |m| 6 + m.encoded_len());
            let crc = if p.checksum == Checksum::Absent { 0 } else { 6 };
            entry + crc + 4 + p.metadata.encoded_len() + p.data.len()
        })
}

/// Appends a simple frame carrying `command` to `dst`.
///
/// # Errors
/// [`FrameError::TooLarge`] if the frame cannot be described in 32 bits.
pub fn encode_command(command: &BaseCommand, dst: &mut BytesMut) -> Result<(), FrameError> {
    let command_len = command.encoded_len();
    let total = size_field(4 + command_len)?;
    dst.reserve(4 + total as usize);
    dst.put_u32(total);
    dst.put_u32(command_len as u32);
    command.encode_raw(dst);
    Ok(())
}

/// Appends a checksummed payload frame (a SEND, as a client writes it) to `dst`.
///
/// The payload bytes are copied once, into `dst`.
///
/// # Errors
/// [`FrameError::TooLarge`] if the frame cannot be described in 32 bits.
pub fn encode_payload(
    command: &BaseCommand,
    metadata: &MessageMetadata,
    data: &[u8],
    dst: &mut BytesMut,
) -> Result<(), FrameError> {
    write_send(command, metadata, data, dst, Body::Copied)
}

/// Appends everything of a checksummed payload frame except the payload
/// bytes to `dst`: the frame on the wire is `dst`'s new bytes followed by
/// `data`.
///
/// The zero-copy send path: the checksum is computed over `data` where it
/// lies, and a writer that sends the head and the payload `Bytes` with one
/// vectored write never copies the payload. ([`encode_head`] does the same
/// for any [`Frame`]; the connection's data lane uses it.)
///
/// # Errors
/// [`FrameError::TooLarge`] if the frame cannot be described in 32 bits.
///
/// # Examples
/// ```
/// use bytes::BytesMut;
/// use pulsar_wire::ids::{ProducerId, SequenceId};
/// use pulsar_wire::proto::MessageMetadata;
/// use pulsar_wire::wire::{self, commands};
///
/// let send = commands::send(ProducerId(1), SequenceId(0), 1);
/// let meta = MessageMetadata { producer_name: "p".into(), ..Default::default() };
/// let (mut head, mut whole) = (BytesMut::new(), BytesMut::new());
/// wire::encode_payload_head(&send, &meta, b"payload", &mut head)?;
/// wire::encode_payload(&send, &meta, b"payload", &mut whole)?;
/// assert_eq!([&head[..], b"payload"].concat(), &whole[..]);
/// # Ok::<(), wire::FrameError>(())
/// ```
pub fn encode_payload_head(
    command: &BaseCommand,
    metadata: &MessageMetadata,
    data: &[u8],
    dst: &mut BytesMut,
) -> Result<(), FrameError> {
    write_send(command, metadata, data, dst, Body::After)
}

/// Appends `frame` to `dst`, exactly as [`decode`] would read it back.
///
/// # Errors
/// [`FrameError::TooLarge`] if the frame cannot be described in 32 bits.
pub fn encode(frame: &Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
    write_frame(frame, dst, Body::Copied)
}

/// Appends `frame` to `dst` without its payload bytes: the frame on the
/// wire is `dst`'s new bytes followed by `frame.payload.data` (for a frame
/// without payload, the whole frame).
///
/// The zero-copy send path the connection's data lane takes: the checksum
/// is computed over the payload where it lies, and the payload `Bytes` is
/// written after the head, never copied into the write buffer.
///
/// # Errors
/// [`FrameError::TooLarge`] if the frame cannot be described in 32 bits.
///
/// # Examples
/// ```
/// use bytes::{Bytes, BytesMut};
/// use pulsar_wire::ids::{ProducerId, SequenceId};
/// use pulsar_wire::proto::MessageMetadata;
/// use pulsar_wire::wire::{self, commands, Checksum, Frame, Payload};
///
/// let frame = Frame {
///     command: commands::send(ProducerId(1), SequenceId(0), 1),
///     payload: Some(Box::new(Payload {
///         broker_entry_metadata: None,
///         checksum: Checksum::Valid,
///         metadata: MessageMetadata { producer_name: "p".into(), ..Default::default() },
///         data: Bytes::from_static(b"payload"),
///     })),
/// };
/// let (mut head, mut whole) = (BytesMut::new(), BytesMut::new());
/// wire::encode_head(&frame, &mut head)?;
/// wire::encode(&frame, &mut whole)?;
/// assert_eq!([&head[..], b"payload"].concat(), &whole[..]);
/// # Ok::<(), wire::FrameError>(())
/// ```
pub fn encode_head(frame: &Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
    write_frame(frame, dst, Body::After)
}

/// A SEND as a client writes it: checksummed, no broker entry metadata.
fn write_send(
    command: &BaseCommand,
    metadata: &MessageMetadata,
    data: &[u8],
    dst: &mut BytesMut,
    body: Body,
) -> Result<(), FrameError> {
    let checksum = Checksum::Valid;
    write_payload_frame(command, None, checksum, metadata, data, dst, body)
}

fn write_frame(frame: &Frame, dst: &mut BytesMut, body: Body) -> Result<(), FrameError> {
    match &frame.payload {
        None => encode_command(&frame.command, dst),
        Some(p) => write_payload_frame(
            &frame.command,
            p.broker_entry_metadata.as_ref(),
            p.checksum,
            &p.metadata,
            &p.data,
            dst,
            body,
        ),
    }
}

/// Where the payload bytes of a payload frame go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Copied into the buffer after the metadata.
    Copied,
    /// Left out: the caller writes them after the buffer's new bytes.
    After,
}

fn write_payload_frame(
    command: &BaseCommand,
    entry_metadata: Option<&BrokerEntryMetadata>,
    checksum: Checksum,
    metadata: &MessageMetadata,
    data: &[u8],
    dst: &mut BytesMut,
    body: Body,
) -> Result<(), FrameError> {
    let command_len = command.encoded_len();
    let entry_len = entry_metadata.map(prost::Message::encoded_len);
    let metadata_len = metadata.encoded_len();
    let has_crc = checksum != Checksum::Absent;
    let total = size_field(
        4 + command_len
            + entry_len.map_or(0, |n| 6 + n)
            + if has_crc { 6 } else { 0 }
            + 4
            + metadata_len
            + data.len(),
    )?;
    let copied = if body == Body::Copied { data.len() } else { 0 };
    dst.reserve(4 + total as usize - data.len() + copied);
    dst.put_u32(total);
    dst.put_u32(command_len as u32);
    command.encode_raw(dst);
    if let (Some(entry), Some(len)) = (entry_metadata, entry_len) {
        dst.put_u16(MAGIC_BROKER_ENTRY_METADATA);
        dst.put_u32(len as u32);
        entry.encode_raw(dst);
    }
    let crc_at = dst.len() + 2;
    if has_crc {
        dst.put_u16(MAGIC_CRC32C);
        dst.put_u32(0); // patched below, once the covered bytes are in place
    }
    let covered_from = dst.len();
    dst.put_u32(metadata_len as u32);
    metadata.encode_raw(dst);
    let crc = match checksum {
        Checksum::Absent => None,
        Checksum::Valid => Some(crc32c(&[&dst[covered_from..], data])),
        Checksum::Mismatch { carried, .. } => Some(carried),
    };
    if let Some(crc) = crc {
        dst[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
    }
    if body == Body::Copied {
        dst.put_slice(data);
    }
    Ok(())
}

/// The total-size field for a frame of `len` bytes after it.
fn size_field(len: usize) -> Result<u32, FrameError> {
    u32::try_from(len).map_err(|_| FrameError::TooLarge {
        size: len.saturating_add(4),
        max: u32::MAX as usize,
    })
}
