//! 10,000 messages, each delivery answered at random (seeded, the seed is
//! printed; `RANDOM_RUN_SEED=n` replays one): ack, nack, no answer (the ack
//! timeout brings it back), or reconsume later. In the end every message
//! was acked by the application or is in the dead-letter topic, none lost,
//! and the subscription holds nothing more on either topic: a fresh
//! consumer's first message is a marker published after the run.

use std::collections::HashSet;
use std::time::Duration;

use pulsar_wire::consumer::DeadLetterPolicy;
use pulsar_wire::producer::ProducerMessage;
use tokio::sync::mpsc;

use super::dead_letter::{producer, send};
use super::*;

const MESSAGES: usize = 10_000;

/// splitmix64: a tiny, seedable generator (no dependency for one test).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    match std::env::var("RANDOM_RUN_SEED") {
        Ok(s) => s.parse().expect("RANDOM_RUN_SEED is a number"),
        Err(_) => std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish(),
    }
}

#[derive(Debug, Default)]
struct Tally {
    deliveries: usize,
    acks: usize,
    nacks: usize,
    unanswered: usize,
    retries: usize,
}

#[tokio::test]
async fn ten_thousand_random_outcomes_lose_nothing() {
    let seed = seed();
    eprintln!("random run seed: {seed} (replay with RANDOM_RUN_SEED={seed})");
    let mut rng = Rng(seed);
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    // A longer hang guard than `guard`'s: about 20 s on pulsar-lite and
    // 30 s on Apache Pulsar when the machine is quiet, more on a busy one.
    let limit = Duration::from_secs(180);
    let run = tokio::time::timeout(limit, async {
        let client = client(&broker).await;
        let topic = unique_topic("random-run");
        let retry_topic = format!("{topic}-s-RETRY");
        let mut consumer = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .ack_timeout(Duration::from_millis(200))
            .ack_timeout_tick(Duration::from_millis(50))
            .dead_letter_policy(DeadLetterPolicy {
                initial_subscription_name: Some("keep".into()),
                ..DeadLetterPolicy::after_redeliveries(3)
            })
            .enable_retry(true)
            .subscribe()
            .await
            .expect("subscribe");
        // Batched: the run also goes through batch members' acks and nacks.
        let batching = client.producer(&topic).create().await.expect("producer");
        let mut receipts = Vec::with_capacity(MESSAGES);
        for i in 0..MESSAGES {
            let msg = ProducerMessage::new(format!("m{i}")).key(format!("k{}", i % 97));
            receipts.push(batching.send(msg).await.expect("queued"));
        }
        for receipt in receipts {
            receipt.await.expect("stored");
        }

        // The DLQ, read beside the run through the subscription the policy
        // created before the first forward.
        let (dlq_tx, mut dlq_rx) = mpsc::unbounded_channel();
        let mut dlq = client
            .consumer(format!("{topic}-s-DLQ"), "keep")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("DLQ consumer");
        let reader = tokio::spawn(async move {
            while let Ok(m) = dlq.receive().await {
                dlq.ack(&m).await.expect("ack dead letter");
                if dlq_tx.send(text(&m)).is_err() {
                    break;
                }
            }
        });

        let all: HashSet<String> = (0..MESSAGES).map(|i| format!("m{i}")).collect();
        let (mut acked, mut dead) = (HashSet::new(), HashSet::new());
        let mut tally = Tally::default();
        let settled = |acked: &HashSet<String>, dead: &HashSet<String>| {
            acked.len() + dead.iter().filter(|t| !acked.contains(*t)).count()
        };
        while settled(&acked, &dead) < MESSAGES {
            tokio::select! {
                m = consumer.receive() => {
                    let m = m.expect("receive");
                    tally.deliveries += 1;
                    match rng.next() % 100 {
                        0..55 => {
                            consumer.ack(&m).await.expect("ack");
                            tally.acks += 1;
                            acked.insert(text(&m));
                        }
                        55..70 => {
                            consumer.nack(&m).expect("nack");
                            tally.nacks += 1;
                        }
                        70..80 => tally.unanswered += 1,
                        _ => {
                            consumer
                                .reconsume_later(&m, Duration::ZERO)
                                .await
                                .expect("reconsume later");
                            tally.retries += 1;
                        }
                    }
                }
                Some(t) = dlq_rx.recv() => {
                    dead.insert(t);
                }
            }
        }
        eprintln!(
            "random run: {tally:?}; {} acked, {} dead-lettered ({} both)",
            acked.len(),
            dead.len(),
            acked.intersection(&dead).count()
        );
        let union: HashSet<String> = acked.union(&dead).cloned().collect();
        assert_eq!(union, all, "every message acked or dead-lettered");
        // Outcomes of every kind happened.
        assert!(tally.nacks > 0 && tally.unanswered > 0 && tally.retries > 0 && !dead.is_empty());

        // Nothing is left: closing settles forwards in flight; then a fresh
        // consumer on each topic gets the marker first.
        consumer.close().await.expect("close");
        reader.abort();
        for t in [&topic, &retry_topic] {
            let p = producer(&client, t).await;
            send(&p, ProducerMessage::new("marker")).await;
            let mut fresh = shared(&client, t, "s", 10).await;
            let first = fresh.receive().await.expect("receive");
            assert_eq!(
                text(&first),
                "marker",
                "{t}: nothing left before the marker"
            );
            fresh.close().await.expect("close");
        }
    })
    .await;
    assert!(
        run.is_ok(),
        "random run: no outcome within {limit:?} (hang guard): a message was lost or stuck"
    );
}
