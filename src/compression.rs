//! Payload compression: LZ4, ZLIB, ZSTD and SNAPPY, byte-compatible with the
//! Java, Go and C++ clients.
//!
//! The formats are the ones Pulsar uses: LZ4 is a raw LZ4 *block* (no frame,
//! no size prefix), ZLIB is a zlib stream (deflate with the zlib header),
//! ZSTD is a zstd frame, and SNAPPY is the raw snappy *block* format, not the
//! framed stream format. `MessageMetadata.uncompressed_size` carries the
//! original length; it comes from the network, so it is checked against a
//! limit before anything is allocated, and the output must be exactly that
//! long. Nor is memory taken on the announcement's word: the block formats
//! (LZ4, SNAPPY) are refused when their input is too short to expand that
//! far, the stream formats (ZLIB, ZSTD) decode into a buffer that grows with
//! what actually comes out, and a zstd frame whose window (the history the
//! decoder reserves up front) exceeds what the limit needs is refused before
//! decoding. All four codecs are pure Rust.
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
    /// The payload is too short to expand to the announced size (LZ4 and
    /// SNAPPY cannot grow more than a fixed ratio); nothing was allocated.
    #[error("{codec:?} payload of {input} bytes cannot expand to the {size} bytes announced")]
    Implausible {
        /// The codec.
        codec: Compression,
        /// The compressed length.
        input: usize,
        /// The announced size.
        size: usize,
    },
    /// A zstd frame asks for a window (history the decoder reserves up
    /// front) larger than the limit allows, or holds more than one frame;
    /// refused before decoding.
    #[error("zstd frame asks for a window of {window} bytes, over the {max} allowed")]
    WindowTooLarge {
        /// The window the frame header asks for.
        window: u64,
        /// The largest window allowed (twice the size limit, at least 1 MiB).
        max: u64,
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
        let out = self.decompress_bounded(&input, size)?;
        if out.len() != size {
            return Err(CompressionError::SizeMismatch {
                codec: self,
                expected: size,
                actual: out.len(),
            });
        }
        Ok(out.into())
    }

    /// Decompresses `input`, announced as `size` bytes; returns what came
    /// out, or `size + 1` bytes when there is more.
    fn decompress_bounded(self, input: &[u8], size: usize) -> Result<Vec<u8>, CompressionError> {
        let corrupt =
            |source: Box<dyn std::error::Error + Send + Sync>| CompressionError::Corrupt {
                codec: self,
                source,
            };
        let implausible = || CompressionError::Implausible {
            codec: self,
            input: input.len(),
            size,
        };
        match self {
            // `decompress` returns `input` itself before getting here.
            Self::None => Ok(input.to_vec()),
            Self::Lz4 => {
                if size > input.len().saturating_mul(LZ4_MAX_RATIO).saturating_add(16) {
                    return Err(implausible());
                }
                let mut out = vec![0u8; size];
                match lz4_flex::block::decompress_into(input, &mut out) {
                    Ok(n) => out.truncate(n),
                    Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) => {
                        out.push(0);
                    }
                    Err(e) => return Err(corrupt(e.into())),
                }
                Ok(out)
            }
            Self::Zlib => read_at_most(flate2::read::ZlibDecoder::new(input), size)
                .map_err(|e| corrupt(e.into())),
            Self::Zstd => {
                let window = zstd_window(input).map_err(|e| corrupt(e.into()))?;
                // A compressor sizes the window to a power of two at least
                // the content, or to its level's default when it does not
                // know the content's size (see ZSTD_MIN_WINDOW_ALLOWED).
                let allowed = (2 * size as u64).max(ZSTD_MIN_WINDOW_ALLOWED);
                if window > allowed {
                    return Err(CompressionError::WindowTooLarge {
                        window,
                        max: allowed,
                    });
                }
                let mut rest = input;
                let decoder = ruzstd::decoding::StreamingDecoder::new(&mut rest)
                    .map_err(|e| corrupt(e.into()))?;
                let out = read_at_most(decoder, size).map_err(|e| corrupt(e.into()))?;
                if out.len() <= size && !rest.is_empty() {
                    // A second frame would get a window of its own.
                    return Err(corrupt("data after the zstd frame".into()));
                }
                Ok(out)
            }
            Self::Snappy => {
                let announced = snap::raw::decompress_len(input).map_err(|e| corrupt(e.into()))?;
                if announced != size {
                    return Ok(vec![0; announced.min(size + 1)]);
                }
                if size
                    > input
                        .len()
                        .saturating_mul(SNAPPY_MAX_RATIO)
                        .saturating_add(16)
                {
                    return Err(implausible());
                }
                snap::raw::Decoder::new()
                    .decompress_vec(input)
                    .map_err(|e| corrupt(e.into()))
            }
        }
    }
}

/// Windows up to this size pass whatever the announced size: zstd's levels
/// up to 19 use windows of at most 8 MiB (larger ones take `--long` or the
/// ultra levels, for content that large).
const ZSTD_MIN_WINDOW_ALLOWED: u64 = 8 << 20;
/// The most an LZ4 block grows: one byte per 255 of a match's length.
const LZ4_MAX_RATIO: usize = 255;
/// The most a snappy block grows: a 3-byte copy writes at most 64 bytes.
const SNAPPY_MAX_RATIO: usize = 22;

/// Reads `reader` to its end or to `size + 1` bytes, whichever comes first,
/// into a buffer that grows as bytes come.
fn read_at_most(reader: impl std::io::Read, size: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut out = Vec::new();
    reader.take(size as u64 + 1).read_to_end(&mut out)?;
    Ok(out)
}

/// The window a zstd frame's header asks for (RFC 8878, 3.1.1.1): the
/// history its decoder reserves before decoding a byte.
///
/// # Errors
/// A reason, for input that does not start with a zstd frame header.
fn zstd_window(input: &[u8]) -> Result<u64, &'static str> {
    const MAGIC: u32 = 0xFD2F_B528;
    let header = input.get(..5).ok_or("shorter than a zstd frame header")?;
    if u32::from_le_bytes([header[0], header[1], header[2], header[3]]) != MAGIC {
        return Err("not a zstd frame");
    }
    let descriptor = header[4];
    let single_segment = descriptor & 0x20 != 0;
    if !single_segment {
        let window = *input.get(5).ok_or("zstd window descriptor missing")?;
        let log = 10 + u32::from(window >> 3);
        let base = 1u64 << log;
        return Ok(base + (base / 8) * u64::from(window & 7));
    }
    // One segment: the window is the frame content size.
    let dictionary_bytes = [0, 1, 2, 4][usize::from(descriptor & 3)];
    let size_bytes = [1, 2, 4, 8][usize::from(descriptor >> 6)];
    let at = 5 + dictionary_bytes;
    let field = input
        .get(at..at + size_bytes)
        .ok_or("zstd frame content size missing")?;
    let mut le = [0u8; 8];
    le[..size_bytes].copy_from_slice(field);
    let size = u64::from_le_bytes(le);
    Ok(if size_bytes == 2 { size + 256 } else { size })
}

/// The zstd window descriptor of 96 MiB: 2^(10 + 16) + 4 * 2^23.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) const WINDOW_96_MIB: u8 = (16 << 3) | 4;

/// A zstd frame of one raw (uncompressed) block holding `data` (under
/// 2 MiB), whose header asks for the window `window_descriptor` encodes
/// (RFC 8878, 3.1.1.1.2): a 19-byte frame can ask for 96 MiB.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn zstd_raw_frame(window_descriptor: u8, data: &[u8]) -> Vec<u8> {
    let block = ((data.len() as u32) << 3) | 1; // last block, raw
    [
        &0xFD2F_B528_u32.to_le_bytes()[..],
        &[0x00, window_descriptor],
        &block.to_le_bytes()[..3],
        data,
    ]
    .concat()
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
    fn a_zstd_window_far_over_the_limit_is_refused_before_decoding() {
        let frame = zstd_raw_frame(WINDOW_96_MIB, b"0123456789");
        assert!(frame.len() < 30);
        let err = Compression::Zstd
            .decompress(frame.into(), 10, 5 << 20)
            .unwrap_err();
        assert!(
            matches!(
                err,
                CompressionError::WindowTooLarge {
                    window: 100_663_296,
                    max: 8_388_608
                }
            ),
            "{err}"
        );
        // The same frame with a 1 KiB window decodes.
        let small = zstd_raw_frame(0, b"0123456789");
        let out = Compression::Zstd.decompress(small.into(), 10, 5 << 20);
        assert_eq!(&out.unwrap()[..], b"0123456789");
    }

    #[test]
    fn a_second_zstd_frame_after_the_first_is_refused() {
        let one = Compression::Zstd.compress(b"abc").unwrap();
        let two = [&one[..], &one[..]].concat();
        let err = Compression::Zstd
            .decompress(two.into(), 6, 5 << 20)
            .unwrap_err();
        assert!(matches!(err, CompressionError::Corrupt { .. }), "{err}");
    }

    #[test]
    fn block_formats_cannot_announce_more_than_their_input_can_hold() {
        for codec in [Compression::Lz4, Compression::Snappy] {
            let mut tiny = codec.compress(b"0123456789").unwrap().to_vec();
            if codec == Compression::Snappy {
                // Snappy carries the size too (a varint, here one byte):
                // make it agree with the lie.
                tiny.splice(0..1, [0x80, 0x80, 0x80, 0x02]);
            }
            let err = codec.decompress(tiny.into(), 4 << 20, 5 << 20).unwrap_err();
            assert!(
                matches!(
                    err,
                    CompressionError::Implausible {
                        size: 4_194_304,
                        ..
                    }
                ),
                "{codec:?}: {err}"
            );
        }
    }

    #[test]
    fn none_passes_the_payload_through_without_copying() {
        let input = Bytes::from_static(b"plain");
        let out = Compression::None.decompress(input.clone(), 0, 0).unwrap();
        assert_eq!(out.as_ptr(), input.as_ptr());
    }
}
