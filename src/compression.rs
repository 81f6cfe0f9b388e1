//! Payload compression: LZ4, ZLIB, ZSTD and SNAPPY, byte-compatible with the
//! Java, Go and C++ clients.
//!
//! The formats are the ones Pulsar uses: LZ4 is a raw LZ4 *block* (no frame,
//! no size prefix), ZLIB is a zlib stream (deflate with the zlib header),
//! ZSTD is a zstd frame, and SNAPPY is the raw snappy *block* format, not the
//! framed stream format. `MessageMetadata.uncompressed_size` carries the
//! original length; it comes from the network, so it is checked against a
//! limit before anything is allocated, and the output must be exactly that
//! long. All four codecs are pure Rust.
//!
//! # Examples
//! ```
//! use pulsar_wire::compression::Compression;
//! let text = b"the quick brown fox jumps over the lazy dog, the quick brown fox".repeat(8);
//! for codec in [Compression::Lz4, Compression::Zlib, Compression::Zstd, Compression::Snappy] {
//!     let packed = codec.compress(&text)?;
//!     assert!(packed.len() < text.len());
//!     let unpacked = codec.decompress(packed, text.len() as u32, 5 << 20)?;
//!     assert_eq!(&unpacked[..], &text[..]);
//! }
//! # Ok::<(), pulsar_wire::compression::CompressionError>(())
//! ```

use std::io::Write as _;

use bytes::Bytes;

use crate::proto::CompressionType;

/// A payload codec, as `MessageMetadata.compression` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// LZ4 raw block.
    Lz4,
    /// zlib stream.
    Zlib,
    /// Zstandard frame.
    Zstd,
    /// Snappy raw block.
    Snappy,
}

/// A payload that cannot be (de)compressed as its metadata says.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompressionError {
    /// `compression` names a codec this protocol does not define.
    #[error("unknown compression type {0}")]
    UnknownCodec(i32),
    /// The announced uncompressed size exceeds the limit; nothing was allocated.
    #[error("{codec:?} payload announces {size} uncompressed bytes, over the limit of {max}")]
    TooLarge {
        /// The codec.
        codec: Compression,
        /// The announced size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The payload decompressed to another length than announced (a lying
    /// size, or a decompression bomb cut off at the announced size).
    #[error("{codec:?} payload decompressed to {actual} bytes, {expected} announced")]
    SizeMismatch {
        /// The codec.
        codec: Compression,
        /// The announced size.
        expected: usize,
        /// What came out (or `expected + 1` when more was there).
        actual: usize,
    },
    /// The compressed bytes are not valid for the codec.
    #[error("corrupt {codec:?} payload: {source}")]
    Corrupt {
        /// The codec.
        codec: Compression,
        /// The codec library's reason.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Compression {
    /// The protocol's name for this codec.
    pub const fn to_proto(self) -> CompressionType {
        match self {
            Self::None => CompressionType::None,
            Self::Lz4 => CompressionType::Lz4,
            Self::Zlib => CompressionType::Zlib,
            Self::Zstd => CompressionType::Zstd,
            Self::Snappy => CompressionType::Snappy,
        }
    }

    /// The codec a `MessageMetadata.compression` value names.
    ///
    /// # Errors
    /// [`CompressionError::UnknownCodec`] for a value the protocol does not define.
    pub fn from_proto(value: i32) -> Result<Self, CompressionError> {
        Ok(match CompressionType::try_from(value) {
            Ok(CompressionType::None) => Self::None,
            Ok(CompressionType::Lz4) => Self::Lz4,
            Ok(CompressionType::Zlib) => Self::Zlib,
            Ok(CompressionType::Zstd) => Self::Zstd,
            Ok(CompressionType::Snappy) => Self::Snappy,
            Err(_) => return Err(CompressionError::UnknownCodec(value)),
        })
    }

    /// Compresses `input`.
    ///
    /// # Errors
    /// [`CompressionError::Corrupt`] if the codec refuses the input (Snappy
    /// cannot take more than 4 GiB).
    pub fn compress(self, input: &[u8]) -> Result<Bytes, CompressionError> {
        let corrupt =
            |source: Box<dyn std::error::Error + Send + Sync>| CompressionError::Corrupt {
                codec: self,
                source,
            };
        Ok(match self {
            Self::None => Bytes::copy_from_slice(input),
            Self::Lz4 => lz4_flex::block::compress(input).into(),
            Self::Zlib => {
                let mut encoder = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(input.len() / 2 + 64),
                    flate2::Compression::default(),
                );
                encoder.write_all(input).map_err(|e| corrupt(e.into()))?;
                encoder.finish().map_err(|e| corrupt(e.into()))?.into()
            }
            Self::Zstd => ruzstd::encoding::compress_to_vec(
                input,
                ruzstd::encoding::CompressionLevel::Fastest,
            )
            .into(),
            Self::Snappy => snap::raw::Encoder::new()
                .compress_vec(input)
                .map_err(|e| corrupt(e.into()))?
                .into(),
        })
    }

    /// Decompresses `input`, which must expand to exactly `uncompressed_size`
    /// bytes, refusing sizes over `max` before allocating.
    ///
    /// `None` returns `input` itself (no copy).
    ///
    /// # Errors
    /// [`CompressionError::TooLarge`], [`CompressionError::SizeMismatch`] or
    /// [`CompressionError::Corrupt`].
    pub fn decompress(
        self,
        input: Bytes,
        uncompressed_size: u32,
        max: usize,
    ) -> Result<Bytes, CompressionError> {
        if self == Self::None {
            return Ok(input);
        }
        let size = uncompressed_size as usize;
        if size > max {
            return Err(CompressionError::TooLarge {
                codec: self,
                size,
                max,
            });
        }
        let mut out = vec![0u8; size];
        let written = self.decompress_into(&input, &mut out)?;
        if written != size {
            return Err(CompressionError::SizeMismatch {
                codec: self,
                expected: size,
                actual: written,
            });
        }
        Ok(out.into())
    }

    /// Decompresses into `out` (sized to the announced length); returns the
    /// bytes written, or `out.len() + 1` when the data holds more than that.
    fn decompress_into(self, input: &[u8], out: &mut [u8]) -> Result<usize, CompressionError> {
        let corrupt =
            |source: Box<dyn std::error::Error + Send + Sync>| CompressionError::Corrupt {
                codec: self,
                source,
            };
        let too_small = out.len() + 1;
        match self {
            // `decompress` returns `input` itself before getting here.
            Self::None => Ok(0),
            Self::Lz4 => match lz4_flex::block::decompress_into(input, out) {
                Ok(n) => Ok(n),
                Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) => Ok(too_small),
                Err(e) => Err(corrupt(e.into())),
            },
            Self::Zlib => {
                let mut inflater = flate2::Decompress::new(true);
                let status = inflater
                    .decompress(input, out, flate2::FlushDecompress::Finish)
                    .map_err(|e| corrupt(e.into()))?;
                let written = inflater.total_out() as usize;
                match status {
                    flate2::Status::StreamEnd => Ok(written),
                    // Output full but the stream goes on: more than announced.
                    _ if written == out.len() => Ok(too_small),
                    _ => Err(corrupt("zlib stream ends early".into())),
                }
            }
            Self::Zstd => match ruzstd::decoding::FrameDecoder::new().decode_all(input, out) {
                Ok(n) => Ok(n),
                Err(ruzstd::decoding::errors::FrameDecoderError::TargetTooSmall) => Ok(too_small),
                Err(e) => Err(corrupt(e.into())),
            },
            Self::Snappy => {
                let announced = snap::raw::decompress_len(input).map_err(|e| corrupt(e.into()))?;
                if announced != out.len() {
                    return Ok(announced.min(too_small));
                }
                snap::raw::Decoder::new()
                    .decompress(input, out)
                    .map_err(|e| corrupt(e.into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 4] = [
        Compression::Lz4,
        Compression::Zlib,
        Compression::Zstd,
        Compression::Snappy,
    ];

    fn sample() -> Vec<u8> {
        (0..5000u32).flat_map(|i| (i % 97).to_le_bytes()).collect()
    }

    #[test]
    fn every_codec_round_trips_and_names_its_proto_value() {
        let data = sample();
        for codec in ALL {
            let packed = codec.compress(&data).unwrap();
            let out = codec
                .decompress(packed, data.len() as u32, 1 << 20)
                .unwrap();
            assert_eq!(&out[..], &data[..], "{codec:?}");
            assert_eq!(
                Compression::from_proto(codec.to_proto() as i32).unwrap(),
                codec
            );
        }
        assert!(matches!(
            Compression::from_proto(9),
            Err(CompressionError::UnknownCodec(9))
        ));
    }

    #[test]
    fn a_size_over_the_limit_is_refused_before_allocating() {
        for codec in ALL {
            let err = codec
                .decompress(Bytes::from_static(b"x"), u32::MAX, 5 << 20)
                .unwrap_err();
            assert!(
                matches!(err, CompressionError::TooLarge { size, .. } if size == u32::MAX as usize)
            );
        }
    }

    #[test]
    fn a_lying_size_is_an_error_either_way() {
        let data = sample();
        for codec in ALL {
            let packed = codec.compress(&data).unwrap();
            for lie in [data.len() - 1, data.len() + 1] {
                let err = codec
                    .decompress(packed.clone(), lie as u32, 1 << 20)
                    .unwrap_err();
                assert!(
                    matches!(
                        err,
                        CompressionError::SizeMismatch { .. } | CompressionError::Corrupt { .. }
                    ),
                    "{codec:?} with size {lie}: {err}"
                );
            }
        }
    }

    #[test]
    fn a_bomb_stops_at_the_announced_size() {
        let zeros = vec![0u8; 4 << 20];
        for codec in ALL {
            let bomb = codec.compress(&zeros).unwrap();
            assert!(bomb.len() < 300 << 10, "{codec:?}: {}", bomb.len());
            let err = codec.decompress(bomb, 1024, 5 << 20).unwrap_err();
            assert!(
                matches!(
                    err,
                    CompressionError::SizeMismatch { expected: 1024, .. }
                        | CompressionError::Corrupt { .. }
                ),
                "{codec:?}: {err}"
            );
        }
    }

    #[test]
    fn garbage_is_a_typed_error_not_a_panic() {
        for codec in ALL {
            for garbage in [
                &b""[..],
                b"\xff\xff\xff\xff",
                b"\x00\x01\x02 not compressed",
            ] {
                assert!(
                    codec
                        .decompress(Bytes::from_static(garbage), 64, 1024)
                        .is_err(),
                    "{codec:?}"
                );
            }
        }
    }

    #[test]
    fn none_passes_the_payload_through_without_copying() {
        let input = Bytes::from_static(b"plain");
        let out = Compression::None.decompress(input.clone(), 0, 0).unwrap();
        assert_eq!(out.as_ptr(), input.as_ptr());
    }
}
