//! Seek against the scripted broker: a broker that answers SEEK before it
//! closes the consumer (or never closes it) still never gets a message
//! queued before the seek to the application; a seek to a batch member
//! carries the `ack_set` of the members before it, and those members are
//! dropped if the broker sends them anyway.

use bytes::BytesMut;
use pulsar_wire::wire::batch;

use super::*;

/// Answers the consumer's CLOSE_CONSUMER for `old`, then its LOOKUP and
/// SUBSCRIBE; returns the SUBSCRIBE's consumer id and start message id.
async fn subscribed_again(broker: &mut FakeBroker, old: u64) -> (u64, Option<MessageId>) {
    let close = broker.expect(Type::CloseConsumer).await;
    let body = close.command.close_consumer.as_ref().expect("body");
    assert_eq!(body.consumer_id, old, "the consumer closes its old id");
    broker.send(answer::success(body.request_id)).await;
    let lookup = broker.expect(Type::Lookup).await;
    super::reconnect::answer_lookup_here(broker, &lookup).await;
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    broker.send(answer::success(body.request_id)).await;
    broker.expect(Type::Flow).await;
    let start = body.start_message_id.as_ref().map(MessageId::from_proto);
    (body.consumer_id, start)
}

/// Seeks `consumer` to `target` and answers the SEEK with Success without
/// closing the consumer; returns the SEEK's message id as sent.
async fn seek(
    consumer: &Consumer,
    broker: &mut FakeBroker,
    target: MessageId,
) -> proto::MessageIdData {
    let asked = async {
        let seek = broker.expect(Type::Seek).await;
        let body = seek.command.seek.as_ref().expect("body");
        broker.send(answer::success(body.request_id)).await;
        body.message_id.clone()
    };
    let (done, sent) = tokio::join!(consumer.seek(target), asked);
    done.expect("seek");
    sent.expect("a message id")
}

#[tokio::test(start_paused = true)]
async fn after_a_seek_nothing_queued_before_it_is_handed_out() {
    let net = FakeNetwork::new();
    guard("seek drops the queue", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Exclusive).await;
        for entry in 0..10 {
            broker
                .send_frame(message(id, entry, "before", Checksum::Valid))
                .await;
        }
        for entry in 0..2 {
            let m = consumer.receive().await.expect("receive");
            assert_eq!(m.id().entry_id, entry);
        }
        seek(&consumer, &mut broker, MessageId::new(1, 5)).await;
        // The broker has not closed the consumer: 2..9 are still queued
        // from before the seek, and must never come out.
        assert!(
            consumer.try_receive().await.expect("open").is_none(),
            "a message queued before the seek was handed out"
        );
        let (again, _) = subscribed_again(&mut broker, id).await;
        assert_ne!(again, id);
        // A late message for the old consumer id is ignored too.
        broker
            .send_frame(message(id, 3, "stale", Checksum::Valid))
            .await;
        for entry in 5..10 {
            broker
                .send_frame(message(again, entry, "after", Checksum::Valid))
                .await;
        }
        for entry in 6..10 {
            let m = consumer.receive().await.expect("receive");
            assert_eq!(m.id().entry_id, entry, "after the seek to 1:5");
            assert_eq!(m.payload().as_ref(), b"after");
        }
    })
    .await;
}

/// A MESSAGE with a batch of `n` members `m0..`.
pub(super) fn batch_message(consumer: u64, entry: u64, n: i32) -> Frame {
    let mut data = BytesMut::new();
    for i in 0..n {
        let text = format!("m{i}");
        let meta = proto::SingleMessageMetadata {
            payload_size: text.len() as i32,
            ..proto::SingleMessageMetadata::default()
        };
        batch::write_member(&meta, text.as_bytes(), &mut data);
    }
    let mut frame = message(consumer, entry, "", Checksum::Valid);
    if let Some(payload) = frame.payload.as_mut() {
        payload.metadata.num_messages_in_batch = Some(n);
        payload.data = data.freeze();
    }
    frame
}

#[tokio::test(start_paused = true)]
async fn a_seek_to_a_batch_member_marks_and_drops_the_members_before_it() {
    let net = FakeNetwork::new();
    guard("seek to a batch member", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Exclusive)
                .durable(false)
        })
        .await;
        broker.send_frame(batch_message(id, 4, 10)).await;
        for _ in 0..10 {
            consumer.receive().await.expect("receive");
        }
        let target = MessageId::new(1, 4).with_batch_index(5);
        let sent = seek(&consumer, &mut broker, target).await;
        assert_eq!(
            sent.ack_set,
            [0b11_1110_0000],
            "members 0..4 marked acked, 5..9 not"
        );
        let (again, start) = subscribed_again(&mut broker, id).await;
        assert_eq!(start, Some(target), "non-durable: made anew at the target");
        // A broker that ignores the ack_set sends the whole batch.
        broker.send_frame(batch_message(again, 4, 10)).await;
        broker
            .send_frame(message(again, 5, "next", Checksum::Valid))
            .await;
        let mut got = Vec::new();
        for _ in 0..5 {
            let m = consumer.receive().await.expect("receive");
            got.push(String::from_utf8_lossy(m.payload()).into_owned());
        }
        assert_eq!(got, ["m6", "m7", "m8", "m9", "next"]);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn after_a_seek_a_rewind_made_elsewhere_delivers_what_lies_before_the_target() {
    let net = FakeNetwork::new();
    guard("seek, then an outside rewind", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        seek(&consumer, &mut broker, MessageId::new(1, 10)).await;
        let (again, _) = subscribed_again(&mut broker, id).await;
        // An admin resets the cursor to 1:5: Apache Pulsar closes the
        // consumer, which subscribes again, and sends from there.
        let rewound = super::outside_rewind::closed_and_subscribed_again(&mut broker, again).await;
        broker.send_frame(batch_message(rewound, 5, 3)).await;
        broker
            .send_frame(message(rewound, 6, "plain", Checksum::Valid))
            .await;
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(consumer.receive().await.expect("receive"));
        }
        let texts: Vec<_> = got
            .iter()
            .map(|m| {
                (
                    m.id().entry_id,
                    String::from_utf8_lossy(m.payload()).into_owned(),
                )
            })
            .collect();
        let expected = [(5, "m0"), (5, "m1"), (5, "m2"), (6, "plain")];
        assert_eq!(texts, expected.map(|(e, t)| (e, t.to_owned())));
        // Nothing is acked but what the application acks.
        consumer.ack(&got[3]).await.expect("ack");
        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.expect("body");
        let acked: Vec<u64> = body.message_id.iter().map(|i| i.entry_id).collect();
        assert_eq!((body.consumer_id, acked), (rewound, vec![6]));
    })
    .await;
}

/// Seeks in a row with nothing delivered between them: a seek is the
/// application's request, not a failure to back off from, so each one's
/// subscribe comes after the backoff's first delay, and a seek that waits
/// for the previous one's subscribe never meets the operation timeout.
#[tokio::test(start_paused = true)]
async fn seeks_in_a_row_with_nothing_delivered_between_them_all_return_ok() {
    let target = MessageId::new(1, 0);
    let net = FakeNetwork::new();
    guard("twelve seeks in a row", async {
        let (consumer, mut broker, mut id) = subscribed(&net, SubscriptionType::Exclusive).await;
        for n in 1..=12 {
            // Each seek answered at once: SEEK, then CLOSE_CONSUMER of the
            // old id, then the LOOKUP and SUBSCRIBE of the new one as they
            // come. From the second seek on, the seek first waits for the
            // previous one's subscribe.
            let serve = async {
                if n > 1 {
                    id = resubscribe(&mut broker).await;
                }
                let seek = broker.expect(Type::Seek).await;
                let body = seek.command.seek.as_ref().expect("body");
                assert_eq!(body.consumer_id, id, "seek {n} on the current subscription");
                broker.send(answer::success(body.request_id)).await;
                let close = broker.expect(Type::CloseConsumer).await;
                let body = close.command.close_consumer.as_ref().expect("body");
                broker.send(answer::success(body.request_id)).await;
            };
            let seeking = consumer.seek(target);
            tokio::pin!(seeking, serve);
            let done = tokio::select! {
                done = &mut seeking => done,
                () = &mut serve => seeking.await,
            };
            done.unwrap_or_else(|e| panic!("seek {n} in a row: {e}"));
        }
    })
    .await;
}

/// Answers the consumer's LOOKUP and SUBSCRIBE after a seek; returns the
/// new consumer id.
async fn resubscribe(broker: &mut FakeBroker) -> u64 {
    let lookup = broker.expect(Type::Lookup).await;
    super::reconnect::answer_lookup_here(broker, &lookup).await;
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    broker.send(answer::success(body.request_id)).await;
    broker.expect(Type::Flow).await;
    body.consumer_id
}

// A seek to the earliest message brings back every member of a batch,
// those acked before it too (with batch index ack each member's ACK went
// out alone): the broker forgot them with the seek, and so must the
// consumer.
#[tokio::test(start_paused = true)]
async fn a_seek_to_the_earliest_brings_back_batch_members_acked_before_it() {
    let net = FakeNetwork::new();
    guard("seek back over acked members", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Exclusive)
                .batch_index_ack(true)
        })
        .await;
        broker.send_frame(batch_message(id, 4, 4)).await;
        for _ in 0..2 {
            let m = consumer.receive().await.expect("receive");
            consumer.ack(&m).await.expect("ack");
        }
        // Members 0 and 1 acked on the broker: 2 and 3 left in the ack_set.
        loop {
            let ack = broker.expect(Type::Ack).await;
            let body = ack.command.ack.as_ref().expect("body");
            let request = body.request_id.expect("a request");
            broker.send(answer::ack_response(id, request)).await;
            if body.message_id.last().map(|m| m.ack_set.clone()) == Some(vec![0b1100]) {
                break;
            }
        }
        let asked = async {
            let seek = broker.expect(Type::Seek).await;
            let body = seek.command.seek.as_ref().expect("body");
            broker.send(answer::success(body.request_id)).await;
        };
        let (done, ()) = tokio::join!(consumer.seek(MessageId::EARLIEST), asked);
        done.expect("seek");
        let (again, _) = subscribed_again(&mut broker, id).await;
        broker.send_frame(batch_message(again, 4, 4)).await;
        let mut got = Vec::new();
        for _ in 0..4 {
            let m = consumer.receive().await.expect("receive");
            got.push(String::from_utf8_lossy(m.payload()).into_owned());
        }
        assert_eq!(got, ["m0", "m1", "m2", "m3"]);
    })
    .await;
}
