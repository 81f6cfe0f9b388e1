//! Acks against the scripted broker: with receipts an ack is answered by the
//! broker's ACK_RESPONSE for the ACK that covers it, also when the consumer
//! subscribes again meanwhile; grouped acks pending at a reconnect go out
//! under the new consumer id.

use super::reconnect::{answer_lookup_here, close_consumer};
use super::*;

/// A Shared consumer with ack receipts: consumer, broker, consumer id.
async fn with_receipts(net: &FakeNetwork) -> (Consumer, FakeBroker, u64) {
    subscribed_with(net, |b| {
        b.subscription_type(SubscriptionType::Shared)
            .ack_receipts(true)
    })
    .await
}

/// The broker sends message 1; the consumer receives it.
async fn one_message(
    consumer: &mut Consumer,
    broker: &mut FakeBroker,
    id: u64,
) -> pulsar_wire::Message {
    broker
        .send_frame(message(id, 1, "m", Checksum::Valid))
        .await;
    consumer.receive().await.expect("receive")
}

/// The next ACK: its consumer id, entries and request id.
async fn expect_ack(broker: &mut FakeBroker) -> (u64, Vec<u64>, Option<u64>) {
    let frame = broker.expect(Type::Ack).await;
    let body = frame.command.ack.as_ref().expect("body");
    let entries = body.message_id.iter().map(|m| m.entry_id).collect();
    (body.consumer_id, entries, body.request_id)
}

/// Answers LOOKUP, SUBSCRIBE and expects the FLOW: the consumer id.
async fn subscribe_again(broker: &mut FakeBroker) -> u64 {
    let lookup = broker.expect(Type::Lookup).await;
    answer_lookup_here(broker, &lookup).await;
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    broker.send(answer::success(body.request_id)).await;
    broker.expect(Type::Flow).await;
    body.consumer_id
}

/// A MESSAGE frame carrying one batch of `size` members as entry `entry`.
pub(super) fn batch(consumer: u64, entry: u64, size: i32) -> Frame {
    let mut data = bytes::BytesMut::new();
    for i in 0..size {
        let meta = proto::SingleMessageMetadata {
            payload_size: 1,
            ..proto::SingleMessageMetadata::default()
        };
        pulsar_wire::wire::batch::write_member(&meta, &[b'a' + i as u8], &mut data);
    }
    let mut frame = message(consumer, entry, "", Checksum::Valid);
    let payload = frame.payload.as_mut().expect("payload");
    payload.metadata.num_messages_in_batch = Some(size);
    payload.data = data.freeze();
    frame
}

#[tokio::test(start_paused = true)]
async fn an_ack_made_while_subscribing_again_is_confirmed_by_the_new_consumer() {
    let net = FakeNetwork::new();
    guard("ack while resubscribing", async {
        let (mut consumer, mut broker, id) = with_receipts(&net).await;
        let m = one_message(&mut consumer, &mut broker, id).await;
        broker.send(close_consumer(id)).await;
        let lookup = broker.expect(Type::Lookup).await;
        // Subscribing again: the ack waits, it is not answered at once.
        let acking = tokio::spawn(async move { consumer.ack(&m).await });
        answer_lookup_here(&mut broker, &lookup).await;
        let subscribe = broker.expect(Type::Subscribe).await;
        let body = subscribe.command.subscribe.as_ref().expect("body");
        let again = body.consumer_id;
        broker.send(answer::success(body.request_id)).await;
        broker.expect(Type::Flow).await;
        let (consumer_id, entries, request) = expect_ack(&mut broker).await;
        assert_eq!(
            (consumer_id, entries),
            (again, vec![1]),
            "as the new consumer"
        );
        assert!(
            !acking.is_finished(),
            "answered before the broker confirmed"
        );
        broker
            .send(answer::ack_response(
                again,
                request.expect("a receipt request"),
            ))
            .await;
        acking.await.expect("task").expect("confirmed");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_ack_in_flight_when_the_consumer_is_closed_is_sent_again_as_the_new_one() {
    let net = FakeNetwork::new();
    guard("ack in flight at a close", async {
        let (mut consumer, mut broker, id) = with_receipts(&net).await;
        let m = one_message(&mut consumer, &mut broker, id).await;
        let acking = tokio::spawn(async move { consumer.ack(&m).await });
        let (old, _, _) = expect_ack(&mut broker).await;
        assert_eq!(old, id);
        // The broker closes the consumer without answering the ACK.
        broker.send(close_consumer(id)).await;
        let again = subscribe_again(&mut broker).await;
        let (consumer_id, entries, request) = expect_ack(&mut broker).await;
        assert_eq!((consumer_id, entries), (again, vec![1]));
        broker
            .send(answer::ack_response(again, request.expect("request")))
            .await;
        acking.await.expect("task").expect("confirmed");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn grouped_acks_pending_at_a_reconnect_go_out_under_the_new_consumer_id() {
    let net = FakeNetwork::new();
    guard("grouped acks across a reconnect", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_group_time(Duration::from_millis(100))
        })
        .await;
        for entry in 1..=2 {
            broker
                .send_frame(message(id, entry, "m", Checksum::Valid))
                .await;
        }
        for _ in 0..2 {
            let m = consumer.receive().await.expect("receive");
            consumer.ack(&m).await.expect("ack");
        }
        broker.send(close_consumer(id)).await;
        // Nothing with the old id: the next frames are the subscribe, then
        // the grouped ACK as the new consumer.
        let again = subscribe_again(&mut broker).await;
        let (consumer_id, entries, _) = expect_ack(&mut broker).await;
        assert_eq!((consumer_id, entries), (again, vec![1, 2]));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_member_ack_with_receipt_is_answered_at_once_and_the_last_waits_for_its_entry() {
    let net = FakeNetwork::new();
    guard("member ack receipt", async {
        let (mut consumer, mut broker, id) = with_receipts(&net).await;
        broker.send_frame(batch(id, 4, 2)).await;
        let first = consumer.receive().await.expect("member 0");
        // The plainest loop: receive, then ack. Member 0's ack never waits
        // for an ack the application has not made yet.
        consumer.ack(&first).await.expect("member 0 recorded");
        let second = consumer.receive().await.expect("member 1");
        let c = consumer.clone();
        let second_ack = tokio::spawn(async move { c.ack(&second).await });
        // The last member completes the entry: its ack waits for the
        // broker's answer to the entry's ACK.
        let (_, entries, request) = expect_ack(&mut broker).await;
        assert_eq!(entries, [4], "one ACK for the entry");
        assert!(!second_ack.is_finished());
        broker
            .send(answer::ack_response(id, request.expect("request")))
            .await;
        second_ack.await.expect("task").expect("member 1 confirmed");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_member_ack_of_a_batch_left_incomplete_at_close_sends_no_ack_for_the_entry() {
    let net = FakeNetwork::new();
    guard("member ack at close", async {
        let (mut consumer, mut broker, id) = with_receipts(&net).await;
        broker.send_frame(batch(id, 4, 2)).await;
        let first = consumer.receive().await.expect("member 0");
        consumer.ack(&first).await.expect("member 0 recorded");
        let closing = tokio::spawn(async move { consumer.close().await });
        // Member 1 is not acked: the entry stays unacked on the broker
        // (its batch comes back whole), and no ACK claims otherwise.
        let close = broker.expect(Type::CloseConsumer).await;
        let request = close.command.close_consumer.as_ref().map(|c| c.request_id);
        broker
            .send(answer::success(request.expect("request")))
            .await;
        closing.await.expect("task").expect("closed");
    })
    .await;
}
