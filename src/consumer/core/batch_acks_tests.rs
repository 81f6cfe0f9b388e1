//! The batch-member bookkeeping, without a consumer around it.

use super::*;

fn member(entry: u64, index: i32) -> MessageId {
    MessageId::new(2, entry).with_batch_index(index)
}

#[test]
fn the_entry_is_acked_when_the_last_member_is() {
    let mut acks = BatchAcks::default();
    for i in 0..3 {
        acks.arrive(member(1, i), 3, false);
    }
    assert_eq!(
        acks.ack(member(1, 1), false),
        MemberAck::Partial(MessageId::new(2, 1), AckSet::new(vec![0b101], 3))
    );
    assert!(acks.is_acked(member(1, 1)) && !acks.is_acked(member(1, 0)));
    // Each partial ack names its own member alone (the broker and-s them).
    assert_eq!(
        acks.ack(member(1, 0), false),
        MemberAck::Partial(MessageId::new(2, 1), AckSet::new(vec![0b110], 3))
    );
    assert_eq!(
        acks.ack(member(1, 2), false),
        MemberAck::Last(MessageId::new(2, 1), false, AckSet::new(vec![0b011], 3)),
        "the entry is done, and the set names the last member alone"
    );
    assert_eq!(acks.len(), 0, "state dropped once fully acked");
}

#[test]
fn ack_set_spans_words_and_masks_the_tail() {
    let mut acks = BatchAcks::default();
    for i in 0..70 {
        acks.arrive(member(1, i), 70, false);
    }
    let MemberAck::Partial(_, set) = acks.ack(member(1, 65), false) else {
        panic!("partial")
    };
    assert_eq!(set, AckSet::new(vec![-1, 0b11_1101], 70));
}

#[test]
fn an_index_past_the_known_batch_size_is_not_acked_and_does_not_panic() {
    let mut acks = BatchAcks::default();
    acks.arrive(member(1, 0), 2, false);
    acks.arrive(member(1, 1), 2, false);
    assert!(!acks.is_acked(member(1, 500)));
    assert!(matches!(
        acks.ack(member(1, 500), false),
        MemberAck::Partial(..)
    ));
    assert_eq!(
        acks.ack(member(1, 0), false),
        MemberAck::Partial(MessageId::new(2, 1), AckSet::new(vec![0b10], 2))
    );
}

#[test]
fn a_batch_that_leaves_unacked_leaves_no_state() {
    let mut acks = BatchAcks::default();
    acks.arrive(member(1, 0), 2, false);
    acks.arrive(member(1, 1), 2, false);
    acks.leave(member(1, 0));
    acks.leave(member(1, 1));
    assert_eq!(acks.len(), 0);
}

#[test]
fn acked_bits_outlive_a_rewind_until_the_entry_is_done() {
    let mut acks = BatchAcks::default();
    acks.arrive(member(1, 0), 2, false);
    acks.arrive(member(1, 1), 2, false);
    acks.ack(member(1, 0), false);
    acks.clear_live(true);
    assert!(
        acks.is_acked(member(1, 0)),
        "filters the redelivered member"
    );
    acks.arrive(member(1, 1), 2, false);
    assert_eq!(
        acks.ack(member(1, 1), false),
        MemberAck::Last(MessageId::new(2, 1), false, AckSet::new(vec![0b01], 2))
    );
}

#[test]
fn acked_bits_are_forgotten_where_asked() {
    let mut acks = BatchAcks::default();
    acks.arrive(member(1, 0), 2, false);
    acks.arrive(member(1, 1), 2, false);
    acks.ack(member(1, 0), false);
    acks.clear_live(false);
    assert!(
        !acks.is_acked(member(1, 0)),
        "a reconnect's copy comes whole"
    );
    assert_eq!(acks.len(), 0);
}

#[test]
fn forwards_hold_state_until_their_result() {
    let mut acks = BatchAcks::default();
    acks.arrive(member(1, 0), 1, true);
    acks.clear_live(true);
    assert_eq!(acks.len(), 1);
    acks.forward_failed(member(1, 0));
    assert_eq!(acks.len(), 0);
    acks.arrive(member(1, 0), 1, true);
    assert_eq!(
        acks.ack(member(1, 0), true),
        MemberAck::Last(MessageId::new(2, 1), false, AckSet::new(vec![0], 1))
    );
}

#[test]
fn cumulative_acks_earlier_entries_and_members_up_to_the_id() {
    let mut acks = BatchAcks::default();
    for i in 0..3 {
        acks.arrive(member(1, i), 3, false);
        acks.arrive(member(2, i), 3, false);
    }
    let before = MessageId::new(2, 1);
    assert_eq!(
        acks.ack_cumulative(member(2, 1), None, false),
        Some((before, None))
    );
    assert_eq!(acks.len(), 1, "entry 1 is covered");
    let partial = Some((MessageId::new(2, 2), Some(AckSet::new(vec![0b100], 3))));
    assert_eq!(acks.ack_cumulative(member(2, 1), None, true), partial);
    acks.leave(member(2, 0));
    acks.leave(member(2, 1));
    let whole = Some((MessageId::new(2, 2), None));
    assert_eq!(acks.ack_cumulative(member(2, 2), None, false), whole);
    assert_eq!(
        (acks.len(), acks.ack(member(2, 2), false)),
        (0, MemberAck::Untracked)
    );
    let plain = MessageId::new(2, 9);
    assert_eq!(acks.ack_cumulative(plain, None, false), Some((plain, None)));
    let first = MessageId::new(2, 0).with_batch_index(0);
    acks.arrive(first, 2, false);
    assert_eq!(
        acks.ack_cumulative(first, None, false),
        None,
        "no entry before 0"
    );
}
#[test]
fn skipped_members_count_as_acked() {
    let mut acks = BatchAcks::default();
    // Redelivered with an ack_set: members 0 and 2 were acked before.
    acks.arrive(member(1, 1), 3, false);
    assert_eq!(
        acks.skip(MessageId::new(2, 1), 3, &[0, 2, 7, -1]),
        MemberAck::Partial(MessageId::new(2, 1), AckSet::new(vec![0b010], 3))
    );
    assert_eq!(
        acks.ack(member(1, 1), false),
        MemberAck::Last(MessageId::new(2, 1), false, AckSet::new(vec![0b101], 3)),
        "the delivered member completes the entry"
    );
    assert_eq!(acks.len(), 0);
}

#[test]
fn skipping_leaves_no_state_for_entries_without_members_here() {
    let mut acks = BatchAcks::default();
    assert_eq!(
        acks.skip(MessageId::new(2, 1), 3, &[0, 2]),
        MemberAck::Untracked
    );
    assert_eq!(
        acks.skip(MessageId::new(2, 1), 3, &[0, 0, 2]),
        MemberAck::Untracked,
        "a repeated index does not stand in for member 1"
    );
    assert_eq!(acks.len(), 0);
    assert_eq!(
        acks.skip(MessageId::new(2, 1), 3, &[2, 0, 1]),
        MemberAck::Entry(MessageId::new(2, 1), false),
        "every member skipped: the entry is done"
    );
    assert_eq!(
        acks.skip(MessageId::new(2, 1), 0, &[]),
        MemberAck::Untracked
    );
    assert_eq!(acks.len(), 0);
}

#[test]
fn a_skip_completing_an_entry_whose_members_were_acked_acks_it() {
    let mut acks = BatchAcks::default();
    acks.arrive(member(1, 0), 2, false);
    acks.ack(member(1, 0), false);
    assert_eq!(
        acks.skip(MessageId::new(2, 1), 2, &[1]),
        MemberAck::Entry(MessageId::new(2, 1), false)
    );
}

#[test]
fn a_batch_of_63_masks_its_tail_without_overflow() {
    let mut acks = BatchAcks::default();
    for i in 0..63 {
        acks.arrive(member(1, i), 63, false);
    }
    let MemberAck::Partial(_, set) = acks.ack(member(1, 0), false) else {
        panic!("partial")
    };
    assert_eq!(set, AckSet::new(vec![i64::MAX - 1], 63));
}
