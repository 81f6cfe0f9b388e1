//! The core without per-message tracking (a reader's): what it keeps stays
//! bounded by the receiver queue, however many messages pass.

use super::actions::Action;
use super::config::CoreConfig;
use super::tests::{batch_msg, core, drain, id, member, msg};
use crate::consumer::error::ConfigError;

fn untracked() -> CoreConfig {
    CoreConfig {
        receiver_queue_size: 100,
        track_messages: false,
        ..CoreConfig::default()
    }
}

/// Ids the core keeps in its per-message state, of every kind.
fn tracked_ids(core: &super::ConsumerCore<u64>) -> usize {
    core.footprint().iter().sum()
}

#[test]
fn two_million_messages_leave_no_state_behind() {
    let t0 = crate::clock::now();
    let mut core = core(untracked(), t0);
    let mut most = 0;
    // One million plain messages, then one million batch members in
    // batches of 10, in turns of 50 arrivals and 50 hand-overs.
    let arrivals = (0..1_000_000_u64).map(|e| msg(id(e), 0)).chain(
        (0..100_000_u64).flat_map(|e| (0..10).map(move |i| batch_msg(2_000_000 + e, i, 10))),
    );
    let mut pending = 0;
    for incoming in arrivals {
        core.on_message(t0, incoming).expect("arrives");
        pending += 1;
        if pending == 50 {
            while core.pop_for_application(t0).is_some() {}
            pending = 0;
        }
        most = most.max(tracked_ids(&core));
        // Acks of what was handed out change nothing either.
        core.ack(t0, id(7));
    }
    assert!(most <= 50, "at most the queue: {most} ids kept");
    assert_eq!(core.held(), 0);
    let flows: u32 = drain(&mut core)
        .into_iter()
        .map(|a| match a {
            Action::Flow(n) => n,
            other => panic!("an untracked core only grants permits: {other:?}"),
        })
        .sum();
    assert!(flows > 0);
}

#[test]
fn skipped_members_and_acks_are_ignored() {
    let t0 = crate::clock::now();
    let mut core = core(untracked(), t0);
    core.on_message(t0, batch_msg(1, 1, 3)).expect("arrives");
    core.on_skipped_members(id(1), 3, &[0, 2]);
    let m = core.pop_for_application(t0).expect("member");
    core.ack(t0, m.id);
    core.nack(t0, member(1, 1), 0);
    assert_eq!(tracked_ids(&core), 0);
    assert!(
        drain(&mut core)
            .iter()
            .all(|a| matches!(a, Action::Flow(_)))
    );
}

#[test]
fn timers_and_dead_letters_need_tracking() {
    let timed = CoreConfig {
        ack_timeout: Some(std::time::Duration::from_secs(1)),
        ..untracked()
    };
    assert_eq!(timed.validate(), Err(ConfigError::UntrackedWithRedelivery));
}
