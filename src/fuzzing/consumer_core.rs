//! The consumer core driven by arbitrary event sequences.
//!
//! The bytes pick a configuration, then events: messages (plain or batch
//! members, any redelivery count and epoch, consistent or not), members
//! skipped per an `ack_set`, the application taking, acking, nacking and
//! cumulatively acking what it holds, time passing, dead-letter results and
//! reconnects. After every event the actions are checked: no empty or
//! zero-permit command, acks only of entries that arrived and never of a
//! member id, a set or a cumulative ack naming exactly one entry.
//!
//! Every choice reads one byte (see [`scripts`] for seeds written that way).

use std::collections::HashSet;
use std::time::Duration;

use arbitrary::{Result, Unstructured};

use crate::consumer::core::ConsumerCore;
use crate::consumer::core::actions::{Action, Incoming};
use crate::consumer::core::config::{CoreConfig, SubscriptionType};
use crate::consumer::core::dead_letter::{DeadLetterCutoff, DeadLetterPolicy};
use crate::consumer::core::nack::NackPolicy;
use crate::message_id::MessageId;

/// The largest batch: member indexes and sizes up to it each take one byte.
const MAX_BATCH: u32 = 70;

const KINDS: [SubscriptionType; 4] = [
    SubscriptionType::Exclusive,
    SubscriptionType::Shared,
    SubscriptionType::Failover,
    SubscriptionType::KeyShared,
];

/// Drives a consumer core with the events `data` describes.
pub fn consumer_core(data: &[u8]) {
    // Running out of bytes ends the script; that is not a finding.
    let _ = run(&mut Unstructured::new(data));
}

fn config(u: &mut Unstructured<'_>) -> Result<CoreConfig> {
    let subscription_type = KINDS[u.int_in_range(0..=3_usize)?];
    let receiver_queue_size = u.int_in_range(1..=6)?;
    let ack_timeout = if u.arbitrary()? {
        Some(Duration::from_secs(u.int_in_range(1..=5)?))
    } else {
        None
    };
    let nack = if u.arbitrary()? {
        NackPolicy::FixedDelay(Duration::from_millis(100 * u.int_in_range(1..=30_u64)?))
    } else {
        NackPolicy::Immediate
    };
    let dead_letter = match u.int_in_range(0..=2_u8)? {
        0 => None,
        cutoff => Some(DeadLetterPolicy {
            cutoff: if cutoff == 1 {
                DeadLetterCutoff::OnArrival
            } else {
                DeadLetterCutoff::JavaStyle
            },
            ..DeadLetterPolicy::after_redeliveries(u.int_in_range(1..=3)?)
        }),
    };
    Ok(CoreConfig {
        subscription_type,
        receiver_queue_size,
        ack_timeout,
        nack,
        dead_letter,
        batch_index_ack_enabled: u.arbitrary()?,
        ..CoreConfig::default()
    })
}

/// What the script has seen, to check the actions against.
#[derive(Default)]
struct Seen {
    /// Entries that arrived (or had members skipped).
    entries: HashSet<MessageId>,
    /// Handed to the application: id and redelivery count.
    popped: Vec<(MessageId, u32)>,
    /// Sent to the dead-letter topic, result not yet reported.
    forwarded: Vec<MessageId>,
}

impl Seen {
    fn pick(&self, u: &mut Unstructured<'_>) -> Result<Option<(MessageId, u32)>> {
        let at = u.arbitrary::<u8>()? as usize;
        Ok((!self.popped.is_empty()).then(|| self.popped[at % self.popped.len()]))
    }

    fn check(&mut self, action: Action<u32>) {
        match action {
            Action::Flow(permits) => assert!(permits > 0, "FLOW of 0 permits"),
            Action::Ack {
                ids,
                cumulative,
                ack_set,
            } => {
                assert!(!ids.is_empty(), "ACK without ids");
                if cumulative || ack_set.is_some() {
                    assert_eq!(ids.len(), 1, "{ids:?}");
                }
                for id in ids {
                    assert!(!id.is_batch_member(), "ACK of a member id {id}");
                    // A cumulative ack inside a batch names the entry before.
                    let next = MessageId {
                        entry_id: id.entry_id.wrapping_add(1),
                        ..id
                    };
                    let known =
                        self.entries.contains(&id) || (cumulative && self.entries.contains(&next));
                    assert!(known, "ACK of {id}, which never arrived");
                }
            }
            Action::Redeliver(ids) => {
                assert!(!ids.is_empty(), "REDELIVER without ids");
                for id in ids {
                    assert!(!id.is_batch_member(), "REDELIVER of a member id {id}");
                    assert!(
                        self.entries.contains(&id),
                        "REDELIVER of {id}, never arrived"
                    );
                }
            }
            Action::RedeliverAll { .. } => {}
            Action::ForwardToDeadLetter { origin, .. } => {
                assert!(
                    self.entries.contains(&origin.entry()),
                    "forward of {origin}"
                );
                self.forwarded.push(origin);
            }
        }
    }
}

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let Ok(mut core) = ConsumerCore::<u32>::new(config(u)?) else {
        return Ok(());
    };
    let mut now = crate::clock::now();
    let mut seen = Seen::default();
    for n in 0..4096_u32 {
        if u.is_empty() {
            break;
        }
        match u.int_in_range(0..=10_u8)? {
            0 => core.on_subscribed(now),
            1 => {
                let entry = MessageId::new(1, u.int_in_range(0..=12)?);
                let (id, batch_size) = if u.arbitrary()? {
                    // Past 64 members the ack_set takes a second word.
                    let size = u.int_in_range(1..=MAX_BATCH)?;
                    let index = u.int_in_range(0..=MAX_BATCH as i32)?;
                    (entry.with_batch_index(index), Some(size))
                } else {
                    (entry, None)
                };
                let redelivery_count = u.int_in_range(0..=4)?;
                let consumer_epoch = Some(u.int_in_range(0..=3)?).filter(|e| *e < 3);
                seen.entries.insert(entry);
                let incoming = Incoming {
                    id,
                    position: id,
                    redelivery_count,
                    consumer_epoch,
                    batch_size,
                    message: n,
                };
                let _ = core.on_message(now, incoming);
            }
            2 => {
                let entry = MessageId::new(1, u.int_in_range(0..=12)?);
                let size = u.int_in_range(1..=MAX_BATCH)?;
                let mut skipped = Vec::new();
                for _ in 0..u.int_in_range(0..=4_u8)? {
                    skipped.push(u.int_in_range(-1..=MAX_BATCH as i32)?);
                }
                seen.entries.insert(entry);
                core.on_skipped_members(entry, size, &skipped);
            }
            3 => {
                if let Some(m) = core.pop_for_application(now) {
                    seen.popped.push((m.id, m.redelivery_count));
                }
            }
            4 => {
                if let Some((id, _)) = seen.pick(u)? {
                    let _ = core.ack(now, id);
                }
            }
            5 => {
                if let Some((id, count)) = seen.pick(u)? {
                    core.nack(now, id, count);
                }
            }
            6 => {
                if let Some((id, _)) = seen.pick(u)? {
                    let _ = core.ack_cumulative(now, id);
                }
            }
            7 => {
                now += Duration::from_millis(100 * u.int_in_range(0..=30)?);
                core.on_tick(now);
                // A deadline not after the tick just run would spin the driver.
                if let Some(deadline) = core.next_deadline() {
                    assert!(
                        deadline > now,
                        "next deadline {deadline:?} not after {now:?}"
                    );
                }
            }
            8 => {
                let at = u.arbitrary::<u8>()? as usize;
                let ok: bool = u.arbitrary()?;
                if !seen.forwarded.is_empty() {
                    let origin = seen.forwarded.swap_remove(at % seen.forwarded.len());
                    core.on_dead_letter_result(origin, if ok { Ok(()) } else { Err(()) });
                }
            }
            9 => core.on_reconnect(),
            _ => {
                // Any id the application names is acked (ids are positions).
                let id = MessageId::new(1, u.int_in_range(0..=12)?);
                seen.entries.insert(id);
                let _ = core.ack(now, id);
            }
        }
        while let Some(action) = core.poll_action() {
            seen.check(action);
        }
    }
    Ok(())
}

/// Seed scripts, one byte per choice in the order [`run`] reads them.
pub(super) fn scripts() -> Vec<(&'static str, Vec<u8>)> {
    const SHARED: [u8; 6] = [1, 3, 0, 0, 0, 0]; // Shared, queue 4, plain policies
    let plain = |entry: u8, count: u8| [1, entry, 0, count, 3];
    let member = |entry: u8, size: u8, index: u8| [1, entry, 1, size - 1, index, 0, 3];
    let mut batch_acks = SHARED.to_vec();
    batch_acks.push(0);
    for index in 0..3 {
        batch_acks.extend(member(5, 3, index));
    }
    batch_acks.extend([3, 3, 3, 4, 0, 4, 1, 4, 2]);

    // Exclusive, queue 2, ack timeout 2 s, nack after 500 ms, dead letter
    // on arrival after 2, batch index ack.
    let mut exclusive = vec![0, 1, 1, 1, 1, 4, 1, 1, 1, 0];
    exclusive.extend(plain(1, 0));
    exclusive.extend(plain(2, 2));
    exclusive.extend([3, 3, 5, 0, 7, 30, 7, 30, 9, 0]);
    exclusive.extend([1, 1, 0, 1, 1, 3, 6, 2, 8, 0, 1]);

    // Issue 5: member 1 of 4 redelivered, 0 and 2 skipped per the ack_set.
    let mut ack_set = SHARED.to_vec();
    ack_set.push(0);
    ack_set.extend(member(4, 4, 1));
    ack_set.extend([2, 4, 3, 2, 1, 3, 3, 4, 0]);

    // Java-style dead letter after 1 with an ack timeout: timed-out
    // messages at the limit go to the dead-letter topic; one forward fails.
    let mut dead_letter = vec![1, 3, 1, 0, 0, 2, 0, 0, 0];
    dead_letter.extend(plain(3, 1));
    dead_letter.extend(plain(4, 1));
    dead_letter.extend([3, 3, 7, 20, 8, 0, 0, 8, 0, 1, 10, 3]);
    vec![
        ("shared_batch_acks", batch_acks),
        ("exclusive_nack_timeout_reconnect", exclusive),
        ("redelivered_with_ack_set", ack_set),
        ("java_style_dead_letter", dead_letter),
    ]
}
