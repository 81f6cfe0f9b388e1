//! A deterministic simulation: one seed chooses a workload (subscription
//! type, partitions, batching, chunks, acks, nacks, timeouts, dead
//! letters, a reader, a memory limit) and a list of faults (cuts, unloads,
//! broker-side closes, cursor resets, refused and slow sends, seeks,
//! consumers leaving and joining); the real client runs it against the
//! test kit's broker on tokio's paused clock, and an oracle checks the
//! outcome exactly. See `docs/simulation.md`.

mod faults;
mod journal;
mod oracle;
mod plan;
mod roles;

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use crate::consumer::SubscriptionType;
use crate::testing::TestBroker;

pub use plan::{BadFault, Fault, FaultKind};

use journal::{Journal, OrderBy};
use plan::{MAX_MESSAGE_SIZE, Rng, Workload, choose_faults};
use roles::Stage;

/// The topic of every simulation.
const TOPIC: &str = "persistent://public/default/sim";
/// Virtual time a run may take in all; more is a hang.
const RUN_BOUND: Duration = Duration::from_secs(3600);
/// Virtual time the end of a run waits for everything to be accounted for.
const SETTLE_BOUND: Duration = Duration::from_secs(1800);
/// How often the end of a run looks (virtual time).
const SETTLE_POLL: Duration = Duration::from_millis(100);

/// How long a paced producer waits between a message's chunks.
const CHUNK_PACE: Duration = Duration::from_millis(40);

/// Mixed with the seed to decide whether its chunks are paced.
const CHUNK_PACE_SALT: u64 = 0xc4a2_7e5d;

/// One seed of the simulation, ready to run.
///
/// # Examples
/// ```
/// use pulsar_wire::testing::Simulation;
///
/// let report = Simulation::new(6).run();
/// assert!(report.passed(), "{report}");
/// ```
#[derive(Clone)]
pub struct Simulation {
    seed: u64,
    faults: Option<Vec<Fault>>,
    trace: bool,
    handler: Option<roles::Handler>,
}

impl fmt::Debug for Simulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulation")
            .field("seed", &self.seed)
            .field("faults", &self.faults)
            .field("trace", &self.trace)
            .field("handler", &self.handler.is_some())
            .finish()
    }
}

/// What one seed did and found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// The workload the seed chose, in one line.
    pub workload: String,
    /// The faults it planned, in order.
    pub faults: Vec<Fault>,
    /// How many of them fired before the run ended.
    pub fired: usize,
    /// Messages handed to the application, copies included.
    pub handed_out: u64,
    /// What broke the rules; empty when the seed passed.
    pub violations: Vec<String>,
    /// The broker's events in order, one line each, when the run was
    /// traced ([`Simulation::traced`]); empty otherwise.
    pub trace: Vec<String>,
    /// The id of every message the broker stored on the topic (a
    /// partition's messages carry its index): what a handler run with
    /// [`Simulation::with_handler`] must have seen, at least once each.
    pub stored: Vec<crate::message_id::MessageId>,
}

impl Report {
    /// Whether no rule was broken.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The command that runs this seed again with these faults.
    pub fn replay_command(&self) -> String {
        let faults: Vec<String> = self.faults.iter().map(ToString::to_string).collect();
        format!(
            "scripts/simulate --seed {} --faults '{}'",
            self.seed,
            faults.join(",")
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {}: {}", self.seed, self.workload)?;
        let faults: Vec<String> = self.faults.iter().map(ToString::to_string).collect();
        writeln!(
            f,
            "  faults [{}], {} fired; {} handed out",
            faults.join(", "),
            self.fired,
            self.handed_out
        )?;
        for v in &self.violations {
            writeln!(f, "  violation: {v}")?;
        }
        Ok(())
    }
}

thread_local! {
    /// Panics on this thread since the hook was set (a run's tasks all
    /// run on its thread).
    static PANICS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Records panics per thread (and keeps quiet about them: the report
/// names them).
fn watch_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let recorded = PANICS.try_with(|p| p.borrow_mut().push(info.to_string()));
            if recorded.is_err() {
                previous(info);
            }
        }));
    });
}

impl Simulation {
    /// The simulation of `seed`: its workload and faults follow from it.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            faults: None,
            trace: false,
            handler: None,
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Keeps the broker's events in the report (to see why a seed fails).
    pub fn traced(mut self) -> Self {
        self.trace = true;
        self
    }

    /// Runs `handler` as the application, as [`Consumer::run`](crate::consumer::Consumer::run)
    /// calls it: every consumer of the seed's workload takes its messages
    /// with `run` and this handler (the seed still chooses the rest: the
    /// subscription, batches, chunks, receipts, faults). The oracle checks
    /// the outcome as for the simulation's own application: a message the
    /// handler acked is not handed out again once the broker has the ack,
    /// and every stored message ends acked or dead-lettered (a handler
    /// that never acks a message fails the seed). What the handler did
    /// with the messages is for the caller to check against
    /// [`Report::stored`]: each was handed over at least once, some more
    /// than once (after faults), never a fragment.
    ///
    /// # Examples
    /// ```
    /// use std::collections::HashSet;
    /// use std::sync::{Arc, Mutex};
    /// use pulsar_wire::consumer::Outcome;
    /// use pulsar_wire::testing::Simulation;
    ///
    /// let seen = Arc::new(Mutex::new(HashSet::new()));
    /// let store = seen.clone();
    /// let report = Simulation::new(7)
    ///     .with_handler(move |msg| {
    ///         let store = store.clone();
    ///         async move {
    ///             store.lock().unwrap().insert(msg.id());
    ///             Outcome::Ack
    ///         }
    ///     })
    ///     .run();
    /// assert!(report.passed(), "{report}");
    /// assert!(!report.stored.is_empty());
    /// let seen = seen.lock().unwrap();
    /// assert!(report.stored.iter().all(|id| seen.contains(id)));
    /// ```
    pub fn with_handler<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(crate::consumer::Message) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = crate::consumer::Outcome> + Send + 'static,
    {
        self.handler = Some(Arc::new(move |msg| Box::pin(handler(msg))));
        self
    }

    /// Runs the seed's workload with these faults instead of its own (to
    /// replay a shortened list).
    pub fn with_faults(mut self, faults: Vec<Fault>) -> Self {
        self.faults = Some(faults);
        self
    }

    /// Runs the seed on a runtime of its own (current thread, paused
    /// clock) and checks the outcome.
    ///
    /// # Panics
    /// Inside a tokio runtime (it builds its own).
    pub fn run(&self) -> Report {
        watch_panics();
        PANICS.with(|p| p.borrow_mut().clear());
        crate::backoff::seed_jitter(Some(self.seed));
        crate::consumer::core::unacked::id_hash::fix_process_key();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime");
        let mut report = runtime.block_on(self.run_here());
        drop(runtime);
        crate::backoff::seed_jitter(None);
        PANICS.with(|p| {
            for panic in p.borrow_mut().drain(..) {
                report.violations.push(format!("a task panicked: {panic}"));
            }
        });
        report
    }

    /// The shortest fault list (removing one fault at a time) with which
    /// the seed still fails; `None` if it passes with its own.
    pub fn shrink(&self) -> Option<Report> {
        let mut failing = self.run();
        if failing.passed() {
            return None;
        }
        let mut i = 0;
        while i < failing.faults.len() {
            let mut fewer = failing.faults.clone();
            fewer.remove(i);
            let tried = self.clone().with_faults(fewer).run();
            if tried.passed() {
                i += 1;
            } else {
                failing = tried;
            }
        }
        Some(failing)
    }

    async fn run_here(&self) -> Report {
        let mut rng = Rng::new(self.seed);
        let mut workload = Workload::choose(&mut rng);
        if self.handler.is_some() {
            workload.take_by_run();
        }
        let faults = self
            .faults
            .clone()
            .unwrap_or_else(|| choose_faults(&mut rng, &workload));
        let mut report = Report {
            seed: self.seed,
            workload: workload.describe(),
            faults: faults.clone(),
            fired: 0,
            handed_out: 0,
            violations: Vec::new(),
            trace: Vec::new(),
            stored: Vec::new(),
        };
        let fired = Arc::new(AtomicUsize::new(0));
        let run = self.drive(workload, faults, fired.clone());
        match tokio::time::timeout(RUN_BOUND, run).await {
            Ok((journal, trace)) => {
                report.handed_out = journal.handed;
                report.stored = journal.stored;
                report.violations = journal.violations;
                report.trace = trace;
            }
            Err(_) => report.violations.push(format!(
                "the run did not end within {RUN_BOUND:?} of virtual time"
            )),
        }
        report.fired = fired.load(Ordering::Relaxed);
        report
    }

    async fn drive(
        &self,
        workload: Workload,
        faults: Vec<Fault>,
        fired: Arc<AtomicUsize>,
    ) -> (Journal, Vec<String>) {
        let broker = TestBroker::start();
        broker.set_max_message_size(MAX_MESSAGE_SIZE as i32);
        // Half the seeds with chunked messages pace them, so another
        // producer's messages are stored, and read, between a message's
        // chunks (a hash of the seed decides: the workload's draws stay
        // as they were).
        if workload.chunk_every > 0
            && crate::backoff::splitmix64(self.seed ^ CHUNK_PACE_SALT) % 2 == 0
        {
            broker.pace_chunks(Some(CHUNK_PACE));
        }
        if workload.partitions > 0 {
            broker.create_partitioned_topic(TOPIC, workload.partitions);
        }
        let mut builder = broker.client_builder();
        if let Some(limit) = workload.memory_limit {
            builder = builder.memory_limit(limit);
        }
        let order = match workload.kind {
            SubscriptionType::Exclusive | SubscriptionType::Failover => Some(OrderBy::Partition),
            SubscriptionType::KeyShared => Some(OrderBy::Key),
            SubscriptionType::Shared => None,
        };
        let mut journal = Journal::new(workload.receipts, workload.batch_index_ack, order);
        journal.watch(broker.clone());
        journal.counted = order != Some(OrderBy::Partition);
        if self.trace {
            journal.keep_log();
        }
        let mut clients = Vec::new();
        for _ in 0..=workload.producers {
            match builder.clone().build().await {
                Ok(client) => clients.push(client),
                Err(e) => {
                    journal.violation(format!("the client was not built: {e}"));
                    return (journal, Vec::new());
                }
            }
        }
        let client = clients.remove(0);
        let topics: Vec<String> = match workload.partitions {
            0 => vec![TOPIC.to_owned()],
            n => (0..n).map(|i| format!("{TOPIC}-partition-{i}")).collect(),
        };
        let stage = Arc::new(Stage {
            seed: self.seed,
            workload,
            broker,
            client,
            producer_clients: clients,
            topic: TOPIC.to_owned(),
            journal: Mutex::new(journal),
            consumers: Mutex::new(Vec::new()),
            rejoins: Mutex::new(Vec::new()),
            handler: self.handler.clone(),
        });

        for instance in 0..stage.workload.consumers {
            match stage.subscribe(instance).await {
                Ok(consumer) => stage.start_consumer(instance, consumer),
                Err(e) => stage
                    .journal()
                    .violation(format!("consumer {instance} could not subscribe: {e}")),
            }
        }
        let (stop_reader, mut stopped) = tokio::sync::watch::channel(false);
        let reading = match stage.reader().await {
            Some(Ok(mut reader)) => {
                let stage = stage.clone();
                Some(tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            next = reader.read_next() => match next {
                                Ok(msg) => stage.journal().read(&msg),
                                Err(e) => {
                                    stage.journal().violation(format!("the reader failed: {e}"));
                                    return;
                                }
                            },
                            _ = stopped.changed() => {
                                if let Err(e) = reader.close().await {
                                    stage.journal().violation(format!("closing the reader failed: {e}"));
                                }
                                return;
                            }
                        }
                    }
                }))
            }
            Some(Err(e)) => {
                stage
                    .journal()
                    .violation(format!("the reader was not created: {e}"));
                None
            }
            None => None,
        };
        let injecting = tokio::spawn(faults::inject(stage.clone(), faults, fired));

        let producing: Vec<_> = (0..stage.workload.producers)
            .map(|i| tokio::spawn(stage.clone().produce(i)))
            .collect();
        let mut producers = Vec::new();
        for p in producing {
            if let Ok(Some(p)) = p.await {
                producers.push(p);
            }
        }

        let deadline = tokio::time::Instant::now() + SETTLE_BOUND;
        while let Some(open) = oracle::unsettled(&stage, &topics) {
            if tokio::time::Instant::now() >= deadline {
                stage.journal().violation(format!(
                    "not everything was consumed within {SETTLE_BOUND:?} of virtual time after the last send: {open}"
                ));
                break;
            }
            tokio::time::sleep(SETTLE_POLL).await;
        }
        injecting.abort();
        let rejoins = std::mem::take(&mut *stage.rejoins.lock().unwrap_or_else(|e| e.into_inner()));
        for rejoin in rejoins {
            let _ = rejoin.await;
        }

        for (instance, consumer) in stage.live_consumers() {
            if let Err(e) = consumer.close().await {
                stage
                    .journal()
                    .violation(format!("closing consumer {instance} failed: {e}"));
            }
        }
        if let Some(reading) = reading {
            let _ = stop_reader.send(true);
            let _ = reading.await;
        }
        for (i, producer) in producers.iter().enumerate() {
            if let Err(e) = producer.close().await {
                stage
                    .journal()
                    .violation(format!("closing producer {i} failed: {e}"));
            }
        }
        stage.client.close().await;
        for client in &stage.producer_clients {
            client.close().await;
        }
        oracle::check(&stage, &topics);
        let stored = stage
            .broker
            .with_model(|m| oracle::kept(m, &topics).into_iter().map(|k| k.id).collect());
        let mut journal = std::mem::take(&mut *stage.journal());
        journal.stored = stored;
        // In the order things happened: a line of the application's comes
        // after the broker events recorded before it.
        let mut trace: Vec<(usize, Duration, String)> = journal
            .take_log()
            .into_iter()
            .map(|n| (2 * n.after, n.at, n.line))
            .collect();
        if self.trace {
            let events = stage.broker.events();
            stage.broker.with_model(|m| {
                trace.extend(
                    events
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (2 * i + 1, e.at, describe_event(m, e))),
                );
            });
        }
        trace.sort_by_key(|(order, _, _)| *order);
        let trace = trace
            .into_iter()
            .map(|(_, at, line)| format!("{at:>10.3?} {line}"))
            .collect();
        (journal, trace)
    }
}

/// One broker event in one short line.
fn describe_event(model: &crate::testing::model::Model, e: &crate::testing::Event) -> String {
    use crate::testing::EventKind as K;
    let of = |subscription: &str| {
        if subscription == roles::SUBSCRIPTION {
            String::new()
        } else {
            format!(" [{subscription}]")
        }
    };
    let what = match &e.kind {
        K::Published { id } => format!("stored {id}{}", describe_entry(model, &e.topic, id)),
        K::SendFailed { sequence_id } => format!("refused send {sequence_id}"),
        K::Delivered {
            id,
            redelivery_count,
            subscription,
        } => format!(
            "delivered {id} (redelivery {redelivery_count}){}",
            of(subscription)
        ),
        K::Acked { id, subscription } => format!("acked {id}{}", of(subscription)),
        K::MembersAcked { id, members, .. } => format!("acked {id} members {members:?}"),
        K::RedeliveryRequested { id, .. } => format!("asked again for {id}"),
        K::CursorMoved { subscription, from } => {
            format!("cursor moved to entry {from}{}", of(subscription))
        }
    };
    let topic = e.topic.rsplit('/').next().unwrap_or(&e.topic);
    format!("broker: {topic} {what}")
}

/// What a stored entry holds: its batch size, its chunk, or the name of
/// the message.
fn describe_entry(
    model: &crate::testing::model::Model,
    topic: &str,
    id: &crate::message_id::MessageId,
) -> String {
    let Some(entry) = model
        .topic(topic)
        .and_then(|t| t.entries.get(id.entry_id as usize))
    else {
        return String::new();
    };
    let m = &entry.metadata;
    match (m.num_messages_in_batch, m.chunk_id, m.num_chunks_from_msg) {
        (_, Some(chunk), Some(n)) if n > 1 => format!(
            " (chunk {chunk} of {n}, uuid {})",
            m.uuid.as_deref().unwrap_or("?")
        ),
        (Some(n), _, _) => format!(" (batch of {n})"),
        _ => format!(" ({})", journal::name_of(&entry.data).unwrap_or("?")),
    }
}
