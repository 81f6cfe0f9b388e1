//! The consumer core driven by random event sequences against a small
//! broker model, checking invariants after every step.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;

use proptest::prelude::*;

use super::ConsumerCore;
use super::actions::{Action, Incoming};
use super::config::{CoreConfig, SubscriptionType};
use super::dead_letter::{DeadLetterCutoff, DeadLetterPolicy};
use super::nack::NackPolicy;
use crate::message_id::MessageId;

const ENTRIES: u64 = 10;
const MAX_BATCH: u32 = 3;
const QUEUE: u32 = 4;

#[derive(Debug, Clone)]
enum Event {
    /// The broker dispatches its next entry, if it holds permits.
    Deliver,
    /// The broker sends an already dispatched member again.
    Duplicate(usize),
    /// A member dispatched before the last rewind arrives late.
    Stale(usize),
    Pop,
    Ack(usize),
    Nack(usize),
    AckCumulative(usize),
    AckUnknown(u64),
    Tick(u64),
    DeadLetterResult(usize, bool),
    Reconnect,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => Just(Event::Deliver),
        1 => any::<usize>().prop_map(Event::Duplicate),
        1 => any::<usize>().prop_map(Event::Stale),
        4 => Just(Event::Pop),
        3 => any::<usize>().prop_map(Event::Ack),
        2 => any::<usize>().prop_map(Event::Nack),
        1 => any::<usize>().prop_map(Event::AckCumulative),
        1 => (0..ENTRIES + 2).prop_map(Event::AckUnknown),
        2 => (0..3000_u64).prop_map(Event::Tick),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(i, ok)| Event::DeadLetterResult(i, ok)),
        1 => Just(Event::Reconnect),
    ]
}

fn config() -> impl Strategy<Value = CoreConfig> {
    let kind = prop_oneof![
        Just(SubscriptionType::Exclusive),
        Just(SubscriptionType::Shared),
        Just(SubscriptionType::Failover),
        Just(SubscriptionType::KeyShared),
    ];
    let nack = prop_oneof![
        Just(NackPolicy::Immediate),
        Just(NackPolicy::FixedDelay(Duration::from_millis(700)))
    ];
    let cutoff = prop_oneof![
        Just(DeadLetterCutoff::OnArrival),
        Just(DeadLetterCutoff::JavaStyle)
    ];
    (
        kind,
        any::<bool>(),
        nack,
        proptest::option::of(cutoff),
        any::<bool>(),
    )
        .prop_map(
            |(subscription_type, timed, nack, cutoff, batch_index_ack_enabled)| CoreConfig {
                subscription_type,
                receiver_queue_size: QUEUE,
                ack_timeout: timed.then(|| Duration::from_secs(2)),
                nack,
                dead_letter: cutoff.map(|cutoff| DeadLetterPolicy {
                    cutoff,
                    ..DeadLetterPolicy::after_redeliveries(2)
                }),
                batch_index_ack_enabled,
                ..CoreConfig::default()
            },
        )
}

/// The broker side: entries, permits, what is acked, what is dispatched.
struct Model {
    sizes: Vec<u32>,
    counts: Vec<u32>,
    permits: i64,
    epoch: u64,
    pending: VecDeque<u64>,
    dispatched: Vec<Incoming<u64>>,
    stale: Vec<Incoming<u64>>,
    acked: HashSet<MessageId>,
    /// Members acked by the application, confirmed in the dead-letter
    /// topic, or covered by a cumulative ack: what an entry ack may cover.
    done: HashSet<MessageId>,
    forwarding: Vec<MessageId>,
    /// Acked by the application itself (it may ack a message being
    /// forwarded, which it took before).
    app_acked: HashSet<MessageId>,
    /// Handed to the application, not yet covered by any outcome.
    open: HashSet<MessageId>,
    app: Vec<Incoming<u64>>,
}

impl Model {
    fn members(&self, entry: u64) -> Vec<MessageId> {
        let size = self.sizes[entry as usize];
        let id = MessageId::new(1, entry);
        if size == 0 {
            return vec![id];
        }
        (0..size as i32).map(|i| id.with_batch_index(i)).collect()
    }

    fn incoming(&self, id: MessageId) -> Incoming<u64> {
        let size = self.sizes[id.entry_id as usize];
        Incoming {
            id,
            position: id,
            redelivery_count: self.counts[id.entry_id as usize],
            consumer_epoch: Some(self.epoch),
            batch_size: (size > 0).then_some(size),
            message: id.entry_id,
        }
    }

    fn redispatch(&mut self, entry: u64, shared: bool) {
        if self.members(entry).iter().all(|m| self.acked.contains(m)) {
            return;
        }
        if shared {
            self.counts[entry as usize] += 1;
        }
        if !self.pending.contains(&entry) {
            self.pending.push_back(entry);
        }
    }

    /// Applies one action to the broker and checks it.
    fn apply(&mut self, action: Action<u64>, kind: SubscriptionType) -> Result<(), TestCaseError> {
        match action {
            Action::Flow(n) => self.permits += i64::from(n),
            Action::Ack {
                ids,
                cumulative,
                ack_set,
            } => {
                prop_assert!(ack_set.is_none() || ids.len() == 1);
                let words = ack_set.clone().unwrap_or_default().words;
                // Ids of another ledger are the application's acks of ids
                // it never received: sent as asked, nothing to check.
                for id in ids.into_iter().filter(|id| id.ledger_id == 1) {
                    // The entry's members the ack set leaves acked (all without one)…
                    let mut covered: Vec<MessageId> = self
                        .members(id.entry_id)
                        .into_iter()
                        .filter(|m| {
                            let i = m.batch_index.max(0) as usize;
                            ack_set.is_none()
                                || words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) == 0)
                        })
                        .collect();
                    // …and for a cumulative ack, every earlier entry.
                    if cumulative {
                        covered.extend((0..id.entry_id).flat_map(|e| self.members(e)));
                    }
                    for member in covered {
                        prop_assert!(
                            self.done.contains(&member),
                            "acked {member} the application did not finish"
                        );
                        prop_assert!(
                            !self.forwarding.contains(&member) || self.app_acked.contains(&member),
                            "acked {member} while forwarding it"
                        );
                        self.acked.insert(member);
                        self.open.remove(&member);
                    }
                }
            }
            Action::Redeliver(entries) => {
                prop_assert!(kind.redelivers_by_id() && !entries.is_empty());
                for entry in entries {
                    prop_assert_eq!(entry, entry.entry(), "redeliver names entries");
                    self.open.retain(|m| m.entry() != entry);
                    self.redispatch(entry.entry_id, true);
                }
            }
            Action::RedeliverAll { consumer_epoch } => {
                prop_assert!(!kind.redelivers_by_id());
                prop_assert!(consumer_epoch > self.epoch);
                self.epoch = consumer_epoch;
                self.stale.append(&mut self.dispatched);
                self.open.clear();
                self.pending.clear();
                for entry in 0..ENTRIES {
                    self.redispatch(entry, false);
                }
            }
            Action::ForwardToDeadLetter { origin, .. } => {
                prop_assert!(
                    !self.acked.contains(&origin),
                    "forwarded {origin} after acking it"
                );
                prop_assert!(
                    !self.forwarding.contains(&origin),
                    "forwarded {origin} twice at once"
                );
                self.forwarding.push(origin);
                self.open.remove(&origin);
            }
        }
        Ok(())
    }
}

fn run(config: CoreConfig, sizes: Vec<u32>, events: Vec<Event>) -> Result<(), TestCaseError> {
    let kind = config.subscription_type;
    let timed = config.ack_timeout.is_some();
    let t0 = crate::clock::now();
    let mut now = t0;
    let mut core = ConsumerCore::new(config).unwrap();
    let mut m = Model {
        counts: vec![0; sizes.len()],
        sizes,
        permits: 0,
        epoch: 0,
        pending: (0..ENTRIES).collect(),
        dispatched: Vec::new(),
        stale: Vec::new(),
        acked: HashSet::new(),
        done: HashSet::new(),
        forwarding: Vec::new(),
        app_acked: HashSet::new(),
        open: HashSet::new(),
        app: Vec::new(),
    };
    core.on_subscribed(now);
    let step = |core: &mut ConsumerCore<u64>, m: &mut Model| -> Result<(), TestCaseError> {
        while let Some(action) = core.poll_action() {
            m.apply(action, kind)?;
        }
        let returned = i64::from(core.permits_returned());
        prop_assert_eq!(
            m.permits + core.queued() as i64 + returned,
            i64::from(QUEUE)
        );
        prop_assert!(
            (core.queued() as u32) < QUEUE + MAX_BATCH,
            "one batch over at most"
        );
        prop_assert!(m.permits <= i64::from(QUEUE));
        Ok(())
    };
    step(&mut core, &mut m)?;
    for event in events {
        match event {
            Event::Deliver => {
                if m.permits > 0 {
                    // Entries acked since they were queued are skipped.
                    while m
                        .pending
                        .front()
                        .is_some_and(|&e| m.members(e).iter().all(|x| m.acked.contains(x)))
                    {
                        m.pending.pop_front();
                    }
                    if let Some(entry) = m.pending.pop_front() {
                        for id in m.members(entry) {
                            let incoming = m.incoming(id);
                            m.permits -= 1;
                            m.dispatched.push(incoming.clone());
                            core.on_message(now, incoming).unwrap();
                        }
                    }
                }
            }
            Event::Duplicate(i) | Event::Stale(i) => {
                // A broker never sends an acked message again.
                let from = if matches!(event, Event::Duplicate(_)) {
                    &m.dispatched
                } else {
                    &m.stale
                };
                let from: Vec<_> = from.iter().filter(|x| !m.acked.contains(&x.id)).collect();
                if m.permits > 0 && !from.is_empty() {
                    let incoming = from[i % from.len()].clone();
                    m.permits -= 1;
                    core.on_message(now, incoming).unwrap();
                }
            }
            Event::Pop => {
                if let Some(incoming) = core.pop_for_application(now) {
                    // A member acked with an ack set, in an entry not yet
                    // fully acked, is filtered locally.
                    let id = incoming.id;
                    let entry_done = m.members(id.entry_id).iter().all(|x| m.acked.contains(x));
                    prop_assert!(!id.is_batch_member() || entry_done || !m.acked.contains(&id));
                    m.open.insert(incoming.id);
                    m.app.push(incoming);
                }
            }
            Event::Ack(i) | Event::Nack(i) | Event::AckCumulative(i) if !m.app.is_empty() => {
                let held = m.app.remove(i % m.app.len());
                match event {
                    Event::Ack(_) => {
                        m.done.insert(held.id);
                        m.app_acked.insert(held.id);
                        let size = held.batch_size;
                        let _ = core.ack_with_batch_size(now, held.id, size);
                    }
                    Event::Nack(_) => core.nack(now, held.id, held.redelivery_count),
                    _ => {
                        let size = held.batch_size;
                        let result = core.ack_cumulative_with_batch_size(now, held.id, size);
                        prop_assert_eq!(result.is_ok(), kind.allows_cumulative_ack());
                        if result.is_ok() {
                            let all = (0..ENTRIES).flat_map(|e| m.members(e));
                            let covered: Vec<_> = all.filter(|x| *x <= held.id).collect();
                            m.app_acked.extend(covered.iter().copied());
                            m.done.extend(covered);
                            m.app.retain(|x| x.id > held.id);
                        }
                    }
                }
            }
            Event::Ack(_) | Event::Nack(_) | Event::AckCumulative(_) => {}
            Event::AckUnknown(entry) => {
                let _ = core.ack(now, MessageId::new(2, entry));
            }
            Event::Tick(ms) => {
                now += Duration::from_millis(ms);
                core.on_tick(now);
            }
            Event::DeadLetterResult(i, ok) if !m.forwarding.is_empty() => {
                let origin = m.forwarding.remove(i % m.forwarding.len());
                if ok {
                    m.done.insert(origin);
                }
                core.on_dead_letter_result(origin, if ok { Ok(()) } else { Err(()) });
            }
            Event::DeadLetterResult(..) => {}
            Event::Reconnect => {
                core.on_reconnect();
                m.permits = 0;
                m.epoch = core.consumer_epoch();
                m.stale.append(&mut m.dispatched);
                // The application still holds what it took: it may ack
                // those messages later, and the acks must go out.
                m.open.clear();
                m.pending.clear();
                for entry in 0..ENTRIES {
                    m.redispatch(entry, kind.redelivers_by_id());
                }
                core.on_subscribed(now);
            }
        }
        step(&mut core, &mut m)?;
    }
    // Eventually: a coalesced rewind goes out once the application has
    // taken everything queued and asks again.
    while let Some(incoming) = core.pop_for_application(now) {
        m.open.insert(incoming.id);
        m.app.push(incoming);
        step(&mut core, &mut m)?;
    }
    // (A delayed nack joins it when due, then it waits its minimum delay.)
    for later in [10, 20] {
        core.on_tick(now + Duration::from_secs(later));
        step(&mut core, &mut m)?;
    }
    prop_assert!(!core.rewind_pending(), "a rewind waits forever");
    // Eventually: with an ack timeout, everything held is requested again
    // (or forwarded) and nothing handed out is left without an outcome.
    if timed {
        core.on_tick(now + Duration::from_secs(3600));
        step(&mut core, &mut m)?;
        prop_assert_eq!(core.held(), 0);
        prop_assert_eq!(core.next_deadline(), None);
        let unresolved: BTreeMap<_, _> = m
            .open
            .iter()
            .filter(|id| !m.done.contains(id))
            .map(|id| (*id, ()))
            .collect();
        prop_assert!(
            unresolved.is_empty(),
            "handed out without an outcome: {:?}",
            unresolved.keys()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_event_sequences_keep_the_invariants(
        config in config(),
        sizes in proptest::collection::vec(0..=MAX_BATCH, ENTRIES as usize),
        events in proptest::collection::vec(event(), 0..160),
    ) {
        run(config, sizes, events)?;
    }
}
