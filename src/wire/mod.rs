//! The pure wire layer: bytes in, frames out, and back.
//!
//! Nothing here does IO, spawns, or reads the clock. A frame is either
//! *simple* — `[total u32][command_size u32][BaseCommand]` — or carries a
//! *payload* after the command:
//!
//! ```text
//! [0x0e02][size u32][BrokerEntryMetadata]   optional, broker → client only
//! [0x0e01][crc32c u32]                      optional on receive, always sent
//! [metadata_size u32][MessageMetadata][payload bytes]
//! ```
//!
//! All sizes are big-endian; the checksum covers everything after it.
//! Payloads stay [`bytes::Bytes`] views into the received frame: decoding
//! copies no payload byte.
//!
//! # Examples
//! ```
//! use bytes::BytesMut;
//! use pulsar_wire::wire::{self, commands};
//!
//! let mut buf = BytesMut::new();
//! wire::encode_command(&commands::ping(), &mut buf);
//! let frame = wire::decode(&mut buf, wire::DEFAULT_MAX_FRAME_SIZE)?.expect("a whole frame");
//! assert_eq!(frame.command.r#type(), pulsar_wire::proto::base_command::Type::Ping);
//! assert!(buf.is_empty());
//! # Ok::<(), pulsar_wire::wire::FrameError>(())
//! ```

pub mod batch;
pub mod checksum;
pub mod commands;
mod error;
mod frame;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use error::FrameError;
pub use frame::{
    Checksum, Frame, Payload, decode, encode, encode_command, encode_head, encode_payload,
    encode_payload_head, encoded_len,
};

/// The largest message a broker accepts unless its CONNECTED says otherwise (5 MiB).
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 5 * 1024 * 1024;

/// Room for the command and metadata around a message of the maximum size.
pub const FRAME_OVERHEAD_ALLOWANCE: usize = 10 * 1024;

/// The largest frame accepted before CONNECTED raises the limit: 5 MiB + 10 KiB.
pub const DEFAULT_MAX_FRAME_SIZE: usize = DEFAULT_MAX_MESSAGE_SIZE + FRAME_OVERHEAD_ALLOWANCE;

/// The frame-size limit that goes with a broker's `max_message_size`.
///
/// # Examples
/// ```
/// use pulsar_wire::wire;
/// assert_eq!(wire::max_frame_size_for(1024), 1024 + 10 * 1024);
/// ```
pub const fn max_frame_size_for(max_message_size: usize) -> usize {
    max_message_size.saturating_add(FRAME_OVERHEAD_ALLOWANCE)
}
