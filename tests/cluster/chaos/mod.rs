//! The chaos run (`scripts/chaos`): producers and consumers on several
//! topics for a given time while, at random (seeded), bundles are unloaded,
//! moved and split, topics unloaded, connections cut and brokers killed
//! with SIGKILL and started again.
//!
//! Each topic has a producer and two Shared consumers on subscription "s",
//! with ack receipts and a dead-letter policy: the application nacks a
//! seeded few "poison" messages until they go to the dead-letter topic, and
//! acks the rest. Topics 0 and 1 forward at the redelivery limit on arrival
//! (the default cutoff); topics 2 and 3 as the Java client, only after the
//! application's nack. Topic 0 also has a Failover group of two consumers
//! on subscription "f", and topic 1 a reader that tails it from the start.
//!
//! At the end the consumers are closed while one fault proxy cuts its
//! connections (every close must return Ok), and the run checks:
//! - every confirmed message is accounted for: consumed on "s", or in the
//!   dead-letter topic; consumed by the Failover group; read by the reader.
//!   Lost must be 0;
//! - every ack held: after the run, with every consumer closed, a new
//!   consumer on "s" and on "f" finds no message whose ack returned Ok
//!   (with receipts: the broker confirmed it), unless a kill came after
//!   that ack before any move (the killed broker had not persisted it).
//!   During the run every copy of a message has a cause (a fault under
//!   way, a nacked message in its entry, a kill), as `common/acks.rs`
//!   defines; the fault counts cannot order copies exactly against acks
//!   while faults follow each other this fast;
//! - on topics 2 and 3 no message the application acked is also in the
//!   dead-letter topic: only nacks forward there;
//! - no topic stores a message twice more often than its producer had sends
//!   in flight at the cuts and kills (a move stores nothing twice);
//! - the reader read each message id once, in order, and every confirmed
//!   message, first copies in the producer's order;
//! - no role met an error the client should never return under these
//!   faults. One it says may pass (a send or a receive that failed while
//!   a broker was dead or a connection cut) is recorded and printed, and
//!   the role goes on: a failed send is not confirmed, and what was
//!   confirmed must still be read.
//!
//! `CHAOS_SECONDS` (default 120) and `CHAOS_SEED` (default: from the clock,
//! printed) configure it. A seed fixes the sequence of faults and the
//! progress at which each one comes; the interleaving with the brokers'
//! own timing differs from run to run. Faults come with progress (every
//! few thousand confirmed messages), not on a timer.

mod books;
mod faults;
mod roles;
mod twins;
mod verdict;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use pulsar_wire::MessageId;
use pulsar_wire::consumer::{
    Consumer, DeadLetterCutoff, DeadLetterPolicy, InitialPosition, SubscriptionType,
};
use tokio::sync::watch;

use self::books::{Books, Errors, Group, Tail};
use self::faults::{
    Rng, clients_through_fault_proxies, mix, move_bundle, poison, split, unload_topic,
};
use self::roles::IN_FLIGHT;
use self::verdict::{Tally, check_tail, missing};
use super::moves::fresh_namespace;
use super::traffic::{SEND_TIMEOUT, number};
use crate::common::acks::{Fault, Faults, left_before};
use crate::common::cluster::Cluster;
use crate::common::{client_at, init_tracing};

const TOPICS: usize = 4;
/// Deliveries before a poison message goes to the dead-letter topic.
const MAX_REDELIVERIES: u32 = 3;
/// Longest the end of the run waits without any message accounted for.
const IDLE: Duration = Duration::from_secs(120);
/// Most bundle splits in one run (each one adds a bundle for good).
const MAX_SPLITS: u32 = 3;
/// The topic with the Failover group on subscription "f".
const GROUP_TOPIC: usize = 0;
/// The topic the reader tails.
const TAILED_TOPIC: usize = 1;

/// When a topic's consumers forward a message at the redelivery limit.
fn cutoff(topic: usize) -> DeadLetterCutoff {
    if topic < 2 {
        DeadLetterCutoff::OnArrival
    } else {
        DeadLetterCutoff::JavaStyle
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

/// Waits until `progress` reaches `target`, or `IDLE` passes without a change.
async fn wait_for(progress: &watch::Sender<u64>, target: u64) {
    let mut seen = progress.subscribe();
    while *seen.borrow_and_update() < target {
        if tokio::time::timeout(IDLE, seen.changed()).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
#[ignore = "minutes long: scripts/chaos runs it on the cluster"]
async fn chaos() {
    let Some(mut cluster) = Cluster::attach().await else {
        return;
    };
    init_tracing();
    let seconds = env_u64("CHAOS_SECONDS").unwrap_or(120);
    let seed = env_u64("CHAOS_SEED").unwrap_or_else(|| {
        let now = std::time::UNIX_EPOCH
            .elapsed()
            .map_or(0, |d| d.as_nanos() as u64);
        mix(now) % 1_000_000
    });
    eprintln!(
        "chaos: seed {seed}, {seconds} s (CHAOS_SEED={seed} CHAOS_SECONDS={seconds} scripts/chaos)"
    );
    let mut rng = Rng(seed);

    let (proxies, clients) = clients_through_fault_proxies(&cluster).await;

    let namespace = fresh_namespace(&cluster, "chaos").await;
    let topics: Vec<String> = (0..TOPICS)
        .map(|i| format!("persistent://{namespace}/chaos-{i}"))
        .collect();
    let faults = Faults::default();
    let books = Arc::new(Books::new(TOPICS, &faults));
    let group = Arc::new(Group::new(&faults));
    let tail = Arc::new(Tail::new());
    let errors = Arc::new(Errors::default());

    // Per topic: a dead-letter reader, two consumers on "s" (clients via
    // the proxy and direct), one producer. The handles are kept to close
    // them at the end; their tasks end then.
    let mut handles: Vec<Consumer> = Vec::new();
    let mut tasks = Vec::new();
    for (t, topic) in topics.iter().enumerate() {
        let dlq = format!("{topic}-s-DLQ");
        let reader = clients[t % clients.len()]
            .consumer(&dlq, "keep")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("dead-letter reader");
        handles.push(reader.clone());
        tasks.push(tokio::spawn(roles::read_dead_letters(
            reader,
            books.clone(),
            t,
            errors.clone(),
        )));
        for c in 0..2 {
            let consumer = clients[(t + c) % clients.len()]
                .consumer(topic, "s")
                .subscription_type(SubscriptionType::Shared)
                .initial_position(InitialPosition::Earliest)
                .ack_receipts(true)
                .dead_letter_policy(DeadLetterPolicy {
                    initial_subscription_name: Some("keep".into()),
                    cutoff: cutoff(t),
                    ..DeadLetterPolicy::after_redeliveries(MAX_REDELIVERIES)
                })
                .subscribe()
                .await
                .expect("subscribe");
            handles.push(consumer.clone());
            tasks.push(tokio::spawn(roles::consume(
                consumer,
                books.clone(),
                t,
                c,
                seed,
                errors.clone(),
            )));
        }
    }
    for c in 0..2 {
        let member = clients[(GROUP_TOPIC + c + 1) % clients.len()]
            .consumer(&topics[GROUP_TOPIC], "f")
            .subscription_type(SubscriptionType::Failover)
            .initial_position(InitialPosition::Earliest)
            .ack_receipts(true)
            .subscribe()
            .await
            .expect("subscribe to the Failover group");
        handles.push(member.clone());
        tasks.push(tokio::spawn(roles::consume_in_group(
            member,
            group.clone(),
            format!("Failover member {c}"),
            errors.clone(),
        )));
    }
    // The twins: pulsar-wire on one topic, the Java client on the other,
    // both through the fault proxy in front of the Pulsar proxy (clients 0
    // and 2 go there).
    let twin_topics = ["wire", "java"].map(|who| format!("persistent://{namespace}/twin-{who}"));
    let twin = Arc::new(Group::new(&faults));
    for c in [0, 2] {
        let consumer = clients[c]
            .consumer(&twin_topics[0], twins::SUBSCRIPTION)
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .ack_receipts(true)
            .subscribe()
            .await
            .expect("subscribe to the pulsar-wire twin");
        handles.push(consumer.clone());
        tasks.push(tokio::spawn(roles::consume_in_group(
            consumer,
            twin.clone(),
            format!("twin consumer on client {c}"),
            errors.clone(),
        )));
    }
    let reader = clients[(TAILED_TOPIC + 1) % clients.len()]
        .reader(&topics[TAILED_TOPIC])
        .start_message_id(MessageId::EARLIEST)
        .create()
        .await
        .expect("reader");
    let (stop_tail, stopped) = watch::channel(());
    let tailing = tokio::spawn(roles::tail(reader, tail.clone(), stopped, errors.clone()));

    let java_url = format!("pulsar://{}", proxies[2].addr());
    let java_twin = twins::start_java(&java_url, &twin_topics[1], seconds).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let (progress, confirmed) = watch::channel(0u64);
    let progress = Arc::new(progress);
    let mut producers = Vec::new();
    for (t, topic) in topics.iter().enumerate() {
        let producer = clients[(t + 2) % clients.len()]
            .producer(topic)
            .send_timeout(SEND_TIMEOUT)
            .create()
            .await
            .expect("producer");
        producers.push(tokio::spawn(roles::produce(
            producer,
            t,
            deadline,
            progress.clone(),
            errors.clone(),
        )));
    }
    let twin_producer = clients[0]
        .producer(&twin_topics[0])
        .send_timeout(SEND_TIMEOUT)
        .create()
        .await
        .expect("the pulsar-wire twin's producer");
    let twin_producing = tokio::spawn(roles::produce(
        twin_producer,
        TOPICS,
        deadline,
        progress.clone(),
        errors.clone(),
    ));

    // The faults, one every few thousand confirmed messages until the end.
    let mut faults_done: BTreeMap<&str, u32> = BTreeMap::new();
    let mut splits = 0;
    let mut dead: Option<usize> = None;
    let mut confirmed_rx = confirmed;
    loop {
        let next = *confirmed_rx.borrow() + 1_000 + rng.below(4_000);
        let reached = tokio::time::timeout_at(deadline, confirmed_rx.wait_for(|c| *c >= next))
            .await
            .is_ok_and(|r| r.is_ok());
        if !reached {
            break;
        }
        let fault = if let Some(n) = dead.take() {
            cluster.start_broker(n).await;
            "restart broker"
        } else {
            // One topic, or both twins.
            let pick = rng.below(TOPICS as u64 + 1) as usize;
            let picked = topics
                .get(pick)
                .map_or(&twin_topics[..], std::slice::from_ref);
            match rng.below(100) {
                0..25 => {
                    let to = rng.below(2) as usize + 1;
                    faults.begin(Fault::Move);
                    for topic in picked {
                        move_bundle(&cluster, topic, Some(&cluster.broker(to).id)).await;
                    }
                    "move bundle"
                }
                25..40 => {
                    faults.begin(Fault::Move);
                    for topic in picked {
                        move_bundle(&cluster, topic, None).await;
                    }
                    "unload bundle"
                }
                40..45 if splits < MAX_SPLITS => {
                    splits += 1;
                    faults.begin(Fault::Move);
                    for topic in picked {
                        split(&cluster, topic).await;
                    }
                    "split bundle"
                }
                40..60 => {
                    faults.begin(Fault::Move);
                    for topic in picked {
                        unload_topic(&cluster, topic).await;
                    }
                    "unload topic"
                }
                60..85 => {
                    faults.begin(Fault::Cut);
                    proxies[rng.below(proxies.len() as u64) as usize].cut_all();
                    "cut connections"
                }
                _ => {
                    let n = rng.below(2) as usize + 1;
                    faults.begin(Fault::Kill);
                    cluster.kill_broker(n).await;
                    dead = Some(n);
                    "kill -9 broker"
                }
            }
        };
        eprintln!("chaos: {fault} at {} confirmed", *confirmed_rx.borrow());
        *faults_done.entry(fault).or_default() += 1;
    }
    if let Some(n) = dead {
        cluster.start_broker(n).await;
        *faults_done.entry("restart broker").or_default() += 1;
    }

    // The end: every confirmed message accounted for, on every subscription.
    let mut sent = Vec::new();
    for producer in producers {
        sent.push(producer.await.expect("producer task"));
    }
    let total: u64 = sent.iter().map(|confirmed| confirmed.len() as u64).sum();
    let twin_sent = twin_producing.await.expect("twin producer task");
    wait_for(&books.accounted, total).await;
    wait_for(&twin.distinct, twin_sent.len() as u64).await;
    wait_for(&group.distinct, sent[GROUP_TOPIC].len() as u64).await;
    wait_for(&tail.distinct, sent[TAILED_TOPIC].len() as u64).await;

    // Close every consumer while one fault proxy cuts its connections:
    // each close must still return Ok.
    let closing: Vec<_> = handles
        .into_iter()
        .map(|consumer| tokio::spawn(async move { consumer.close().await }))
        .collect();
    tokio::task::yield_now().await;
    faults.begin(Fault::Cut);
    proxies[rng.below(proxies.len() as u64) as usize].cut_all();
    for (i, closed) in closing.into_iter().enumerate() {
        let closed = closed.await.expect("close task");
        closed.unwrap_or_else(|e| panic!("close of consumer {i} under a cut: {e}"));
    }
    for task in tasks {
        task.await.expect("consumer task");
    }
    stop_tail.send_replace(());
    tailing.await.expect("reader task");
    for client in &clients {
        client.close().await;
    }

    // What the subscriptions still hold, read by a client past the fault
    // proxies: nothing whose ack returned Ok may be there (unless a kill
    // lost the ack), as the ack books judge.
    let check = client_at(cluster.broker(1).service_url.clone()).await;
    let mut left = 0;
    for (t, topic) in topics.iter().enumerate() {
        for (payload, id) in left_before(&check, topic, "s", SubscriptionType::Shared, "end").await
        {
            let n = number(&payload);
            if !poison(seed, t, n) {
                books.acks(t).left(n, id);
            }
            left += 1;
        }
    }
    let group_topic = &topics[GROUP_TOPIC];
    for (payload, id) in
        left_before(&check, group_topic, "f", SubscriptionType::Failover, "end").await
    {
        group
            .book
            .lock()
            .expect("ack book")
            .left(number(&payload), id);
        left += 1;
    }
    check.close().await;
    // The Java twin drains its subscription itself, meanwhile.
    let java = twins::java_outcome(java_twin).await;
    let wire = twins::Outcome::of(&twin.book.lock().expect("ack book"), &twin_sent);

    let (cuts, kills) = (
        u64::from(faults_done.get("cut connections").copied().unwrap_or(0)) + 1,
        faults.kills() as u64,
    );
    let tally = Tally::of(&books, &sent, seed, &topics);
    let group_book = group.book.lock().expect("ack book");
    let group_lost = missing(&group_book, &sent[GROUP_TOPIC]);
    let tail_read = tail.read.lock().expect("tail").clone();
    let faults_line: Vec<String> = faults_done
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    eprintln!(
        "chaos result: seed {seed}, {seconds} s, {TOPICS} topics; confirmed {total}, consumed {}, \
         in the DLQ {} (poison {}; also consumed: {} with the on-arrival cutoff, {} with Java's), \
         lost {}, duplicates {} (+{} extra DLQ copies); left in subscriptions {left}; Failover \
         group: {} delivered, {} lost; reader: {} read of {} confirmed; faults: {}",
        tally.consumed,
        tally.in_dlq,
        tally.poisoned,
        tally.both_on_arrival,
        tally.both_java_style,
        tally.lost.len(),
        tally.duplicates,
        tally.dead_copies,
        group_book.deliveries(),
        group_lost.len(),
        tail_read.len(),
        sent[TAILED_TOPIC].len(),
        faults_line.join(", ")
    );
    eprintln!(
        "chaos twins: {}; {}",
        wire.line("pulsar-wire"),
        java.line("the Java client")
    );
    let (passing, fatal) = errors.split();
    eprintln!(
        "chaos errors: {} that may pass (the roles went on), {} of kinds never expected here",
        passing.len(),
        fatal.len()
    );
    const SHOWN: usize = 50;
    for line in passing.iter().take(SHOWN) {
        eprintln!("  {line}");
    }
    if passing.len() > SHOWN {
        eprintln!("  ... and {} more that may pass", passing.len() - SHOWN);
    }
    assert!(
        fatal.is_empty(),
        "errors the client should never return under these faults: {fatal:#?}"
    );
    assert!(
        tally.lost.is_empty(),
        "confirmed messages lost (first 10): {:?}",
        &tally.lost[..tally.lost.len().min(10)]
    );
    assert_eq!(
        tally.both_java_style, 0,
        "messages the application acked are in the dead-letter topic, though only nacks forward"
    );
    for (t, confirmed) in sent.iter().enumerate() {
        let book = books.acks(t);
        book.assert_acks_held(&format!("chaos topic {t}, subscription s"));
        let most = (IN_FLIGHT as u64 + 1) * (cuts + kills);
        assert!(
            book.stored_twice() <= most,
            "topic {t}: {} messages stored twice, more than the {most} sends in flight at \
             {cuts} cuts and {kills} kills ({} confirmed)",
            book.stored_twice(),
            confirmed.len()
        );
    }
    assert!(
        group_lost.is_empty(),
        "the Failover group missed confirmed messages (first 20): {:?}",
        &group_lost[..group_lost.len().min(20)]
    );
    group_book.assert_acks_held("chaos Failover group");
    assert_eq!(wire.lost, 0, "the pulsar-wire twin lost confirmed messages");
    twin.book
        .lock()
        .expect("ack book")
        .assert_acks_held("chaos twin, subscription t");
    check_tail(&tail_read, &sent[TAILED_TOPIC]);
}
