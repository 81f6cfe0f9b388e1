//! The consumer core, tested like arithmetic: time is `t0 + Duration`.
//! Timers, acks, permits, rewinds and reconnects here; batches and the
//! dead-letter policy in `core_tests_batch_dlq`.

use std::time::{Duration, Instant};

use crate::MessageId;

use super::{Action, ConsumerCore, Incoming};
use super::{CoreConfig, CoreError, NackPolicy, SubscriptionType};

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
fn an_ack_after_expiry_is_ignored_and_the_redelivered_copy_is_delivered() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        ack_timeout: Some(secs(1)),
        ..shared()
    };
    let mut core = core(config, t0);
    deliver(&mut core, t0, msg(id(1), 0));
    core.on_tick(t0 + secs(1));
    assert_eq!(drain(&mut core), [A::Redeliver(vec![id(1)])]);
    core.ack(t0 + secs(2), id(1));
    assert_eq!(
        drain(&mut core),
        [],
        "no longer held: already requested again"
    );
    let again = deliver(&mut core, t0 + secs(2), msg(id(1), 1));
    assert_eq!(again.redelivery_count, 1);
    core.ack(t0 + secs(2), id(1));
    assert_eq!(drain(&mut core), [ack(&[id(1)])]);
}

#[test]
fn an_ack_of_an_id_never_delivered_is_a_no_op() {
    let t0 = crate::clock::now();
    let mut core = core(shared(), t0);
    core.ack(t0, id(42));
    core.nack(t0, id(42), 0);
    core.on_message(t0, msg(id(43), 0)).unwrap();
    core.ack(t0, id(43)); // queued, not yet handed over
    assert_eq!(drain(&mut core), []);
}

#[test]
fn nack_then_ack() {
    let t0 = crate::clock::now();
    // Immediate: the redelivery is already requested; the late ack is ignored.
    let mut core1 = core(shared(), t0);
    deliver(&mut core1, t0, msg(id(1), 0));
    core1.nack(t0, id(1), 0);
    core1.ack(t0, id(1));
    assert_eq!(drain(&mut core1), [A::Redeliver(vec![id(1)])]);
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
        "a repeated cumulative ack is ignored"
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
            Err(CoreError::CumulativeAckNotAllowed { subscription: kind })
        );
        assert_eq!((core.held(), drain(&mut core)), (1, vec![]));
    }
}

#[test]
fn exclusive_nack_rewinds_once_and_drops_the_old_epoch() {
    let t0 = crate::clock::now();
    let config = CoreConfig {
        receiver_queue_size: 10,
        ..CoreConfig::default()
    };
    let mut core = core(config, t0);
    for n in 1..=5 {
        core.on_message(
            t0,
            Incoming {
                consumer_epoch: Some(0),
                ..msg(id(n), 0)
            },
        )
        .unwrap();
    }
    core.pop_for_application(t0);
    core.pop_for_application(t0);
    core.nack(t0, id(1), 0);
    core.nack(t0, id(2), 0); // covered by the same rewind
    assert_eq!(core.consumer_epoch(), 1);
    assert_eq!(core.queued(), 0, "the local queue is cleared");
    // 2 taken + 3 cleared = 5 permits back, half the queue: one Flow after the rewind.
    assert_eq!(
        drain(&mut core),
        [A::RedeliverAll { consumer_epoch: 1 }, A::Flow(5)]
    );
    // A message dispatched before the rewind arrives late: dropped.
    core.on_message(
        t0,
        Incoming {
            consumer_epoch: Some(0),
            ..msg(id(3), 0)
        },
    )
    .unwrap();
    assert_eq!(core.queued(), 0);
    core.on_message(
        t0,
        Incoming {
            consumer_epoch: Some(1),
            ..msg(id(1), 0)
        },
    )
    .unwrap();
    assert_eq!(core.pop_for_application(t0).map(|m| m.id), Some(id(1)));
    core.ack(t0, id(2)); // held before the rewind: ignored
    assert_eq!(drain(&mut core), []);
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
