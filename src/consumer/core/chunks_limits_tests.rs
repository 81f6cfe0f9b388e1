//! The bounds on the bytes being assembled, and on what a first chunk may
//! announce (see `chunks_limits.rs`).

use bytes::Bytes;

use super::tests::{WALL, assembler, chunk, id};
use super::*;

/// The same, announcing a message of `total` bytes and carrying `size`
/// bytes.
fn sized(uuid: &str, chunk_id: u32, num_chunks: u32, entry: u64, total: u64, size: usize) -> Chunk {
    Chunk {
        total_size: Some(total),
        data: Bytes::from(vec![b'x'; size]),
        ..chunk(uuid, chunk_id, num_chunks, entry)
    }
}

/// What a chunk of `size` bytes counts against the byte bound.
fn cost(size: usize) -> usize {
    size + CHUNK_OVERHEAD
}

#[test]
fn a_message_past_its_announced_size_is_given_up_and_held() {
    let t0 = crate::clock::now();
    let mut a = assembler();
    assert_eq!(a.on_chunk(t0, WALL, sized("x", 0, 3, 1, 25, 10)), None);
    assert_eq!(a.on_chunk(t0, WALL, sized("x", 1, 3, 2, 25, 10)), None);
    // 30 bytes of a message announced as 25.
    assert_eq!(a.on_chunk(t0, WALL, sized("x", 2, 3, 3, 25, 10)), None);
    assert_eq!(
        a.take_released(),
        [Released::Hold(vec![id(1), id(2), id(3)])]
    );
    assert_eq!((a.pending(), a.held_bytes()), (0, 0));
    // Exactly the announced size is a message.
    a.on_chunk(t0, WALL, sized("y", 0, 2, 4, 20, 10));
    let y = a
        .on_chunk(t0, WALL, sized("y", 1, 2, 5, 20, 10))
        .expect("y");
    assert_eq!(y.data.len(), 20);
}

#[test]
fn a_first_chunk_whose_message_could_never_be_assembled_is_held() {
    let t0 = crate::clock::now();
    let max = DEFAULT_MAX_PENDING_CHUNKED_BYTES as u64;
    let mut a = assembler();
    let liars = [
        ("more chunks than bytes", sized("a", 0, 100, 1, 99, 1)),
        ("more bytes than the bound", sized("b", 0, 2, 2, max, 1)),
        (
            "chunks whose ids pass the bound",
            Chunk {
                total_size: None,
                ..chunk("c", 0, u32::MAX, 3)
            },
        ),
    ];
    for (n, (what, first)) in liars.into_iter().enumerate() {
        let first_id = first.id;
        assert_eq!(a.on_chunk(t0, WALL, first), None, "{what}");
        assert_eq!(
            a.take_released(),
            [Released::Hold(vec![first_id])],
            "{what}"
        );
        assert_eq!((a.pending(), a.held_bytes()), (0, 0), "{what} ({n})");
    }
    // Its later chunks find no first chunk: held (the message is recent).
    assert_eq!(a.on_chunk(t0, WALL, sized("a", 1, 100, 4, 99, 1)), None);
    assert_eq!(a.take_released(), [Released::Hold(vec![id(4)])]);
    // At the bound, a message is taken.
    let fits = max - 2 * CHUNK_OVERHEAD as u64;
    a.on_chunk(t0, WALL, sized("d", 0, 2, 5, fits, 1));
    assert_eq!(a.pending(), 1);
}

#[test]
fn the_bytes_held_stay_within_the_bound_by_dropping_the_oldest_others() {
    let t0 = crate::clock::now();
    for auto_ack in [false, true] {
        let mut a = ChunkAssembler::new(ChunkLimits {
            max_pending: 0,
            max_pending_bytes: 3 * cost(10),
            auto_ack_oldest_on_full: auto_ack,
            ..ChunkLimits::default()
        });
        for (uuid, entry) in [("x", 1), ("y", 2), ("z", 3)] {
            a.on_chunk(t0, WALL, sized(uuid, 0, 2, entry, 20, 10));
        }
        assert_eq!(a.held_bytes(), 3 * cost(10));
        assert!(a.take_released().is_empty());
        // z's second chunk needs room: x, the oldest other, is dropped.
        let z = a
            .on_chunk(t0, WALL, sized("z", 1, 2, 4, 20, 10))
            .expect("z");
        assert_eq!(z.first, id(3));
        let dropped = if auto_ack {
            Released::Ack(vec![id(1)])
        } else {
            Released::Hold(vec![id(1)])
        };
        assert_eq!(a.take_released(), [dropped]);
        assert_eq!((a.pending(), a.held_bytes()), (1, cost(10)), "y is left");
    }
}

#[test]
fn a_message_larger_than_the_bound_is_given_up_and_held_never_acked() {
    let t0 = crate::clock::now();
    let mut a = ChunkAssembler::new(ChunkLimits {
        max_pending_bytes: 2 * cost(1000),
        auto_ack_oldest_on_full: true,
        ..ChunkLimits::default()
    });
    // Ten chunks of 1000 bytes of a message that announces no size.
    let big = |chunk_id, entry| Chunk {
        data: Bytes::from(vec![0_u8; 1000]),
        ..chunk("x", chunk_id, 10, entry)
    };
    a.on_chunk(t0, WALL, chunk("y", 0, 2, 1));
    a.on_chunk(t0, WALL, big(0, 2));
    a.on_chunk(t0, WALL, big(1, 3));
    assert_eq!(
        a.take_released(),
        [Released::Ack(vec![id(1)])],
        "y made room"
    );
    assert_eq!(a.held_bytes(), 2 * cost(1000));
    a.on_chunk(t0, WALL, big(2, 4));
    assert_eq!(
        a.take_released(),
        [Released::Hold(vec![id(2), id(3), id(4)])]
    );
    assert_eq!((a.pending(), a.held_bytes()), (0, 0));
    // What follows of it has no first chunk: held, one by one, nothing kept.
    for k in 3..10 {
        a.on_chunk(t0, WALL, big(k, 2 + u64::from(k)));
        assert_eq!(a.held_bytes(), 0);
    }
    let held: usize = a
        .take_released()
        .iter()
        .map(|r| match r {
            Released::Hold(ids) => ids.len(),
            Released::Ack(ids) => panic!("acked {ids:?}"),
        })
        .sum();
    assert_eq!(held, 7);
}
