//! The consumer core's batch-member acks and dead-letter forwards.

use super::Acked;
use super::actions::Incoming;
use super::batch_acks::AckSet;
use super::config::CoreConfig;
use super::dead_letter::{DeadLetterCutoff, DeadLetterPolicy};
use super::nack::NackPolicy;
use crate::consumer::error::CoreError;
use crate::message_id::MessageId;

use super::tests::{A, ack, batch_msg, core, deliver, drain, id, member, msg, secs, shared};

fn dead_letter(max: u32, cutoff: DeadLetterCutoff) -> CoreConfig {
    CoreConfig {
        dead_letter: Some(DeadLetterPolicy {
            cutoff,
            ..DeadLetterPolicy::after_redeliveries(max)
        }),
        ..shared()
    }
}

#[test]
fn dead_letter_on_arrival_with_max_3_shows_counts_0_1_2() {
    let t0 = crate::clock::now();
    let mut core = core(dead_letter(3, DeadLetterCutoff::OnArrival), t0);
    let mut seen = Vec::new();
    for count in 0..3 {
        core.on_message(t0, msg(id(1), count)).unwrap();
        let m = core.pop_for_application(t0).expect("below the limit");
        seen.push(m.redelivery_count);
        core.nack(t0, m.id, m.redelivery_count);
        assert_eq!(drain(&mut core), [A::Redeliver(vec![id(1)])]);
    }
    assert_eq!(seen, [0, 1, 2]);
    core.on_message(t0, msg(id(1), 3)).unwrap();
    assert!(
        core.pop_for_application(t0).is_none(),
        "never reaches the application"
    );
    let forward = A::ForwardToDeadLetter {
        origin: id(1),
        redelivery_count: 3,
        message: 1,
    };
    assert_eq!(
        drain(&mut core),
        [forward],
        "no ack before the publish is confirmed"
    );
}

#[test]
fn java_cutoff_shows_the_limit_once_and_forwards_on_the_next_request() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        ack_timeout: Some(secs(1)),
        ..dead_letter(3, DeadLetterCutoff::JavaStyle)
    };
    let mut core = core(config, t0);
    let m = deliver(&mut core, t0, msg(id(1), 3));
    assert_eq!(m.redelivery_count, 3, "the application sees count == max");
    core.nack(t0, id(1), 3);
    assert_eq!(
        drain(&mut core),
        [A::ForwardToDeadLetter {
            origin: id(1),
            redelivery_count: 3,
            message: 1
        }]
    );
    // The same by ack timeout; and below the limit it is a plain redelivery.
    deliver(&mut core, t0, msg(id(2), 4));
    deliver(&mut core, t0, msg(id(3), 2));
    core.on_tick(t0 + secs(1));
    let actions = drain(&mut core);
    assert!(actions.contains(&A::ForwardToDeadLetter {
        origin: id(2),
        redelivery_count: 4,
        message: 2
    }));
    assert!(actions.contains(&A::Redeliver(vec![id(3)])));
    assert_eq!(core.footprint(), [0, 0, 0, 0, 2, 0]);
}

#[test]
fn a_confirmed_forward_acks_the_original() {
    let t0 = crate::clock::now();
    let mut core = core(dead_letter(1, DeadLetterCutoff::OnArrival), t0);
    core.on_message(t0, msg(id(1), 1)).unwrap();
    assert!(core.pop_for_application(t0).is_none());
    assert!(matches!(
        drain(&mut core)[..],
        [A::ForwardToDeadLetter { .. }]
    ));
    core.on_message(t0, msg(id(1), 2)).unwrap(); // a copy while forwarding: dropped
    assert_eq!(drain(&mut core), []);
    core.on_dead_letter_result(id(1), Ok(()));
    assert_eq!(drain(&mut core), [ack(&[id(1)])]);
    core.on_dead_letter_result(id(1), Ok(()));
    assert_eq!(drain(&mut core), [], "a repeated result is ignored");
    assert_eq!(core.footprint(), [0; 6]);
}

#[test]
fn a_failed_forward_redelivers_and_never_acks() {
    let t0 = crate::clock::now();
    let mut core = core(dead_letter(1, DeadLetterCutoff::OnArrival), t0);
    core.on_message(t0, msg(id(1), 1)).unwrap();
    drain(&mut core);
    core.on_dead_letter_result(id(1), Err(()));
    assert_eq!(drain(&mut core), [A::Redeliver(vec![id(1)])]);
    // It comes back and is forwarded again.
    core.on_message(t0, msg(id(1), 2)).unwrap();
    assert!(matches!(
        drain(&mut core)[..],
        [A::ForwardToDeadLetter {
            redelivery_count: 2,
            ..
        }]
    ));
}

#[test]
fn batch_members_are_acked_as_one_entry() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    for i in 0..3 {
        deliver(&mut core, t0, batch_msg(5, i, 3));
    }
    core.ack(t0, member(5, 0));
    core.ack(t0, member(5, 2));
    assert_eq!(drain(&mut core), [], "siblings still held");
    core.ack(t0, member(5, 1));
    assert_eq!(drain(&mut core), [ack(&[id(5)])]);
    assert_eq!(core.footprint(), [0; 6]);
}

#[test]
fn batch_index_ack_sends_each_member_with_its_ack_set() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        batch_index_ack_enabled: true,
        ..shared()
    };
    let mut core = core(config, t0);
    deliver(&mut core, t0, batch_msg(5, 0, 2));
    deliver(&mut core, t0, batch_msg(5, 1, 2));
    core.ack(t0, member(5, 1));
    let partial = A::Ack {
        ids: vec![id(5)],
        cumulative: false,
        ack_set: Some(AckSet::new(vec![0b01], 2)),
    };
    assert_eq!(drain(&mut core), [partial]);
    core.ack(t0, member(5, 0));
    let alone = |entry, set| A::Ack {
        ids: vec![id(entry)],
        cumulative: false,
        ack_set: Some(AckSet::new(vec![set], 2)),
    };
    // The last member too: the broker acks the entry once each member is.
    assert_eq!(drain(&mut core), [alone(5, 0b10)]);
    // Acked before the driver polls, the two go as one entry ack.
    deliver(&mut core, t0, batch_msg(6, 0, 2));
    deliver(&mut core, t0, batch_msg(6, 1, 2));
    core.ack(t0, member(6, 1));
    core.ack(t0, member(6, 0));
    assert_eq!(drain(&mut core), [ack(&[id(6)])]);
}

#[test]
fn members_skipped_per_the_broker_ack_set_do_not_hold_back_the_entry_ack() {
    // Issue 5: a batch redelivered with an ack_set (members 0 and 2 acked on
    // an earlier connection) brings only member 1.
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    let m = deliver(&mut core, t0, batch_msg(5, 1, 3));
    core.on_skipped_members(id(5), 3, &[0, 2]);
    assert_eq!(drain(&mut core), [], "member 1 is still held");
    core.ack(t0, m.id);
    assert_eq!(drain(&mut core), [ack(&[id(5)])]);
    assert_eq!(core.footprint(), [0; 6]);
}

#[test]
fn an_entry_with_every_member_skipped_is_acked_at_once_and_others_leave_no_state() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    core.on_skipped_members(id(5), 2, &[0, 1]);
    assert_eq!(drain(&mut core), [ack(&[id(5)])], "all compacted out");
    // Members dropped on arrival (inconsistent batch info) leave nothing.
    assert!(core.on_message(t0, batch_msg(6, 4, 3)).is_err());
    core.on_skipped_members(id(6), 3, &[0]);
    core.on_skipped_members(id(7), 3, &[]);
    assert_eq!(core.footprint(), [0; 6]);
}

#[test]
fn with_batch_index_ack_each_member_ack_names_that_member_the_last_too() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        batch_index_ack_enabled: true,
        ..shared()
    };
    let mut core = core(config, t0);
    deliver(&mut core, t0, batch_msg(5, 1, 4));
    deliver(&mut core, t0, batch_msg(5, 3, 4));
    core.on_skipped_members(id(5), 4, &[0, 2]);
    core.ack(t0, member(5, 1));
    let partial = A::Ack {
        ids: vec![id(5)],
        cumulative: false,
        ack_set: Some(AckSet::new(vec![0b1101], 4)),
    };
    assert_eq!(drain(&mut core), [partial]);
    core.ack(t0, member(5, 3));
    let last = A::Ack {
        ids: vec![id(5)],
        cumulative: false,
        ack_set: Some(AckSet::new(vec![0b0111], 4)),
    };
    assert_eq!(drain(&mut core), [last]);
}

#[test]
fn a_nacked_member_redelivers_its_entry_without_the_acked_siblings() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    for i in 0..3 {
        deliver(&mut core, t0, batch_msg(5, i, 3));
    }
    core.ack(t0, member(5, 0));
    core.nack(t0, member(5, 1), 0);
    assert_eq!(drain(&mut core), [A::Redeliver(vec![id(5)])]);
    // The whole entry comes back: 0 is acked, 2 is still held, only 1 is new.
    for i in 0..3 {
        core.on_message(
            t0,
            Incoming {
                redelivery_count: 1,
                ..batch_msg(5, i, 3)
            },
        )
        .unwrap();
    }
    let again: Vec<MessageId> = std::iter::from_fn(|| core.pop_for_application(t0))
        .map(|m| m.id)
        .collect();
    assert_eq!(again, [member(5, 1)]);
    core.ack(t0, member(5, 1));
    core.ack(t0, member(5, 2));
    assert_eq!(drain(&mut core), [ack(&[id(5)])]);
    assert_eq!(core.footprint(), [0; 6]);
}

#[test]
fn cumulative_ack_inside_a_batch_acks_up_to_the_entry_before() {
    let t0 = crate::clock::now();
    let mut core = core(CoreConfig::default(), t0);
    for i in 0..3 {
        deliver(&mut core, t0, batch_msg(5, i, 3));
    }
    core.ack_cumulative(t0, member(5, 1)).unwrap();
    let before = A::Ack {
        ids: vec![id(4)],
        cumulative: true,
        ack_set: None,
    };
    assert_eq!(drain(&mut core), [before]);
    core.ack_cumulative(t0, member(5, 2)).unwrap();
    let whole = A::Ack {
        ids: vec![id(5)],
        cumulative: true,
        ack_set: None,
    };
    assert_eq!(drain(&mut core), [whole]);
    assert_eq!(core.footprint(), [0; 6]);
}

#[test]
fn memory_is_returned_after_acks() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        ack_timeout: Some(secs(30)),
        nack: NackPolicy::FixedDelay(secs(1)),
        ..dead_letter(3, DeadLetterCutoff::JavaStyle)
    };
    let mut core = core(config, t0);
    for n in 0..100 {
        core.on_message(t0, msg(id(n), 3)).unwrap();
        core.on_message(t0, batch_msg(1000 + n, 0, 2)).unwrap();
        core.on_message(t0, batch_msg(1000 + n, 1, 2)).unwrap();
    }
    while core.pop_for_application(t0).is_some() {}
    assert_eq!(core.footprint(), [0, 300, 0, 100, 0, 100]);
    for n in 0..100 {
        core.nack(t0, id(n), 3);
        core.ack(t0, id(n)); // withdraws the delayed nack
        core.ack(t0, member(1000 + n, 0));
        core.ack(t0, member(1000 + n, 1));
    }
    assert_eq!(core.footprint(), [0; 6]);
    assert_eq!(core.next_deadline(), None);
}

#[test]
fn inconsistent_batch_info_is_refused_without_panicking() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    let bad = [
        Incoming {
            batch_size: None,
            ..msg(member(1, 0), 0)
        },
        Incoming {
            batch_size: Some(2),
            ..msg(member(1, 2), 0)
        },
        Incoming {
            batch_size: Some(2),
            ..msg(id(1), 0)
        },
    ];
    for incoming in bad {
        assert!(matches!(
            core.on_message(t0, incoming),
            Err(CoreError::InconsistentBatch { .. })
        ));
    }
    assert_eq!(core.queued(), 0);
}

/// Without an ack timeout or a nack delay the driver gives the core a
/// stale instant instead of reading the clock per message: batches, acks
/// and nacks must then come out the same whatever instants it gets.
#[test]
fn an_untimed_core_acts_the_same_whatever_instants_it_gets() {
    let t0 = crate::clock::now();
    let run = |step: std::time::Duration| {
        let at = |n: u32| t0 + step * n;
        let mut core = core(shared(), t0);
        assert!(!core.config().uses_clock());
        for index in 0..3 {
            core.on_message(at(index as u32), batch_msg(1, index, 3))
                .unwrap();
        }
        core.on_message(at(3), msg(id(2), 0)).unwrap();
        let mut popped = Vec::new();
        while let Some(m) = core.pop_for_application(at(4)) {
            popped.push(m.id);
        }
        core.ack(at(5), member(1, 0));
        core.ack(at(6), member(1, 2));
        core.nack(at(7), id(2), 0);
        core.ack(at(8), member(1, 1));
        core.on_tick(at(9));
        (popped, drain(&mut core), core.next_deadline())
    };
    let (popped, actions, deadline) = run(std::time::Duration::ZERO);
    assert_eq!(popped, [member(1, 0), member(1, 1), member(1, 2), id(2)]);
    assert_eq!(actions, [A::Redeliver(vec![id(2)]), ack(&[id(1)])]);
    assert_eq!(deadline, None);
    assert_eq!(run(secs(3600)), (popped, actions, deadline));
    // With either timer the instants matter, so the driver reads the clock.
    let timed = CoreConfig {
        ack_timeout: Some(secs(10)),
        ..shared()
    };
    let delayed = CoreConfig {
        nack: NackPolicy::FixedDelay(secs(1)),
        ..shared()
    };
    assert!(core(timed, t0).config().uses_clock() && core(delayed, t0).config().uses_clock());
}

#[test]
fn a_member_acked_after_a_reconnect_never_acks_its_siblings() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    let held: Vec<_> = (0..3)
        .map(|i| deliver(&mut core, t0, batch_msg(5, i, 3)))
        .collect();
    core.on_reconnect();
    core.on_subscribed(t0);
    drain(&mut core);
    // Its entry state is gone; with the batch size the ack is recorded.
    assert_eq!(
        core.ack_with_batch_size(t0, held[1].id, Some(3)),
        Acked::AwaitingBatch { entry: id(5) }
    );
    assert_eq!(drain(&mut core), [], "the siblings are not acked");
    // The entry comes back: the acked member is dropped, the others are
    // handed out, and their acks complete the entry.
    for i in 0..3 {
        core.on_message(t0, batch_msg(5, i, 3)).unwrap();
    }
    let again: Vec<_> = std::iter::from_fn(|| core.pop_for_application(t0))
        .map(|m| m.id)
        .collect();
    assert_eq!(again, [member(5, 0), member(5, 2)]);
    core.ack(t0, member(5, 0));
    assert_eq!(drain(&mut core), []);
    core.ack(t0, member(5, 2));
    assert_eq!(drain(&mut core), [ack(&[id(5)])]);
}

#[test]
fn every_member_acked_after_a_reconnect_acks_the_entry_at_once() {
    let t0 = crate::clock::now();
    for batch_index_ack_enabled in [false, true] {
        let config = CoreConfig {
            batch_index_ack_enabled,
            ..shared()
        };
        let mut core = core(config, t0);
        for i in 0..2 {
            deliver(&mut core, t0, batch_msg(5, i, 2));
        }
        core.on_reconnect();
        drain(&mut core);
        let first = core.ack_with_batch_size(t0, member(5, 0), Some(2));
        let expected = if batch_index_ack_enabled {
            // Member 1 still unacked: bit 1 set.
            vec![A::Ack {
                ids: vec![id(5)],
                cumulative: false,
                ack_set: Some(AckSet::new(vec![0b10], 2)),
            }]
        } else {
            assert_eq!(first, Acked::AwaitingBatch { entry: id(5) });
            vec![]
        };
        assert_eq!(drain(&mut core), expected);
        assert_eq!(
            core.ack_with_batch_size(t0, member(5, 1), Some(2)),
            Acked::Queued
        );
        let last = if batch_index_ack_enabled {
            // Member 1 alone: the broker has member 0 acked already.
            A::Ack {
                ids: vec![id(5)],
                cumulative: false,
                ack_set: Some(AckSet::new(vec![0b01], 2)),
            }
        } else {
            ack(&[id(5)])
        };
        assert_eq!(drain(&mut core), [last]);
        assert_eq!(core.footprint()[3], 0, "no batch state left");
    }
}

#[test]
fn a_member_of_an_unknown_entry_acked_without_its_batch_size_is_unrecorded() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    assert_eq!(core.ack(t0, member(9, 1)), Acked::Unrecorded);
    assert_eq!(drain(&mut core), []);
}

#[test]
fn copies_of_a_wholly_acked_batch_a_reconnect_brings_back_are_dropped_however_large() {
    // A broker that lost the acks sent just before it closed the consumer
    // redelivers what they covered: a batch of 600, then 500 messages.
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    for index in 0..600 {
        core.on_message(t0, batch_msg(1, index, 600)).unwrap();
    }
    for index in 0..600 {
        let m = core.pop_for_application(t0).expect("member");
        assert_eq!(m.id, member(1, index));
        core.ack(t0, m.id);
    }
    for n in 2..502 {
        let m = deliver(&mut core, t0, msg(id(n), 0));
        core.ack(t0, m.id);
    }
    drain(&mut core);
    core.on_reconnect();
    core.on_subscribed(t0);
    drain(&mut core);
    for index in 0..600 {
        core.on_message(t0, batch_msg(1, index, 600)).unwrap();
    }
    for n in 2..502 {
        core.on_message(t0, msg(id(n), 1)).unwrap();
    }
    let again: Vec<MessageId> =
        std::iter::from_fn(|| core.pop_for_application(t0).map(|m| m.id)).collect();
    assert!(
        again.is_empty(),
        "{} copies of acked messages handed out, first {:?}",
        again.len(),
        again.first()
    );
}

#[test]
fn a_copy_of_a_batch_asked_for_twice_is_dropped_once_the_batch_is_acked() {
    // Two members nacked: two copies of the entry come. The first brings
    // both back and the batch is acked whole; the second must not hand
    // any member out again.
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    let members: Vec<_> = (0..3)
        .map(|i| deliver(&mut core, t0, batch_msg(1, i, 3)))
        .collect();
    core.nack(t0, members[0].id, 0);
    core.nack(t0, members[1].id, 0);
    drain(&mut core);
    let again = |i| Incoming {
        redelivery_count: 1,
        ..batch_msg(1, i, 3)
    };
    for i in 0..3 {
        core.on_message(t0, again(i)).unwrap();
    }
    let mut handed = Vec::new();
    while let Some(m) = core.pop_for_application(t0) {
        handed.push(m.id);
    }
    assert_eq!(handed, vec![member(1, 0), member(1, 1)]);
    for id in handed.iter().chain([&members[2].id]) {
        core.ack_with_batch_size(t0, *id, Some(3));
    }
    assert_eq!(drain(&mut core), vec![ack(&[id(1)])]);

    for i in 0..3 {
        core.on_message(t0, again(i)).unwrap();
    }
    assert!(
        core.pop_for_application(t0).is_none(),
        "a member of an acked batch came out again"
    );
}

// With batch index ack, each member's ack is kept on its own, the last
// member's too, also when a member was asked for again: a rewind made
// elsewhere brings back the members whose acks the broker confirmed, and
// keeps away only the one whose ack was not answered.
#[test]
fn with_batch_index_ack_a_rewind_brings_back_the_members_whose_acks_were_confirmed() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        batch_index_ack_enabled: true,
        ..shared()
    };
    let mut core = core(config, t0);
    for i in 0..3 {
        deliver(&mut core, t0, batch_msg(5, i, 3));
    }
    core.ack(t0, member(5, 0));
    core.nack(t0, member(5, 1), 0);
    core.ack(t0, member(5, 2));
    drain(&mut core);
    core.acks_confirmed(core.ack_mark());
    // The copy the nack asked for: member 1 alone, acked this time; its
    // ACK is not answered before the broker closes the consumer (a reset).
    core.on_message(
        t0,
        Incoming {
            redelivery_count: 1,
            ..batch_msg(5, 1, 3)
        },
    )
    .unwrap();
    let again = core.pop_for_application(t0).expect("member 1 again");
    core.ack(t0, again.id);
    let last = A::Ack {
        ids: vec![id(5)],
        cumulative: false,
        ack_set: Some(AckSet::new(vec![0b101], 3)),
    };
    assert_eq!(drain(&mut core), [last], "member 1 alone");
    core.on_reconnect();
    drain(&mut core);
    // The reset's copy: members 0 and 2 come back; 1 is dropped and acked
    // again, alone.
    for i in 0..3 {
        core.on_message(t0, batch_msg(5, i, 3)).unwrap();
    }
    let back: Vec<MessageId> = std::iter::from_fn(|| core.pop_for_application(t0))
        .map(|m| m.id)
        .collect();
    assert_eq!(back, [member(5, 0), member(5, 2)]);
}

// After a reconnect the application acks one member of a batch from the
// copy it held before (the consumer no longer holds it), and the other
// from the copy it was handed since: the entry is acked, and the copy of
// the first member still queued is dropped, never handed out (or
// forwarded to the dead-letter topic) after its entry's ack.
#[test]
fn a_batch_completed_across_two_copies_drops_the_copy_still_queued() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    core.on_message(t0, batch_msg(5, 0, 2)).unwrap();
    core.on_message(t0, batch_msg(5, 1, 2)).unwrap();
    let before = [
        core.pop_for_application(t0).expect("member 0"),
        core.pop_for_application(t0).expect("member 1"),
    ];
    core.on_reconnect();
    core.on_subscribed(t0);
    drain(&mut core);
    core.on_message(t0, batch_msg(5, 0, 2)).unwrap();
    core.on_message(t0, batch_msg(5, 1, 2)).unwrap();
    assert_eq!(
        core.ack_with_batch_size(t0, before[1].id, Some(2)),
        Acked::AwaitingBatch { entry: id(5) }
    );
    let again = core.pop_for_application(t0).expect("member 0 again");
    assert_eq!(again.id, member(5, 0));
    core.ack_with_batch_size(t0, again.id, Some(2));
    assert_eq!(drain(&mut core), [ack(&[id(5)])]);
    assert!(
        core.pop_for_application(t0).is_none(),
        "member 1's queued copy is dropped"
    );
}
