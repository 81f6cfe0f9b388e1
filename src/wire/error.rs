//! What can be wrong with the bytes of a frame.

use crate::proto::base_command::Type;

/// A frame that cannot be decoded. Each variant says what was wrong and
/// carries the sizes involved; none of them is ever a panic.
///
/// After any of these the byte stream can no longer be trusted (the next
/// frame boundary is unknown), so a connection must be closed. A checksum
/// mismatch is *not* an error: it is reported per message in
/// [`Payload::checksum`](super::Payload::checksum).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The announced frame is larger than the limit in force.
    #[error("frame of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Bytes announced by the frame's total-size field.
        size: usize,
        /// The limit in force.
        max: usize,
    },
    /// The total size cannot even hold the command-size field.
    #[error("frame total size {total} is smaller than the 4-byte command size field")]
    TooShort {
        /// The announced total size.
        total: usize,
    },
    /// The command claims more bytes than the frame has.
    #[error("command size {command_size} exceeds the {available} bytes left in the frame")]
    CommandSizeExceedsFrame {
        /// The announced command size.
        command_size: usize,
        /// Bytes left in the frame after the command-size field.
        available: usize,
    },
    /// A payload section starts with a magic number this protocol does not define.
    #[error("bad magic number {found:#06x} at the start of a payload section")]
    BadMagic {
        /// The two bytes found.
        found: u16,
    },
    /// A size field inside the payload section points past the frame's end.
    #[error("{what} of {size} bytes exceeds the {available} bytes left in the frame")]
    SectionExceedsFrame {
        /// Which section: `"message metadata"`, `"broker entry metadata"`, …
        what: &'static str,
        /// The announced size.
        size: usize,
        /// The bytes actually left.
        available: usize,
    },
    /// A protobuf section could not be decoded (truncated, or not protobuf).
    #[error("cannot decode {what}: {source}")]
    Protobuf {
        /// Which message: `"BaseCommand"`, `"MessageMetadata"`, …
        what: &'static str,
        /// prost's reason.
        source: prost::DecodeError,
    },
    /// The command's type names a sub-message that is not there.
    #[error("{command:?} command without its {command:?} body")]
    MissingSubMessage {
        /// The command type.
        command: Type,
    },
    /// A payload section follows a command that never carries one.
    #[error("{command:?} command carries a payload section; only SEND and MESSAGE do")]
    UnexpectedPayload {
        /// The command type.
        command: Type,
    },
}
