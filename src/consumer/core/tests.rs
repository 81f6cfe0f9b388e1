//! The consumer core, tested like arithmetic: time is `t0 + Duration`.
//! Timers, acks, permits, rewinds and reconnects here; batches and the
//! dead-letter policy in `tests_batch_dlq`.

use std::time::{Duration, Instant};

use super::actions::{Action, Incoming};
use super::config::{CoreConfig, SubscriptionType};
use super::nack::NackPolicy;
use super::{Acked, ConsumerCore};
use crate::consumer::error::CumulativeAckNotAllowed;
use crate::message_id::MessageId;

pub(super) type A = Action<u64>;

pub(super) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(super) fn id(entry: u64) -> MessageId {
    MessageId::new(1, entry)
}

pub(super) fn member(entry: u64, index: i32) -> MessageId {
    id(entry).with_batch_index(index)
}

pub(super) fn msg(id: MessageId, redelivery_count: u32) -> Incoming<u64> {
    Incoming {
        id,
        position: id,
        redelivery_count,
        consumer_epoch: None,
        batch_size: None,
        message: id.entry_id,
    }
}

pub(super) fn batch_msg(entry: u64, index: i32, size: u32) -> Incoming<u64> {
    Incoming {
        batch_size: Some(size),
        ..msg(member(entry, index), 0)
    }
}

pub(super) fn shared() -> CoreConfig {
    CoreConfig {
        subscription_type: SubscriptionType::Shared,
        ..CoreConfig::default()
    }
}

/// A subscribed core whose initial Flow has been taken.
pub(super) fn core(config: CoreConfig, t0: Instant) -> ConsumerCore<u64> {
    let mut core = ConsumerCore::new(config).expect("valid config");
    core.on_subscribed(t0);
    assert!(matches!(core.poll_action(), Some(Action::Flow(_))));
    core
}

pub(super) fn drain(core: &mut ConsumerCore<u64>) -> Vec<A> {
    std::iter::from_fn(|| core.poll_action()).collect()
}

pub(super) fn ack(ids: &[MessageId]) -> A {
    Action::Ack {
        ids: ids.to_vec(),
        cumulative: false,
        ack_set: None,
    }
}

/// Delivers `incoming` and hands it to the application.
pub(super) fn deliver(
    core: &mut ConsumerCore<u64>,
    now: Instant,
    incoming: Incoming<u64>,
) -> Incoming<u64> {
    core.on_message(now, incoming).unwrap();
    core.pop_for_application(now)
        .expect("a message for the application")
}

#[test]
fn held_past_timeout_is_redelivered_once_at_the_first_tick_after_its_deadline() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        ack_timeout: Some(secs(10)),
        ..shared()
    };
    let mut core = core(config, t0);
    deliver(&mut core, t0, msg(id(7), 0));
    deliver(&mut core, t0 + ms(100), msg(id(8), 0));
    core.on_tick(t0 + ms(9_500));
    assert_eq!(drain(&mut core), []);
    assert_eq!(core.next_deadline(), Some(t0 + secs(10)));
    core.on_tick(t0 + secs(10));
    assert_eq!(drain(&mut core), [A::Redeliver(vec![id(7)])]);
    assert_eq!(
        core.next_deadline(),
        Some(t0 + ms(10_500)),
        "10.1 s rounds up"
    );
    core.on_tick(t0 + ms(10_499));
    assert_eq!(drain(&mut core), []);
    core.on_tick(t0 + ms(10_500));
    assert_eq!(drain(&mut core), [A::Redeliver(vec![id(8)])]);
    core.on_tick(t0 + secs(60));
    assert_eq!((drain(&mut core), core.next_deadline()), (vec![], None));
}

#[test]
fn an_ack_after_expiry_is_sent_and_the_redelivered_copy_is_dropped() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        ack_timeout: Some(secs(1)),
        ..shared()
    };
    let mut core = core(config, t0);
    deliver(&mut core, t0, msg(id(1), 0));
    core.on_tick(t0 + secs(1));
    assert_eq!(drain(&mut core), [A::Redeliver(vec![id(1)])]);
    assert_eq!(core.ack(t0 + secs(2), id(1)), Acked::Queued);
    assert_eq!(drain(&mut core), [ack(&[id(1)])], "ids are positions");
    core.on_message(t0 + secs(2), msg(id(1), 1)).unwrap();
    assert_eq!(
        core.queued(),
        0,
        "the copy redelivered meanwhile is dropped"
    );
}

#[test]
fn an_ack_of_an_id_not_held_is_sent_and_its_queued_copy_never_handed_out() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    core.ack(t0, id(42));
    core.nack(t0, id(42), 0); // not held: nothing to redeliver
    core.on_message(t0, msg(id(43), 0)).unwrap();
    core.ack(t0, id(43)); // queued, not yet handed over
    assert_eq!(drain(&mut core), [ack(&[id(42), id(43)])]);
    assert!(core.pop_for_application(t0).is_none(), "43 is acked");
    assert_eq!(core.permits_returned(), 1, "its permit goes back");
}

#[test]
fn acks_after_a_reconnect_go_out_and_their_copies_are_dropped() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    for n in 1..=3 {
        deliver(&mut core, t0, msg(id(n), 0));
    }
    core.on_reconnect();
    core.on_subscribed(t0);
    assert_eq!(drain(&mut core), [A::Flow(1000)]);
    // Redelivered after the reconnect: 1 and 2 queued before the acks.
    core.on_message(t0, msg(id(1), 1)).unwrap();
    core.on_message(t0, msg(id(2), 1)).unwrap();
    for n in 1..=3 {
        core.ack(t0, id(n));
    }
    assert_eq!(drain(&mut core), [ack(&[id(1), id(2), id(3)])]);
    core.on_message(t0, msg(id(3), 1)).unwrap(); // arrives after its ack
    assert!(core.pop_for_application(t0).is_none(), "none comes back");
}

#[test]
fn a_cumulative_ack_after_a_rewind_goes_out_and_covers_the_redelivered_copies() {
    let t0 = crate::clock::now();
    let mut core = core(CoreConfig::default(), t0);
    for n in 1..=3 {
        deliver(&mut core, t0, msg(id(n), 0));
    }
    core.on_reconnect();
    core.on_subscribed(t0);
    drain(&mut core);
    core.on_message(t0, msg(id(1), 0)).unwrap();
    assert_eq!(core.ack_cumulative(t0, id(3)), Ok(Acked::Queued));
    let cumulative = A::Ack {
        ids: vec![id(3)],
        cumulative: true,
        ack_set: None,
    };
    assert_eq!(drain(&mut core), [cumulative]);
    core.on_message(t0, msg(id(2), 0)).unwrap();
    core.on_message(t0, msg(id(4), 0)).unwrap();
    assert_eq!(core.pop_for_application(t0).map(|m| m.id), Some(id(4)));
}

#[test]
fn nack_then_ack() {
    let t0 = crate::clock::now();
    // Immediate: the redelivery is already requested; the late ack is sent
    // all the same, and the copy is dropped when it comes.
    let mut core1 = core(shared(), t0);
    deliver(&mut core1, t0, msg(id(1), 0));
    core1.nack(t0, id(1), 0);
    core1.ack(t0, id(1));
    assert_eq!(
        drain(&mut core1),
        [A::Redeliver(vec![id(1)]), ack(&[id(1)])]
    );
    // Delayed: the ack withdraws the held nack.
    let config = CoreConfig {
        nack: NackPolicy::FixedDelay(secs(1)),
        ..shared()
    };
    let mut core2 = core(config, t0);
    deliver(&mut core2, t0, msg(id(1), 0));
    core2.nack(t0, id(1), 0);
    assert_eq!(core2.next_deadline(), Some(t0 + secs(1)));
    core2.ack(t0 + ms(500), id(1));
    assert_eq!(drain(&mut core2), [ack(&[id(1)])]);
    core2.on_tick(t0 + secs(5));
    assert_eq!((drain(&mut core2), core2.next_deadline()), (vec![], None));
}

#[test]
fn a_nacked_message_leaves_the_ack_timeout_tracker_at_once() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        ack_timeout: Some(secs(1)),
        nack: NackPolicy::FixedDelay(secs(3)),
        ..shared()
    };
    let mut core = core(config, t0);
    deliver(&mut core, t0, msg(id(1), 0));
    core.nack(t0, id(1), 0);
    assert_eq!(core.held(), 0);
    core.on_tick(t0 + secs(1));
    assert_eq!(drain(&mut core), [], "no redelivery from the timer");
    core.on_tick(t0 + secs(3));
    assert_eq!(drain(&mut core), [A::Redeliver(vec![id(1)])]);
}

#[test]
fn duplicates_are_handed_over_once_and_counted_once() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        receiver_queue_size: 4,
        ack_timeout: Some(secs(1)),
        ..shared()
    };
    let mut core = core(config, t0);
    core.on_message(t0, msg(id(1), 0)).unwrap();
    core.on_message(t0, msg(id(1), 0)).unwrap(); // queued: the copy is dropped
    assert!(core.pop_for_application(t0).is_some());
    assert!(core.pop_for_application(t0).is_none());
    core.on_message(t0, msg(id(1), 0)).unwrap(); // held: dropped too
    assert_eq!((core.queued(), core.held()), (0, 1));
    // Three arrivals, three permits back: one Flow at half the queue (2)
    // and one permit still pending.
    assert_eq!(drain(&mut core), [A::Flow(2)]);
    core.on_tick(t0 + secs(1));
    assert_eq!(
        drain(&mut core),
        [A::Redeliver(vec![id(1)])],
        "one tracker entry"
    );
}

#[test]
fn cumulative_ack_stops_every_clock_it_covers() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        ack_timeout: Some(secs(1)),
        ..CoreConfig::default()
    };
    let mut core = core(config, t0);
    for n in 1..=5 {
        deliver(&mut core, t0, msg(id(n), 0));
    }
    core.ack_cumulative(t0, id(3)).unwrap();
    assert_eq!(core.held(), 2);
    let acks = drain(&mut core);
    assert_eq!(
        acks,
        [A::Ack {
            ids: vec![id(3)],
            cumulative: true,
            ack_set: None
        }]
    );
    core.ack_cumulative(t0, id(5)).unwrap();
    assert_eq!(core.held(), 0);
    assert_eq!(core.next_deadline(), None);
    core.ack_cumulative(t0, id(5)).unwrap();
    assert_eq!(
        drain(&mut core).len(),
        1,
        "a repeated cumulative ack replaces the pending one"
    );
}

#[test]
fn cumulative_ack_on_shared_is_a_typed_error() {
    let t0 = crate::clock::now();
    for kind in [SubscriptionType::Shared, SubscriptionType::KeyShared] {
        let config = CoreConfig {
            subscription_type: kind,
            ..CoreConfig::default()
        };
        let mut core = core(config, t0);
        deliver(&mut core, t0, msg(id(1), 0));
        assert_eq!(
            core.ack_cumulative(t0, id(1)),
            Err(CumulativeAckNotAllowed { subscription: kind })
        );
        assert_eq!((core.held(), drain(&mut core)), (1, vec![]));
    }
}

/// Delivers `n` plain messages of epoch 0 to a core (queue of 10) and
/// takes the first `taken`.
fn exclusive_with(n: u64, taken: usize, t0: Instant) -> ConsumerCore<u64> {
    let config = CoreConfig {
        receiver_queue_size: 10,
        ..CoreConfig::default()
    };
    let mut core = core(config, t0);
    for n in 1..=n {
        let incoming = Incoming {
            consumer_epoch: Some(0),
            ..msg(id(n), 0)
        };
        core.on_message(t0, incoming).unwrap();
    }
    for _ in 0..taken {
        assert!(core.pop_for_application(t0).is_some());
    }
    core
}

#[test]
fn exclusive_nacks_coalesce_into_one_rewind_once_the_queue_is_drained() {
    let t0 = crate::clock::now();
    let mut core = exclusive_with(5, 2, t0);
    core.nack(t0, id(1), 0);
    core.nack(t0, id(2), 0); // joins the same rewind
    assert_eq!(core.consumer_epoch(), 0, "no rewind yet");
    assert_eq!(drain(&mut core), []);
    // The messages already received keep coming, and their permits are
    // withheld so the broker stops pushing.
    for n in 3..=5 {
        assert_eq!(core.pop_for_application(t0).map(|m| m.id), Some(id(n)));
    }
    assert_eq!(drain(&mut core), [], "no Flow while a rewind waits");
    core.ack(t0, id(3));
    assert_eq!(drain(&mut core), [ack(&[id(3)])]);
    // The application asks for more: nothing queued, but too soon.
    assert!(core.pop_for_application(t0).is_none());
    assert_eq!(drain(&mut core), []);
    assert_eq!(core.next_deadline(), Some(t0 + ms(100)));
    core.on_tick(t0 + ms(100));
    // 5 taken, none cleared: the withheld permits go with the rewind.
    assert_eq!(
        drain(&mut core),
        [A::RedeliverAll { consumer_epoch: 1 }, A::Flow(5)]
    );
    assert_eq!(core.next_deadline(), None);
    // A message dispatched before the rewind arrives late: dropped.
    let late = Incoming {
        consumer_epoch: Some(0),
        ..msg(id(4), 0)
    };
    core.on_message(t0, late).unwrap();
    assert_eq!(core.queued(), 0);
    let again = Incoming {
        consumer_epoch: Some(1),
        ..msg(id(1), 0)
    };
    core.on_message(t0, again).unwrap();
    assert_eq!(core.pop_for_application(t0).map(|m| m.id), Some(id(1)));
    // 4 was taken before the rewind: its ack still goes out.
    core.ack(t0, id(4));
    assert_eq!(drain(&mut core), [ack(&[id(4)])]);
}

#[test]
fn a_rewind_waits_until_the_application_asks_on_an_empty_queue() {
    let t0 = crate::clock::now();
    let mut core = exclusive_with(2, 2, t0);
    core.nack(t0, id(1), 0);
    // The application still works on 2: time alone sends nothing.
    core.on_tick(t0 + secs(5));
    assert_eq!((drain(&mut core), core.next_deadline()), (vec![], None));
    assert!(core.pop_for_application(t0 + secs(5)).is_none());
    assert!(matches!(drain(&mut core)[..], [A::RedeliverAll { .. }, ..]));
}

#[test]
fn a_lone_nacked_message_comes_back_at_most_once_per_minimum_delay() {
    let t0 = crate::clock::now();
    let mut core = exclusive_with(0, 0, t0);
    let (mut now, mut rewinds) = (t0, 0);
    // One poison message, nacked at once every time it comes, for 1 s.
    while now < t0 + secs(1) {
        let epoch = core.consumer_epoch();
        let incoming = Incoming {
            consumer_epoch: Some(epoch),
            ..msg(id(1), 0)
        };
        core.on_message(now, incoming).unwrap();
        assert!(core.pop_for_application(now).is_some());
        core.nack(now, id(1), 0);
        assert!(core.pop_for_application(now).is_none());
        now = core.next_deadline().expect("the rewind's time");
        core.on_tick(now);
        let actions = drain(&mut core);
        rewinds += actions
            .iter()
            .filter(|a| matches!(a, A::RedeliverAll { .. }))
            .count();
    }
    assert_eq!(rewinds, 10, "one rewind per 100 ms");
}

#[test]
fn shared_nacks_stay_immediate() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    deliver(&mut core, t0, msg(id(1), 0));
    core.on_message(t0, msg(id(2), 0)).unwrap();
    core.nack(t0, id(1), 0);
    assert_eq!(drain(&mut core), [A::Redeliver(vec![id(1)])]);
}

#[test]
fn permits_refill_at_half_of_what_the_application_took() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        receiver_queue_size: 10,
        ..shared()
    };
    let mut core = ConsumerCore::new(config).unwrap();
    core.on_subscribed(t0);
    core.on_subscribed(t0); // once per connection
    assert_eq!(drain(&mut core), [A::Flow(10)]);
    for n in 0..10 {
        core.on_message(t0, msg(id(n), 0)).unwrap();
    }
    assert_eq!(drain(&mut core), [], "arrivals do not count");
    for _ in 0..4 {
        core.pop_for_application(t0);
    }
    assert_eq!(drain(&mut core), []);
    core.pop_for_application(t0);
    assert_eq!(drain(&mut core), [A::Flow(5)]);
}

#[test]
fn delayed_nacks_due_on_one_tick_leave_in_one_command() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        nack: NackPolicy::FixedDelay(secs(1)),
        ack_timeout: Some(ms(1200)),
        ..shared()
    };
    let mut core = core(config, t0);
    for n in 1..=4 {
        deliver(&mut core, t0, msg(id(n), 0));
    }
    core.nack(t0 + ms(100), id(3), 0);
    core.nack(t0 + ms(200), id(1), 0);
    core.nack(t0 + ms(300), id(2), 0);
    // The nacks (due 1.1-1.3 s) and 4's ack timeout (1.2 s) share the 1.5 s tick.
    assert_eq!(core.next_deadline(), Some(t0 + ms(1500)));
    core.on_tick(t0 + ms(1000));
    assert_eq!(drain(&mut core), []);
    core.on_tick(t0 + ms(1500));
    assert_eq!(
        drain(&mut core),
        [A::Redeliver(vec![id(1), id(2), id(3), id(4)])]
    );
}

#[test]
fn reconnect_clears_local_state_keeps_acks_and_grants_a_fresh_queue() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        receiver_queue_size: 4,
        ack_timeout: Some(secs(1)),
        ..shared()
    };
    let mut core = core(config, t0);
    for n in 0..4 {
        core.on_message(t0, msg(id(n), 0)).unwrap();
    }
    for _ in 0..3 {
        core.pop_for_application(t0);
    }
    core.ack(t0, id(0));
    core.nack(t0, id(1), 0);
    core.on_reconnect();
    assert_eq!(core.consumer_epoch(), 1);
    assert_eq!(core.footprint(), [0; 6]);
    assert_eq!(
        drain(&mut core),
        [ack(&[id(0)])],
        "flow and redelivery were for the old connection"
    );
    assert_eq!(core.next_deadline(), None);
    core.on_subscribed(t0);
    assert_eq!(drain(&mut core), [A::Flow(4)]);
}

#[test]
fn a_copy_of_a_message_acked_just_before_a_reconnect_is_dropped() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    deliver(&mut core, t0, msg(id(1), 0));
    core.ack(t0, id(1));
    assert_eq!(drain(&mut core), [ack(&[id(1)])]);
    // The broker applies acks asynchronously: it may dispatch a copy to the
    // next subscription before it applied this one.
    core.on_reconnect();
    core.on_subscribed(t0);
    core.on_message(t0, msg(id(1), 1)).unwrap();
    assert_eq!(core.queued(), 0);
}

#[test]
fn a_seek_forgets_the_remembered_acks() {
    let t0 = crate::clock::now();
    let mut core = core(CoreConfig::default(), t0);
    deliver(&mut core, t0, msg(id(1), 0));
    core.ack(t0, id(1));
    core.ack(t0, id(2)); // not held
    core.ack_cumulative(t0, id(0)).unwrap();
    core.on_seek();
    core.on_reconnect();
    core.on_subscribed(t0);
    for n in 0..=2 {
        core.on_message(t0, msg(id(n), 0)).unwrap();
    }
    assert_eq!(core.queued(), 3, "a seek brings acked messages back");
}

#[test]
fn a_copy_of_an_acked_message_is_acked_again_not_handed_out() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    deliver(&mut core, t0, msg(id(1), 0));
    core.ack(t0, id(1));
    drain(&mut core);
    // Its ACK was lost with the connection: the broker sends it again.
    core.on_reconnect();
    core.on_subscribed(t0);
    drain(&mut core);
    core.on_message(t0, msg(id(1), 1)).unwrap();
    assert_eq!(drain(&mut core), [ack(&[id(1)])]);
    assert!(core.pop_for_application(t0).is_none());
}

#[test]
fn held_past_nothing_and_acked_in_time_leaves_no_deadline() -> Result<(), Box<dyn std::error::Error>>
{
    use crate::consumer::core::ConsumerCore;
    use crate::consumer::core::actions::{Action, Incoming};
    use crate::consumer::core::config::CoreConfig;
    use crate::message_id::MessageId;
    use std::time::Duration;

    let t0 = crate::clock::now();
    let config = CoreConfig {
        ack_timeout: Some(Duration::from_secs(10)),
        ..CoreConfig::default()
    };
    let mut core = ConsumerCore::new(config)?;
    core.on_subscribed(t0);
    assert_eq!(core.poll_action(), Some(Action::Flow(1000)));

    let id = MessageId::new(7, 0);
    let incoming = Incoming {
        id,
        position: id,
        redelivery_count: 0,
        consumer_epoch: None,
        batch_size: None,
        message: "hi",
    };
    core.on_message(t0, incoming)?;
    assert_eq!(core.pop_for_application(t0).map(|m| m.message), Some("hi"));
    core.on_tick(t0 + Duration::from_secs(9));
    assert_eq!(core.poll_action(), None);
    core.ack(t0 + Duration::from_secs(9), id);
    assert_eq!(
        core.poll_action(),
        Some(Action::Ack {
            ids: vec![id],
            cumulative: false,
            ack_set: None
        })
    );
    assert_eq!(core.next_deadline(), None);
    Ok(())
}

#[test]
fn skipped_members_count_as_acked_for_the_entry_ack() -> Result<(), Box<dyn std::error::Error>> {
    use crate::consumer::core::ConsumerCore;
    use crate::consumer::core::actions::{Action, Incoming};
    use crate::consumer::core::config::CoreConfig;
    use crate::message_id::MessageId;

    let t0 = crate::clock::now();
    let mut core = ConsumerCore::new(CoreConfig::default())?;
    let entry = MessageId::new(7, 0);
    // Redelivered with ack_set 0b010: only member 1 of 3 comes.
    let id = entry.with_batch_index(1);
    let incoming = Incoming {
        id,
        position: id,
        redelivery_count: 1,
        consumer_epoch: None,
        batch_size: Some(3),
        message: (),
    };
    core.on_message(t0, incoming)?;
    core.on_skipped_members(entry, 3, &[0, 2]);
    core.pop_for_application(t0);
    core.ack(t0, id);
    assert_eq!(
        core.poll_action(),
        Some(Action::Ack {
            ids: vec![entry],
            cumulative: false,
            ack_set: None
        })
    );
    Ok(())
}

/// An operator resets the cursor: the consumer subscribes again and the
/// reset's copy of `acked`, whose ack the broker applied, is handed out.
fn a_reset_hands_out_its_copy_of(core: &mut ConsumerCore<u64>, t0: Instant, acked: MessageId) {
    core.on_reconnect();
    core.on_subscribed(t0);
    drain(core);
    core.on_message(t0, msg(acked, 0)).unwrap();
    assert_eq!(
        core.pop_for_application(t0).map(|m| m.id),
        Some(acked),
        "the reset's copy is handed out"
    );
}

#[test]
fn an_ack_sent_across_a_nack_rewind_is_confirmed_by_its_answer() {
    // Exclusive, no receipts: an ACK whose answer comes after a rewind a
    // nack asked for (same consumer, same connection) is confirmed by it,
    // so an operator's reset later brings the message back.
    let t0 = crate::clock::now();
    let mut core = exclusive_with(2, 2, t0);
    core.ack(t0, id(1));
    let sent = core.ack_mark();
    assert_eq!(drain(&mut core), [ack(&[id(1)])]);
    core.nack(t0, id(2), 0);
    assert!(core.pop_for_application(t0 + ms(100)).is_none());
    core.on_tick(t0 + ms(100));
    assert!(matches!(drain(&mut core)[..], [A::RedeliverAll { .. }, ..]));
    // The ACK's answer.
    core.acks_confirmed(sent);
    a_reset_hands_out_its_copy_of(&mut core, t0, id(1));
}

#[test]
fn an_ack_not_sent_before_a_reconnect_is_confirmed_by_its_answer_on_the_next_consumer() {
    // No receipts: an ack recorded before the reconnect but not sent yet
    // goes out under the next consumer, whose answer confirms it; a later
    // reset's copy is then handed out.
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    deliver(&mut core, t0, msg(id(1), 0));
    let sent = core.ack_mark();
    core.ack(t0, id(1));
    core.on_reconnect_unsent_after(sent, true, []);
    core.on_subscribed(t0);
    assert_eq!(drain(&mut core), [ack(&[id(1)]), A::Flow(1000)]);
    core.acks_confirmed(core.ack_mark());
    a_reset_hands_out_its_copy_of(&mut core, t0, id(1));
}
