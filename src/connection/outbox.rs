//! The connection's output: encoded frames waiting for the socket (pure).
//!
//! Commands and the heads of payload frames are encoded into one buffer;
//! a payload is not copied into it but queued after its head as the
//! `Bytes` it arrived in, and the writer hands the socket every piece with
//! one vectored write. So a SEND costs the encoding of its command and
//! metadata and the checksum over its payload, never a copy of the payload.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};

use crate::proto::BaseCommand;
use crate::wire::{self, Frame, FrameError};

/// The most pieces one vectored write takes (Linux's `IOV_MAX` is 1024).
pub(crate) const MAX_SLICES: usize = 64;

/// Encoded frames not yet written, in the order they were queued.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// Pieces ahead of `open`: sealed heads and the payloads after them.
    sealed: VecDeque<Bytes>,
    /// Bytes encoded since the last payload was queued.
    open: BytesMut,
    /// Bytes in `sealed`.
    sealed_len: usize,
}

impl Outbox {
    /// Queues a frame without payload.
    pub(crate) fn command(&mut self, command: &BaseCommand) -> Result<(), FrameError> {
        wire::encode_command(command, &mut self.open)
    }

    /// Queues `frame`; its payload, if any, is queued as it is, after the
    /// encoded head.
    pub(crate) fn frame(&mut self, frame: Frame) -> Result<(), FrameError> {
        wire::encode_head(&frame, &mut self.open)?;
        if let Some(payload) = frame.payload.filter(|p| !p.data.is_empty()) {
            let head = self.open.split().freeze();
            self.sealed_len += head.len() + payload.data.len();
            self.sealed.push_back(head);
            self.sealed.push_back(payload.data);
        }
        Ok(())
    }

    /// Bytes waiting.
    pub(crate) fn len(&self) -> usize {
        self.sealed_len + self.open.len()
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Buf for Outbox {
    fn remaining(&self) -> usize {
        self.len()
    }

    fn chunk(&self) -> &[u8] {
        self.sealed
            .front()
            .map_or(&self.open[..], |piece| &piece[..])
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let pieces = self.sealed.iter().map(|piece| &piece[..]);
        let mut filled = 0;
        for (slot, piece) in dst
            .iter_mut()
            .zip(pieces.chain([&self.open[..]]).filter(|p| !p.is_empty()))
        {
            *slot = IoSlice::new(piece);
            filled += 1;
        }
        filled
    }

    fn advance(&mut self, mut cnt: usize) {
        while cnt > 0 {
            let Some(front) = self.sealed.front_mut() else {
                self.open.advance(cnt);
                return;
            };
            let step = cnt.min(front.len());
            front.advance(step);
            self.sealed_len -= step;
            cnt -= step;
            if front.is_empty() {
                self.sealed.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ProducerId, SequenceId};
    use crate::proto::MessageMetadata;
    use crate::wire::{Checksum, Payload, commands};

    fn send(sequence: u64, data: &'static [u8]) -> Frame {
        Frame {
            command: commands::send(ProducerId(1), SequenceId(sequence), 1),
            payload: Some(Box::new(Payload {
                broker_entry_metadata: None,
                checksum: Checksum::Valid,
                metadata: MessageMetadata {
                    producer_name: "p".into(),
                    sequence_id: sequence,
                    ..MessageMetadata::default()
                },
                data: Bytes::from_static(data),
            })),
        }
    }

    /// What the copying encoder writes for the same frames, in order.
    fn expected(frames: &[Option<Frame>]) -> Vec<u8> {
        let mut buf = BytesMut::new();
        for frame in frames {
            match frame {
                Some(frame) => wire::encode(frame, &mut buf).unwrap(),
                None => wire::encode_command(&commands::ping(), &mut buf).unwrap(),
            }
        }
        buf.to_vec()
    }

    fn queued(frames: &[Option<Frame>]) -> Outbox {
        let mut out = Outbox::default();
        for frame in frames {
            match frame {
                Some(frame) => out.frame(frame.clone()).unwrap(),
                None => out.command(&commands::ping()).unwrap(),
            }
        }
        out
    }

    fn frames() -> Vec<Option<Frame>> {
        vec![
            None,
            Some(send(1, b"first payload")),
            Some(send(2, b"")),
            None,
            Some(send(3, b"third")),
            Some(send(4, b"fourth payload, queued right after the third")),
            None,
        ]
    }

    #[test]
    fn the_bytes_are_those_of_the_copying_encoder_in_queue_order() {
        let frames = frames();
        let mut out = queued(&frames);
        let want = expected(&frames);
        assert_eq!(out.len(), want.len());
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        let n = out.chunks_vectored(&mut slices);
        let joined: Vec<u8> = slices[..n].iter().flat_map(|s| s.to_vec()).collect();
        assert_eq!(joined, want);
        assert_eq!(out.copy_to_bytes(out.remaining()), want);
        assert!(out.is_empty());
    }

    #[test]
    fn partial_writes_of_every_size_resume_where_they_stopped() {
        let frames = frames();
        let want = expected(&frames);
        for step in 1..=want.len() {
            let mut out = queued(&frames);
            let mut written = Vec::new();
            while out.has_remaining() {
                // A socket taking at most `step` bytes of the first pieces.
                let mut slices = [IoSlice::new(&[]); 2];
                let n = out.chunks_vectored(&mut slices);
                let taken: Vec<u8> = slices[..n]
                    .iter()
                    .flat_map(|s| s.to_vec())
                    .take(step)
                    .collect();
                out.advance(taken.len());
                written.extend(taken);
                assert_eq!(out.len(), want.len() - written.len());
            }
            assert_eq!(written, want, "step {step}");
        }
    }

    #[test]
    fn a_payload_is_queued_where_it_lies() {
        let data = Bytes::from(vec![7u8; 4096]);
        let mut frame = send(1, b"");
        if let Some(p) = frame.payload.as_mut() {
            p.data = data.clone();
        }
        let mut out = Outbox::default();
        out.frame(frame).unwrap();
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        assert_eq!(out.chunks_vectored(&mut slices), 2);
        assert_eq!(slices[1].as_ptr(), data.as_ptr(), "not copied");
        assert!(out.open.capacity() < data.len());
    }
}
