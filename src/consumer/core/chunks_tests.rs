use std::time::Duration;

use super::*;
use crate::consumer::core::actions::Action;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub(super) fn id(entry: u64) -> MessageId {
    MessageId::new(4, entry)
}

/// Chunk `chunk_id` of `num_chunks` of message `uuid`, at entry `entry`.
pub(super) fn chunk(uuid: &str, chunk_id: u32, num_chunks: u32, entry: u64) -> Chunk {
    Chunk {
        id: id(entry),
        uuid: uuid.into(),
        chunk_id,
        num_chunks,
        publish_time: 1_000,
        total_size: None,
        data: Bytes::from(format!("{uuid}{chunk_id}")),
    }
}

pub(super) fn assembler() -> ChunkAssembler {
    ChunkAssembler::new(ChunkLimits::default())
}

pub(super) const WALL: u64 = 2_000;

#[test]
fn an_entry_is_a_chunk_only_with_several_chunks() {
    let meta = MessageMetadata {
        uuid: Some("p-7".into()),
        num_chunks_from_msg: Some(3),
        chunk_id: Some(1),
        total_chunk_msg_size: Some(30),
        ..MessageMetadata::default()
    };
    let c = Chunk::of(id(1), &meta, Bytes::new()).expect("a chunk");
    assert_eq!((c.uuid.as_str(), c.chunk_id, c.num_chunks), ("p-7", 1, 3));
    assert_eq!(c.total_size, Some(30));
    let encrypted = MessageMetadata {
        encryption_keys: vec![crate::proto::EncryptionKeys::default()],
        ..meta.clone()
    };
    let c = Chunk::of(id(1), &encrypted, Bytes::new()).expect("a chunk");
    assert_eq!(
        c.total_size, None,
        "the size of the payload before encryption"
    );
    let single = MessageMetadata {
        num_chunks_from_msg: Some(1),
        ..meta.clone()
    };
    assert_eq!(Chunk::of(id(1), &single, Bytes::new()), None);
    assert_eq!(
        Chunk::of(id(1), &MessageMetadata::default(), Bytes::new()),
        None
    );
}

#[test]
fn interleaved_chunks_make_two_messages_under_their_first_ids() {
    let t0 = crate::clock::now();
    let mut a = assembler();
    assert_eq!(a.on_chunk(t0, WALL, chunk("x", 0, 2, 1)), None);
    assert_eq!(a.on_chunk(t0, WALL, chunk("y", 0, 3, 2)), None);
    let x = a
        .on_chunk(t0, WALL, chunk("x", 1, 2, 3))
        .expect("x complete");
    assert_eq!((x.first, &x.data[..]), (id(1), &b"x0x1"[..]));
    assert_eq!(a.on_chunk(t0, WALL, chunk("y", 1, 3, 4)), None);
    let y = a
        .on_chunk(t0, WALL, chunk("y", 2, 3, 5))
        .expect("y complete");
    assert_eq!((y.first, &y.data[..]), (id(2), &b"y0y1y2"[..]));
    assert_eq!(a.pending(), 0);
    assert!(a.take_released().is_empty());

    // An ack of a message names all its chunks, once.
    let ack = |ids| Action::<()>::Ack {
        ids,
        cumulative: false,
        ack_set: None,
    };
    assert_eq!(a.expand(ack(vec![id(2)])), ack(vec![id(2), id(4), id(5)]));
    assert_eq!(a.assembled(), 1);
    // A redelivery names them too, and keeps them for a later ack.
    assert_eq!(
        a.expand(Action::<()>::Redeliver(vec![id(1)])),
        Action::Redeliver(vec![id(1), id(3)])
    );
    assert_eq!(
        a.expand(ack(vec![id(1), id(9)])),
        ack(vec![id(1), id(3), id(9)])
    );
    assert_eq!(a.assembled(), 0);
}

#[test]
fn a_cumulative_ack_goes_up_to_the_last_chunk() {
    let t0 = crate::clock::now();
    let mut a = assembler();
    a.on_chunk(t0, WALL, chunk("x", 0, 2, 1));
    a.on_chunk(t0, WALL, chunk("x", 1, 2, 7));
    let cumulative = |at| Action::<()>::Ack {
        ids: vec![id(at)],
        cumulative: true,
        ack_set: None,
    };
    assert_eq!(a.expand(cumulative(1)), cumulative(7));
    assert_eq!(a.assembled(), 0);
    assert_eq!(a.expand(cumulative(9)), cumulative(9));
}

#[test]
fn a_chunk_seen_again_is_ignored_and_a_resent_one_is_acked() {
    let t0 = crate::clock::now();
    let mut a = assembler();
    a.on_chunk(t0, WALL, chunk("x", 0, 3, 1));
    a.on_chunk(t0, WALL, chunk("x", 1, 3, 2));
    assert_eq!(a.on_chunk(t0, WALL, chunk("x", 0, 3, 1)), None);
    assert_eq!(a.on_chunk(t0, WALL, chunk("x", 1, 3, 2)), None);
    assert!(a.take_released().is_empty(), "a redelivery is ignored");
    assert_eq!(a.on_chunk(t0, WALL, chunk("x", 1, 3, 3)), None);
    assert_eq!(a.take_released(), [Released::Ack(vec![id(3)])]);
    let x = a.on_chunk(t0, WALL, chunk("x", 2, 3, 4)).expect("complete");
    assert_eq!(&x.data[..], b"x0x1x2");
}

#[test]
fn a_first_chunk_sent_again_under_a_new_id_starts_the_message_over() {
    let t0 = crate::clock::now();
    let mut a = assembler();
    a.on_chunk(t0, WALL, chunk("x", 0, 2, 1));
    a.on_chunk(t0, WALL, chunk("x", 0, 2, 5));
    assert_eq!(a.take_released(), [Released::Ack(vec![id(1)])]);
    let x = a.on_chunk(t0, WALL, chunk("x", 1, 2, 6)).expect("complete");
    assert_eq!(x.first, id(5));
}

#[test]
fn a_missing_chunk_leaves_the_message_unacked() {
    let t0 = crate::clock::now();
    let mut a = assembler();
    a.on_chunk(t0, WALL, chunk("x", 0, 3, 1));
    assert_eq!(a.on_chunk(t0, WALL, chunk("x", 2, 3, 3)), None);
    assert_eq!(
        a.take_released(),
        [Released::Hold(vec![id(1)]), Released::Hold(vec![id(3)])]
    );
    assert_eq!(a.pending(), 0);
    // A chunk whose first never came, of a message older than the expiry:
    // acked, as Java does.
    let late = WALL + 61_000;
    assert_eq!(a.on_chunk(t0, late, chunk("y", 1, 2, 9)), None);
    assert_eq!(a.take_released(), [Released::Ack(vec![id(9)])]);
}

#[test]
fn chunks_that_can_no_longer_make_a_message_are_acked_once_the_expiry_passes() {
    // A chunk whose first never came (the producer's send of it was
    // refused and it sent the message again under new chunks), or the
    // chunks of a message with a gap, make no message on this
    // connection: held until the expiry, as an incomplete message is,
    // then acked, so they do not stay in the backlog for ever where no
    // ack timeout or reconnect brings them back.
    let t0 = crate::clock::now();
    let mut a = assembler();
    assert_eq!(a.on_chunk(t0, WALL, chunk("x", 2, 3, 7)), None);
    assert_eq!(a.take_released(), [Released::Hold(vec![id(7)])]);
    a.on_chunk(t0 + secs(5), WALL, chunk("y", 0, 3, 8));
    a.on_chunk(t0 + secs(5), WALL, chunk("y", 2, 3, 9));
    assert_eq!(
        a.take_released(),
        [Released::Hold(vec![id(8)]), Released::Hold(vec![id(9)])]
    );
    assert_eq!(a.next_deadline(), Some(t0 + secs(60)));
    a.on_tick(t0 + secs(59));
    assert!(a.take_released().is_empty());
    a.on_tick(t0 + secs(60));
    assert_eq!(a.take_released(), [Released::Ack(vec![id(7)])]);
    assert_eq!(a.next_deadline(), Some(t0 + secs(65)));
    a.on_tick(t0 + secs(65));
    assert_eq!(a.take_released(), [Released::Ack(vec![id(8), id(9)])]);
    assert_eq!(a.next_deadline(), None);

    // A reconnect brings them again: the wait starts over with the copy.
    a.on_chunk(t0, WALL, chunk("z", 1, 2, 10));
    a.restart();
    a.on_tick(t0 + secs(3600));
    assert_eq!(a.take_released(), [Released::Hold(vec![id(10)])]);
}

#[test]
fn the_oldest_message_is_dropped_beyond_the_pending_limit() {
    let t0 = crate::clock::now();
    for auto_ack in [false, true] {
        let mut a = ChunkAssembler::new(ChunkLimits {
            max_pending: 2,
            auto_ack_oldest_on_full: auto_ack,
            ..ChunkLimits::default()
        });
        a.on_chunk(t0, WALL, chunk("x", 0, 2, 1));
        a.on_chunk(t0, WALL, chunk("y", 0, 2, 2));
        a.on_chunk(t0, WALL, chunk("z", 0, 2, 3));
        let expected = if auto_ack {
            Released::Ack(vec![id(1)])
        } else {
            Released::Hold(vec![id(1)])
        };
        assert_eq!(a.take_released(), [expected]);
        assert_eq!(a.pending(), 2);
        assert!(a.on_chunk(t0, WALL, chunk("y", 1, 2, 4)).is_some());
        assert!(a.on_chunk(t0, WALL, chunk("z", 1, 2, 5)).is_some());
    }
}

#[test]
fn an_incomplete_message_expires_and_its_chunks_are_acked() {
    let t0 = crate::clock::now();
    let mut a = assembler();
    a.on_chunk(t0, WALL, chunk("x", 0, 3, 1));
    a.on_chunk(t0, WALL, chunk("x", 1, 3, 2));
    a.on_chunk(t0 + secs(10), WALL, chunk("y", 0, 2, 3));
    assert_eq!(a.next_deadline(), Some(t0 + secs(60)));
    a.on_tick(t0 + secs(59));
    assert!(a.take_released().is_empty());
    a.on_tick(t0 + secs(60));
    assert_eq!(a.take_released(), [Released::Ack(vec![id(1), id(2)])]);
    assert_eq!(a.next_deadline(), Some(t0 + secs(70)));
    // Its last chunk, if it comes after all, is out of order.
    assert_eq!(a.on_chunk(t0 + secs(61), WALL, chunk("x", 2, 3, 4)), None);
    assert_eq!(a.take_released(), [Released::Hold(vec![id(4)])]);

    let mut never = ChunkAssembler::new(ChunkLimits {
        expiry: None,
        ..ChunkLimits::default()
    });
    never.on_chunk(t0, WALL, chunk("x", 0, 2, 1));
    assert_eq!(never.next_deadline(), None);
    never.on_tick(t0 + secs(3600));
    assert_eq!(never.pending(), 1);
}

#[test]
fn an_expiry_of_duration_max_never_comes_and_never_overflows() {
    let t0 = crate::clock::now();
    let mut a = ChunkAssembler::new(ChunkLimits {
        expiry: Some(Duration::MAX),
        ..ChunkLimits::default()
    });
    a.on_chunk(t0, WALL, chunk("x", 0, 2, 1));
    let century = secs(99 * 365 * 24 * 3600);
    assert!(a.next_deadline().is_some_and(|at| at > t0 + century));
    a.on_tick(t0 + secs(3600));
    assert!(a.take_released().is_empty());
    assert_eq!(a.pending(), 1);
}

#[test]
fn a_rewind_starts_the_assembly_over_without_acking() {
    let t0 = crate::clock::now();
    let mut a = assembler();
    a.on_chunk(t0, WALL, chunk("x", 0, 2, 1));
    let rewind = Action::<()>::RedeliverAll { consumer_epoch: 1 };
    assert_eq!(a.expand(rewind.clone()), rewind);
    assert_eq!(a.pending(), 0);
    assert!(a.take_released().is_empty());
    // The chunks come again from the first.
    a.on_chunk(t0, WALL, chunk("x", 0, 2, 1));
    assert!(a.on_chunk(t0, WALL, chunk("x", 1, 2, 2)).is_some());
}

#[test]
fn a_forgetting_assembler_keeps_nothing_once_a_message_is_assembled() {
    let t0 = crate::clock::now();
    let mut a = ChunkAssembler::forgetting(ChunkLimits::default());
    for n in 0..1_000_u64 {
        let uuid = format!("m{n}");
        assert_eq!(a.on_chunk(t0, WALL, chunk(&uuid, 0, 2, 2 * n)), None);
        assert!(
            a.on_chunk(t0, WALL, chunk(&uuid, 1, 2, 2 * n + 1))
                .is_some()
        );
    }
    assert_eq!((a.pending(), a.assembled()), (0, 0));
    let mut remembering = assembler();
    remembering.on_chunk(t0, WALL, chunk("x", 0, 2, 1));
    remembering.on_chunk(t0, WALL, chunk("x", 1, 2, 2));
    assert_eq!(remembering.assembled(), 1, "kept until acked");
}

#[test]
fn a_restart_keeps_the_chunk_ids_of_assembled_messages_for_their_ack() {
    let t0 = crate::clock::now();
    let mut a = assembler();
    a.on_chunk(t0, WALL, chunk("x", 0, 2, 1));
    a.on_chunk(t0, WALL, chunk("x", 1, 2, 2)).expect("x");
    a.on_chunk(t0, WALL, chunk("y", 0, 2, 3));
    a.restart();
    assert_eq!(a.pending(), 0, "the assembly in progress is dropped");
    let rewind = a.expand(Action::<()>::RedeliverAll { consumer_epoch: 1 });
    assert_eq!(rewind, Action::RedeliverAll { consumer_epoch: 1 });
    let ack = |ids| Action::<()>::Ack {
        ids,
        cumulative: false,
        ack_set: None,
    };
    assert_eq!(a.expand(ack(vec![id(1)])), ack(vec![id(1), id(2)]));
    assert_eq!(a.assembled(), 0, "forgotten once acked");
}

#[test]
fn past_the_bound_the_oldest_assembled_message_is_forgotten() {
    let t0 = crate::clock::now();
    let mut a = assembler().remembering_at_most(2, usize::MAX);
    for (uuid, first) in [("x", 1), ("y", 3), ("x2", 5)] {
        a.on_chunk(t0, WALL, chunk(uuid, 0, 2, first));
        a.on_chunk(t0, WALL, chunk(uuid, 1, 2, first + 1))
            .expect("assembled");
    }
    assert_eq!(a.assembled(), 2);
    // Assembled again (a redelivery): its place moves to the newest.
    a.on_chunk(t0, WALL, chunk("y", 0, 2, 3));
    a.on_chunk(t0, WALL, chunk("y", 1, 2, 4)).expect("y again");
    a.on_chunk(t0, WALL, chunk("z", 0, 2, 7));
    a.on_chunk(t0, WALL, chunk("z", 1, 2, 8)).expect("z");
    let ack = |ids| Action::<()>::Ack {
        ids,
        cumulative: false,
        ack_set: None,
    };
    assert_eq!(a.expand(ack(vec![id(1)])), ack(vec![id(1)]), "x forgotten");
    assert_eq!(a.expand(ack(vec![id(5)])), ack(vec![id(5)]), "x2 forgotten");
    assert_eq!(a.expand(ack(vec![id(3)])), ack(vec![id(3), id(4)]));
    assert_eq!(a.expand(ack(vec![id(7)])), ack(vec![id(7), id(8)]));
    assert_eq!(a.assembled(), 0);
}

#[test]
fn past_the_bound_on_chunk_ids_the_oldest_assembled_message_is_forgotten() {
    let t0 = crate::clock::now();
    let mut a = assembler().remembering_at_most(100, 5);
    for (uuid, first) in [("x", 1), ("y", 4)] {
        for k in 0..3 {
            a.on_chunk(t0, WALL, chunk(uuid, k, 3, first + u64::from(k)));
        }
    }
    assert_eq!((a.assembled(), a.remembered_ids()), (1, 3), "x forgotten");
    let ack = |ids| Action::<()>::Ack {
        ids,
        cumulative: false,
        ack_set: None,
    };
    assert_eq!(a.expand(ack(vec![id(4)])), ack(vec![id(4), id(5), id(6)]));
    assert_eq!((a.assembled(), a.remembered_ids()), (0, 0));
}
