//! The tokio-util adapter over [`wire`](mod@crate::wire): a thin
//! [`Decoder`]/[`Encoder`] pair for use with `Framed`.
//!
//! # Examples
//! ```no_run
//! use futures::{SinkExt, StreamExt};
//! use pulsar_wire::{codec::PulsarCodec, wire::{commands, Frame}};
//! use tokio_util::codec::Framed;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let socket = tokio::net::TcpStream::connect("127.0.0.1:6650").await?;
//! let mut frames = Framed::new(socket, PulsarCodec::default());
//! frames.send(Frame::simple(commands::connect(None, None))).await?;
//! let connected = frames.next().await.ok_or("closed")??;
//! println!("{:?}", connected.command.r#type());
//! # Ok(()) }
//! ```

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::wire::{self, Frame, FrameError};

/// Decodes and encodes [`Frame`]s with a frame-size limit.
#[derive(Debug, Clone)]
pub struct PulsarCodec {
    max_frame: usize,
}

impl Default for PulsarCodec {
    fn default() -> Self {
        Self {
            max_frame: wire::DEFAULT_MAX_FRAME_SIZE,
        }
    }
}

impl PulsarCodec {
    /// A codec refusing frames larger than `max_frame` bytes.
    pub const fn with_max_frame(max_frame: usize) -> Self {
        Self { max_frame }
    }

    /// Raises (or lowers) the limit, e.g. to the broker's `max_message_size`
    /// plus [`wire::FRAME_OVERHEAD_ALLOWANCE`] after CONNECTED.
    pub fn set_max_frame(&mut self, max_frame: usize) {
        self.max_frame = max_frame;
    }

    /// The limit in force.
    pub const fn max_frame(&self) -> usize {
        self.max_frame
    }
}

/// A frame error, or the IO error under it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The bytes were not a valid frame.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Reading or writing the socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Decoder for PulsarCodec {
    type Item = Frame;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        Ok(wire::decode(src, self.max_frame)?)
    }
}

impl Encoder<Frame> for PulsarCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        self.encode(&frame, dst)
    }
}

impl Encoder<&Frame> for PulsarCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(wire::encode(frame, dst)?)
    }
}
