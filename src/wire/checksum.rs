//! Magic numbers and the CRC32-C checksum of payload frames.
//!
//! The checksum is CRC32-C (Castagnoli), computed by the `crc32c` crate with
//! the CPU's CRC instruction where there is one, over every byte after the
//! checksum field: `[metadata_size][MessageMetadata][payload]`.

/// Marks a checksummed payload section: `[0x0e01][crc32c u32]`.
pub const MAGIC_CRC32C: u16 = 0x0e01;

/// Marks broker entry metadata in front of a payload: `[0x0e02][size u32][BrokerEntryMetadata]`.
pub const MAGIC_BROKER_ENTRY_METADATA: u16 = 0x0e02;

/// CRC32-C over `parts`, as if they were one contiguous slice.
///
/// # Examples
/// ```
/// use pulsar_wire::wire::checksum::crc32c;
/// // The check value of CRC32-C (RFC 3720, appendix B.4).
/// assert_eq!(crc32c(&[b"1234", b"56789"]), 0xe306_9283);
/// ```
pub fn crc32c(parts: &[&[u8]]) -> u32 {
    parts
        .iter()
        .fold(0, |crc, part| crc32c::crc32c_append(crc, part))
}

/// Reads a big-endian `u16` at `at`, if the bytes are there.
pub(crate) fn read_u16(buf: &[u8], at: usize) -> Option<u16> {
    let bytes = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([bytes[0], bytes[1]]))
}

/// Reads a big-endian `u32` at `at`, if the bytes are there.
pub(crate) fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_input_gives_the_same_checksum() {
        let data = b"The quick brown fox jumps over the lazy dog";
        let whole = crc32c(&[data]);
        for cut in 0..data.len() {
            assert_eq!(crc32c(&[&data[..cut], &data[cut..]]), whole);
        }
        // Published CRC32-C of this sentence.
        assert_eq!(whole, 0x2262_0404);
    }

    #[test]
    fn readers_never_read_past_the_end() {
        assert_eq!(read_u16(&[0x0e], 0), None);
        assert_eq!(read_u32(&[0, 0, 1], 0), None);
        assert_eq!(read_u32(&[0, 0, 1, 2], 0), Some(0x0102));
        assert_eq!(read_u32(&[0; 4], usize::MAX), None);
    }
}
