//! Nacks on Exclusive and Failover against the scripted broker (paused
//! clock): the rewind a nack asks for waits until the messages already
//! received are handed out, so one poison message does not starve the rest
//! and the REDELIVER commands do not storm.

use super::*;

/// Message `entry` tagged with consumer epoch `epoch`.
fn in_epoch(consumer: u64, entry: u64, epoch: u64) -> Frame {
    let mut frame = message(consumer, entry, "m", Checksum::Valid);
    if let Some(body) = frame.command.message.as_mut() {
        body.consumer_epoch = Some(epoch);
    }
    frame
}

#[tokio::test(start_paused = true)]
async fn a_poison_message_is_rewound_once_after_the_nine_others() {
    for kind in [SubscriptionType::Exclusive, SubscriptionType::Failover] {
        let net = FakeNetwork::new();
        guard("coalesced rewind", async {
            let (mut consumer, mut broker, id) = subscribed(&net, kind).await;
            for entry in 0..10 {
                broker.send_frame(in_epoch(id, entry, 0)).await;
            }
            let app = tokio::spawn(async move {
                let mut seen = Vec::new();
                while seen.iter().filter(|e| **e == 3).count() < 2 {
                    let m = consumer.receive().await.expect("receive");
                    seen.push(m.id().entry_id);
                    if m.id().entry_id == 3 {
                        consumer.nack(&m).expect("nack");
                    } else {
                        consumer.ack(&m).await.expect("ack");
                    }
                }
                seen
            });
            // Everything the broker sees until the rewind: the nine acks.
            let mut acked = Vec::new();
            let epoch = loop {
                let frame = broker.recv().await.expect("open");
                match frame.command.r#type() {
                    Type::Ack => {
                        let body = frame.command.ack.as_ref().expect("body");
                        acked.extend(body.message_id.iter().map(|m| m.entry_id));
                    }
                    Type::RedeliverUnacknowledgedMessages => {
                        let body = frame.command.redeliver_unacknowledged_messages;
                        let body = body.as_ref().expect("body");
                        assert!(body.message_ids.is_empty(), "a rewind names no ids");
                        break body.consumer_epoch.expect("a new epoch");
                    }
                    other => panic!("{kind:?}: unexpected {other:?} before the rewind"),
                }
            };
            acked.sort_unstable();
            assert_eq!(acked, [0, 1, 2, 4, 5, 6, 7, 8, 9], "{kind:?}");
            // The broker rewinds: the only unacked message comes again.
            broker.send_frame(in_epoch(id, 3, epoch)).await;
            let seen = app.await.expect("app");
            assert_eq!(seen, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 3], "{kind:?}");
        })
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_lone_nacked_message_is_rewound_at_most_once_per_minimum_delay() {
    let net = FakeNetwork::new();
    guard("no rewind storm", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Exclusive)
                .rewind_min_delay(Duration::from_millis(200))
        })
        .await;
        let start = tokio::time::Instant::now();
        let app = tokio::spawn(async move {
            loop {
                let Ok(m) = consumer.receive().await else {
                    return;
                };
                let _ = consumer.nack(&m);
            }
        });
        // The broker answers every rewind with the message at once, for 2 s.
        let mut epoch = 0;
        let mut rewinds = 0;
        while start.elapsed() < Duration::from_secs(2) {
            broker.send_frame(in_epoch(id, 7, epoch)).await;
            let frame = broker.expect(Type::RedeliverUnacknowledgedMessages).await;
            let body = frame.command.redeliver_unacknowledged_messages;
            epoch = body.as_ref().and_then(|b| b.consumer_epoch).expect("epoch");
            rewinds += 1;
        }
        assert_eq!(rewinds, 10, "one rewind per 200 ms");
        app.abort();
    })
    .await;
}
