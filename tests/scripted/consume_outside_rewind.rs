//! Rewinds made elsewhere (an operator's reset-cursor, another consumer's
//! seek): Apache Pulsar closes the consumer, which subscribes again, and
//! sends from the reset point. What the broker confirmed it applied comes
//! back to the application; an ack that may have been lost with the
//! connection keeps its message's copies away (and is sent again).

use futures::FutureExt;

use super::*;

/// The broker closes consumer `id` and takes its new subscribe (LOOKUP,
/// SUBSCRIBE, FLOW); returns the new consumer id.
pub(crate) async fn closed_and_subscribed_again(broker: &mut FakeBroker, id: u64) -> u64 {
    broker.send(super::reconnect::close_consumer(id)).await;
    let lookup = broker.expect(Type::Lookup).await;
    super::reconnect::answer_lookup_here(broker, &lookup).await;
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    broker.send(answer::success(body.request_id)).await;
    broker.expect(Type::Flow).await;
    body.consumer_id
}

/// Reads ACK frames until they named `n` entries; answers each as Apache
/// Pulsar answers an ACK request if `answer`. Returns the entries.
async fn acks(broker: &mut FakeBroker, n: usize, answer: bool) -> Vec<u64> {
    let mut entries = Vec::new();
    while entries.len() < n {
        let frame = broker.recv().await.expect("the client's frames");
        let Some(ack) = frame.command.ack else {
            continue; // FLOWs in between
        };
        entries.extend(ack.message_id.iter().map(|i| i.entry_id));
        let request = ack.request_id.expect("every ACK is a request");
        if answer {
            broker
                .send(answer::ack_response(ack.consumer_id, request))
                .await;
        }
    }
    entries
}

/// Acks `msg` in a task of its own (with receipts the call waits for the
/// broker, which the test plays meanwhile); the task hands the consumer
/// back with the outcome.
fn ack_in_background(
    consumer: Consumer,
    msg: pulsar_wire::Message,
) -> tokio::task::JoinHandle<(Consumer, Result<(), pulsar_wire::ConsumerError>)> {
    tokio::spawn(async move {
        let acked = consumer.ack(&msg).await;
        (consumer, acked)
    })
}

/// The next ACK frame's command, past the FLOWs before it.
async fn next_ack(broker: &mut FakeBroker) -> Box<proto::CommandAck> {
    loop {
        let frame = broker.recv().await.expect("the client's frames");
        if let Some(ack) = frame.command.ack {
            return ack;
        }
    }
}

/// Sends entries `entries` to consumer `id`, each with `text`.
async fn send(
    broker: &mut FakeBroker,
    id: u64,
    entries: std::ops::RangeInclusive<u64>,
    text: &'static str,
) {
    for entry in entries {
        broker
            .send_frame(message(id, entry, text, Checksum::Valid))
            .await;
    }
}

/// Receives `n` messages; returns their entries.
async fn received(consumer: &mut Consumer, n: usize) -> Vec<u64> {
    let mut entries = Vec::new();
    for _ in 0..n {
        entries.push(consumer.receive().await.expect("receive").id().entry_id);
    }
    entries
}

#[tokio::test(start_paused = true)]
async fn acked_messages_come_back_after_a_reset_once_the_broker_confirmed_the_acks() {
    let net = FakeNetwork::new();
    guard("reset after confirmed acks", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        send(&mut broker, id, 1..=3, "first").await;
        for m in [1, 2, 3] {
            let msg = consumer.receive().await.expect("receive");
            assert_eq!(msg.id().entry_id, m);
            consumer.ack(&msg).await.expect("ack");
        }
        assert_eq!(acks(&mut broker, 3, true).await, [1, 2, 3]);
        // The consumer has taken in the broker's answers.
        crate::common::until_idle().await;
        // An operator resets the cursor to the start.
        let again = closed_and_subscribed_again(&mut broker, id).await;
        send(&mut broker, again, 1..=3, "again").await;
        assert_eq!(received(&mut consumer, 3).await, [1, 2, 3]);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_reset_below_a_confirmed_cumulative_ack_brings_its_messages_back() {
    let net = FakeNetwork::new();
    guard("reset below a confirmed cumulative ack", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Exclusive).await;
        send(&mut broker, id, 1..=3, "first").await;
        assert_eq!(received(&mut consumer, 2).await, [1, 2]);
        let third = consumer.receive().await.expect("receive");
        consumer.ack_cumulative(&third).await.expect("ack");
        assert_eq!(acks(&mut broker, 1, true).await, [3]);
        // The consumer has taken in the broker's answers.
        crate::common::until_idle().await;
        let again = closed_and_subscribed_again(&mut broker, id).await;
        send(&mut broker, again, 1..=3, "again").await;
        assert_eq!(received(&mut consumer, 3).await, [1, 2, 3]);
    })
    .await;
}

// The broker closed the consumer before it answered the ACKs: they may be
// lost, so the copies it sends are dropped and acked again, not handed out.
#[tokio::test(start_paused = true)]
async fn copies_of_acks_the_broker_did_not_confirm_are_dropped_and_acked_again() {
    let net = FakeNetwork::new();
    guard("reconnect before the acks were confirmed", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        send(&mut broker, id, 1..=3, "first").await;
        for _ in 0..3 {
            let msg = consumer.receive().await.expect("receive");
            consumer.ack(&msg).await.expect("ack");
        }
        assert_eq!(acks(&mut broker, 3, false).await, [1, 2, 3]);
        let again = closed_and_subscribed_again(&mut broker, id).await;
        send(&mut broker, again, 1..=4, "again").await;
        assert_eq!(received(&mut consumer, 1).await, [4], "1..3 dropped");
        assert_eq!(
            acks(&mut broker, 3, true).await,
            [1, 2, 3],
            "and acked again"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn with_receipts_a_reset_below_a_confirmed_cumulative_ack_brings_its_messages_back() {
    let net = FakeNetwork::new();
    guard(
        "reset below a cumulative ack confirmed by its receipt",
        async {
            let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
                b.subscription_type(SubscriptionType::Exclusive)
                    .ack_receipts(true)
            })
            .await;
            send(&mut broker, id, 1..=3, "first").await;
            assert_eq!(received(&mut consumer, 2).await, [1, 2]);
            let third = consumer.receive().await.expect("receive");
            let (ok, entries) =
                tokio::join!(consumer.ack_cumulative(&third), acks(&mut broker, 1, true));
            ok.expect("ack");
            assert_eq!(entries, [3]);
            let again = closed_and_subscribed_again(&mut broker, id).await;
            send(&mut broker, again, 1..=3, "again").await;
            assert_eq!(received(&mut consumer, 3).await, [1, 2, 3]);
        },
    )
    .await;
}

/// Reads ACK frames of entry 1 (batch index acks: its `ack_set` has a
/// bit set for each member still unacked) until they acked `members`;
/// answers each as Apache Pulsar answers an ACK request if `answer`.
async fn member_acks(broker: &mut FakeBroker, members: &[u32], answer: bool) {
    let mut acked = std::collections::BTreeSet::new();
    while !members.iter().all(|m| acked.contains(m)) {
        let frame = broker.recv().await.expect("the client's frames");
        let Some(ack) = frame.command.ack else {
            continue; // FLOWs in between
        };
        for id in &ack.message_id {
            assert_eq!(id.entry_id, 1, "only entry 1 is acked");
            let unacked = id.ack_set.first().copied().unwrap_or(0);
            acked.extend((0..3).filter(|m| unacked & (1 << m) == 0));
        }
        let request = ack.request_id.expect("every ACK is a request");
        if answer {
            broker
                .send(answer::ack_response(ack.consumer_id, request))
                .await;
        }
    }
    assert_eq!(
        acked.into_iter().collect::<Vec<_>>(),
        members,
        "only these members acked"
    );
}

/// Receives `n` messages; returns their batch indexes.
async fn received_members(consumer: &mut Consumer, n: usize) -> Vec<i32> {
    let mut members = Vec::new();
    for _ in 0..n {
        members.push(consumer.receive().await.expect("receive").id().batch_index);
    }
    members
}

/// With batch index ack, a Shared consumer receives a batch of three and
/// acks the first two members (each ACK carries the batch's `ack_set`);
/// the broker answers the ACKs if `confirmed`, then closes the consumer
/// and, once it subscribed again, sends the whole batch again (what an
/// operator's reset does: it clears the acked members). Returns the
/// members handed out from the copy.
async fn batch_copy_after_member_acks(net: &FakeNetwork, confirmed: bool) -> Vec<i32> {
    let (mut consumer, mut broker, id) = subscribed_with(net, |b| {
        b.subscription_type(SubscriptionType::Shared)
            .batch_index_ack(true)
    })
    .await;
    broker.send_frame(super::acks::batch(id, 1, 3)).await;
    for member in 0..3 {
        let msg = consumer.receive().await.expect("receive");
        assert_eq!(msg.id().batch_index, member);
        if member < 2 {
            consumer.ack(&msg).await.expect("ack");
        }
    }
    member_acks(&mut broker, &[0, 1], confirmed).await;
    // The consumer has taken in the broker's answers.
    crate::common::until_idle().await;
    let again = closed_and_subscribed_again(&mut broker, id).await;
    broker.send_frame(super::acks::batch(again, 1, 3)).await;
    if confirmed {
        received_members(&mut consumer, 3).await
    } else {
        let members = received_members(&mut consumer, 1).await;
        // The dropped members are acked again.
        member_acks(&mut broker, &[0, 1], true).await;
        members
    }
}

#[tokio::test(start_paused = true)]
async fn with_batch_index_ack_members_whose_acks_were_confirmed_come_back_after_a_reset() {
    let net = FakeNetwork::new();
    guard("reset after confirmed member acks", async {
        let members = batch_copy_after_member_acks(&net, true).await;
        assert_eq!(members, [0, 1, 2], "every member of the copy");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn with_batch_index_ack_copies_of_members_whose_acks_were_not_confirmed_are_dropped() {
    let net = FakeNetwork::new();
    guard("reconnect before the member acks were confirmed", async {
        let members = batch_copy_after_member_acks(&net, false).await;
        assert_eq!(members, [2], "only the member never acked");
    })
    .await;
}

// With receipts, an ACK whose answer was lost with the connection is sent
// again under the new consumer; its answer there confirms it, so a later
// reset brings the message back to the application.
#[tokio::test(start_paused = true)]
async fn with_receipts_an_ack_confirmed_after_a_reconnect_comes_back_after_a_reset() {
    let net = FakeNetwork::new();
    guard(
        "reset after an ack confirmed on the next connection",
        async {
            let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
                b.subscription_type(SubscriptionType::Shared)
                    .ack_receipts(true)
            })
            .await;
            send(&mut broker, id, 1..=1, "first").await;
            let msg = consumer.receive().await.expect("receive");
            let acking = ack_in_background(consumer, msg);
            // Applied, but the answer is lost with the consumer.
            assert_eq!(acks(&mut broker, 1, false).await, [1]);
            let again = closed_and_subscribed_again(&mut broker, id).await;
            assert_eq!(acks(&mut broker, 1, true).await, [1], "sent again");
            let (mut consumer, acked) = acking.await.expect("task");
            acked.expect("ack confirmed");
            // The consumer has taken in the broker's answer.
            crate::common::until_idle().await;
            let reset = closed_and_subscribed_again(&mut broker, again).await;
            send(&mut broker, reset, 1..=1, "again").await;
            assert_eq!(received(&mut consumer, 1).await, [1]);
        },
    )
    .await;
}

/// A Shared consumer with batch index ack and receipts, handed the first
/// member of a batch of four (entry 1): the consumer, its broker, its id
/// and that member.
async fn first_of_a_batch_of_four(
    net: &FakeNetwork,
) -> (Consumer, FakeBroker, u64, pulsar_wire::Message) {
    let (mut consumer, mut broker, id) = subscribed_with(net, |b| {
        b.subscription_type(SubscriptionType::Shared)
            .batch_index_ack(true)
            .ack_receipts(true)
    })
    .await;
    broker.send_frame(super::acks::batch(id, 1, 4)).await;
    let first = consumer.receive().await.expect("receive");
    (consumer, broker, id, first)
}

// With batch index ack, an ACK lost with the connection goes out again
// after the reconnect; if that reconnect was an operator's reset, the
// members acked before it are unacked on the broker. The ACK sent again
// acks its own member alone, never those.
#[tokio::test(start_paused = true)]
async fn with_batch_index_ack_an_ack_sent_again_after_a_reset_acks_its_member_alone() {
    let net = FakeNetwork::new();
    guard("member ack sent again after a reset", async {
        let (mut consumer, mut broker, id, first) = first_of_a_batch_of_four(&net).await;
        let (acked, ()) = tokio::join!(consumer.ack(&first), member_acks(&mut broker, &[0], true));
        acked.expect("ack confirmed");
        let second = consumer.receive().await.expect("receive");
        let acking = ack_in_background(consumer, second);
        // Its answer is lost with the consumer, which the reset closes.
        member_acks(&mut broker, &[1], false).await;
        let again = closed_and_subscribed_again(&mut broker, id).await;
        let frame = loop {
            let frame = broker.recv().await.expect("the client's frames");
            if frame.command.ack.is_some() {
                break frame;
            }
        };
        let ack = frame.command.ack.expect("an ACK");
        assert_eq!(ack.consumer_id, again);
        let set = ack.message_id[0].ack_set.first().copied().unwrap_or(0);
        assert_eq!(set & 0b1111, 0b1101, "member 1 alone is acked");
        let request = ack.request_id.expect("every ACK is a request");
        broker.send(answer::ack_response(again, request)).await;
        let (_consumer, acked) = acking.await.expect("task");
        acked.expect("ack confirmed");
    })
    .await;
}

// The broker answers the ACKs and then closes the consumer (a reset-cursor
// right after them): the answers are on the wire before the close, so the
// acks are confirmed however the consumer's task orders the two, and the
// copies after the reset are handed out. Each round is a fresh chance for
// the close to be taken first.
#[tokio::test(start_paused = true)]
async fn acks_answered_just_before_the_close_count_as_confirmed() {
    let net = FakeNetwork::new();
    guard("reset right after the answers", async {
        let (mut consumer, mut broker, mut id) = subscribed(&net, SubscriptionType::Shared).await;
        for round in 0..10 {
            let first = round * 10 + 1;
            send(&mut broker, id, first..=first + 2, "first").await;
            for _ in 0..3 {
                let msg = consumer.receive().await.expect("receive");
                consumer.ack(&msg).await.expect("ack");
            }
            let entries: Vec<u64> = (first..=first + 2).collect();
            assert_eq!(acks(&mut broker, 3, true).await, entries);
            id = closed_and_subscribed_again(&mut broker, id).await;
            send(&mut broker, id, first..=first + 2, "again").await;
            assert_eq!(received(&mut consumer, 3).await, entries, "round {round}");
        }
    })
    .await;
}

// With batch index ack, the ack of a batch's last member names that member
// alone, as the others did: the broker acks the entry once its members are
// all acked there. An ACK of the whole entry, sent again after a reset
// that came before its answer, would ack on the broker the members the
// reset brought back.
#[tokio::test(start_paused = true)]
async fn the_ack_of_a_batchs_last_member_names_that_member_alone() {
    let net = FakeNetwork::new();
    guard("last member of a batch, batch index ack", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .batch_index_ack(true)
        })
        .await;
        broker
            .send_frame(super::seek::batch_message(id, 1, 2))
            .await;
        let first = consumer.receive().await.expect("m0");
        let last = consumer.receive().await.expect("m1");
        consumer.ack(&first).await.expect("ack m0");
        let frame = broker.expect(Type::Ack).await;
        let ack = frame.command.ack.expect("body");
        assert_eq!(ack.message_id[0].ack_set, [0b10], "member 0 alone");
        let request = ack.request_id.expect("a request");
        broker.send(answer::ack_response(id, request)).await;
        consumer.ack(&last).await.expect("ack m1");
        let frame = broker.expect(Type::Ack).await;
        let ack = frame.command.ack.expect("body");
        assert_eq!(ack.message_id[0].ack_set, [0b01], "member 1 alone");
        // Unanswered: a reset closes the consumer first. Its copy of the
        // batch hands member 0 out again (its ack was confirmed) and acks
        // member 1 again, alone (its ack may have been lost).
        let again = closed_and_subscribed_again(&mut broker, id).await;
        broker
            .send_frame(super::seek::batch_message(again, 1, 2))
            .await;
        let m = consumer.receive().await.expect("m0 again");
        assert_eq!(m.id().batch_index, 0);
        let frame = broker.expect(Type::Ack).await;
        let ack = frame.command.ack.expect("body");
        assert_eq!(
            (ack.consumer_id, ack.message_id[0].ack_set.clone()),
            (again, vec![0b01])
        );
    })
    .await;
}

// The application acks a message while its consumer subscribes again
// after a reset; the reset's copy comes before that ack is answered, so
// it is dropped, and not acked again: its ACK is on its way. That ACK is
// answered before the next reset: the ack was applied, so that reset's
// copy is the operator's, and handed out.
#[tokio::test(start_paused = true)]
async fn a_copy_dropped_beside_its_ack_on_its_way_comes_back_after_the_next_reset() {
    let net = FakeNetwork::new();
    guard(
        "two resets, an ack and its copy's ack between them",
        async {
            let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
            send(&mut broker, id, 1..=1, "first").await;
            let msg = consumer.receive().await.expect("receive");
            // The first reset closes the consumer; the ack waits for the next.
            broker.send(super::reconnect::close_consumer(id)).await;
            crate::common::until_idle().await;
            consumer.ack(&msg).await.expect("ack");
            let lookup = broker.expect(Type::Lookup).await;
            super::reconnect::answer_lookup_here(&mut broker, &lookup).await;
            let subscribe = broker.expect(Type::Subscribe).await;
            let body = subscribe.command.subscribe.as_ref().expect("body");
            broker.send(answer::success(body.request_id)).await;
            let again = body.consumer_id;
            // The application's ACK and the FLOW, in either order.
            let mut first_ack = None;
            while first_ack.is_none() {
                let frame = broker.recv().await.expect("the client's frames");
                if let Some(ack) = frame.command.ack {
                    assert_eq!(ack.message_id[0].entry_id, 1);
                    first_ack = ack.request_id;
                }
            }
            // The reset's copy, sent before the broker read the ACK.
            send(&mut broker, again, 1..=2, "again").await;
            assert_eq!(received(&mut consumer, 1).await, [2], "1 dropped");
            let request = first_ack.expect("every ACK is a request");
            broker.send(answer::ack_response(again, request)).await;
            crate::common::until_idle().await;
            // No ACK of the copy went out (only the FLOW may have).
            while let Some(frame) = broker.recv().now_or_never() {
                let frame = frame.expect("the client's frames");
                assert_eq!(frame.command.r#type(), Type::Flow);
            }
            let third = closed_and_subscribed_again(&mut broker, again).await;
            send(&mut broker, third, 1..=2, "third").await;
            assert_eq!(received(&mut consumer, 2).await, [1, 2]);
        },
    )
    .await;
}

// Exclusive, grouped acks: the application's ACK went out; a nack's
// rewind brought the message again before the broker read it, so the copy
// was dropped and its ack again waits in the group when the ACK is
// answered and an operator resets the cursor. The broker had applied the
// ack: the waiting one is not sent under the new consumer, where it would
// ack the reset's copy the application never saw since.
#[tokio::test(start_paused = true)]
async fn a_grouped_ack_again_of_an_applied_message_is_not_sent_after_a_reset() {
    let net = FakeNetwork::new();
    guard("a grouped ack again across a reset", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Exclusive)
                .ack_group_time(Duration::from_millis(100))
        })
        .await;
        send(&mut broker, id, 1..=2, "first").await;
        let one = consumer.receive().await.expect("receive");
        consumer.ack(&one).await.expect("ack");
        let two = consumer.receive().await.expect("receive");
        consumer.nack(&two).expect("nack");
        // The application asks for more: the rewind goes out; the group's
        // ACK too, unanswered for now.
        let (next, first) = tokio::join!(consumer.receive(), async {
            let mut first = None;
            let mut rewound = false;
            while first.is_none() || !rewound {
                let frame = broker.recv().await.expect("the client's frames");
                rewound |= frame.command.r#type() == Type::RedeliverUnacknowledgedMessages;
                if let Some(ack) = frame.command.ack {
                    assert_eq!(ack.message_id[0].entry_id, 1);
                    first = ack.request_id;
                }
            }
            // The rewind's copies, sent before the broker read the ACK.
            send(&mut broker, id, 1..=2, "rewound").await;
            first.expect("every ACK is a request")
        });
        assert_eq!(next.expect("receive").id().entry_id, 2, "1 dropped");
        crate::common::until_idle().await;
        broker.send(answer::ack_response(id, first)).await;
        let again = closed_and_subscribed_again(&mut broker, id).await;
        send(&mut broker, again, 1..=2, "again").await;
        let taken = [
            consumer.receive().await.expect("receive"),
            consumer.receive().await.expect("receive"),
        ];
        assert_eq!(taken.each_ref().map(|m| m.id().entry_id), [1, 2]);
        consumer.ack(&taken[1]).await.expect("ack");
        loop {
            let frame = broker.recv().await.expect("the client's frames");
            let Some(ack) = frame.command.ack else {
                continue;
            };
            let entries: Vec<u64> = ack.message_id.iter().map(|i| i.entry_id).collect();
            assert!(
                !entries.contains(&1),
                "entry 1 acked after the reset: {entries:?}"
            );
            if entries.contains(&2) {
                break;
            }
        }
    })
    .await;
}

// One pass over the consumer's actions sends two ACK frames (a nack's
// REDELIVER between them); the broker answers the first and closes the
// consumer (a reset) before it reads the second. The first's ack was
// applied: the reset's copy of its message is handed out; the second's
// may be lost, so its message's copy is dropped and acked again.
#[tokio::test(start_paused = true)]
async fn acks_of_an_answered_frame_count_as_applied_when_a_later_frame_is_not() {
    let net = FakeNetwork::new();
    guard("a pass of two ACK frames, the first answered", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        send(&mut broker, id, 1..=4, "first").await;
        // Taken, acked and nacked without yielding: the consumer's task
        // sends ACK [1], REDELIVER [2], ACK [3] in one pass.
        let taken = [
            consumer.receive().await.expect("receive"),
            consumer.receive().await.expect("receive"),
            consumer.receive().await.expect("receive"),
        ];
        consumer.ack(&taken[0]).await.expect("ack");
        consumer.nack(&taken[1]).expect("nack");
        consumer.ack(&taken[2]).await.expect("ack");
        let mut frames = Vec::new();
        while frames.len() < 2 {
            let frame = broker.recv().await.expect("the client's frames");
            if let Some(ack) = frame.command.ack {
                let entries: Vec<u64> = ack.message_id.iter().map(|i| i.entry_id).collect();
                frames.push((entries, ack.request_id.expect("a request")));
            }
        }
        assert_eq!(frames[0].0, [1]);
        assert_eq!(frames[1].0, [3]);
        broker.send(answer::ack_response(id, frames[0].1)).await;
        let again = closed_and_subscribed_again(&mut broker, id).await;
        send(&mut broker, again, 1..=4, "again").await;
        assert_eq!(received(&mut consumer, 3).await, [1, 2, 4], "3 dropped");
    })
    .await;
}

// Grouped acks and batch index ack: a plain ack waits in the group when a
// member's ACK (with its ack_set, never grouped) goes out and is answered.
// That member's ack was applied, though the group's is not sent yet: an
// operator's reset brings the member back.
#[tokio::test(start_paused = true)]
async fn an_answered_member_ack_counts_as_applied_while_a_group_waits() {
    let net = FakeNetwork::new();
    guard("a member ack answered beside a waiting group", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .batch_index_ack(true)
                .ack_group_time(Duration::from_millis(100))
        })
        .await;
        broker
            .send_frame(message(id, 2, "plain", Checksum::Valid))
            .await;
        broker.send_frame(super::acks::batch(id, 1, 3)).await;
        let plain = consumer.receive().await.expect("receive");
        assert_eq!(plain.id().entry_id, 2);
        consumer.ack(&plain).await.expect("ack");
        let member = consumer.receive().await.expect("receive");
        assert_eq!(member.id().batch_index, 0);
        consumer.ack(&member).await.expect("ack");
        member_acks(&mut broker, &[0], true).await;
        // The consumer has taken in the answer; the group still waits.
        crate::common::until_idle().await;
        let again = closed_and_subscribed_again(&mut broker, id).await;
        broker.send_frame(super::acks::batch(again, 1, 3)).await;
        assert_eq!(received_members(&mut consumer, 3).await, [0, 1, 2]);
    })
    .await;
}

// Batch index ack with receipts: the application's ACK of a member went
// out, and again after an unload; a copy of its entry came before the
// broker answered, so the copy's member was dropped, and not acked again
// (its ACK was on its way). The ACK is answered (applied) and an operator
// resets the cursor: no ACK of the member goes under the new consumer,
// where it would ack the reset's copy, which the application is handed.
#[tokio::test(start_paused = true)]
async fn with_batch_index_ack_a_member_dropped_beside_its_ack_on_its_way_comes_back_after_a_reset()
{
    let net = FakeNetwork::new();
    guard("a member's ack again across a reset", async {
        let (consumer, mut broker, id, first) = first_of_a_batch_of_four(&net).await;
        let acking = ack_in_background(consumer, first);
        // The ACK, lost with an unload; sent again under the new consumer.
        member_acks(&mut broker, &[0], false).await;
        let unloaded = closed_and_subscribed_again(&mut broker, id).await;
        let request = loop {
            let frame = broker.recv().await.expect("the client's frames");
            let Some(ack) = frame.command.ack else {
                continue; // FLOWs in between
            };
            assert_eq!(ack.consumer_id, unloaded);
            let set = ack.message_id[0].ack_set.first().copied().unwrap_or(0);
            assert_eq!(set & 0b1111, 0b1110, "member 0 alone is acked");
            break ack.request_id.expect("every ACK is a request");
        };
        // A copy of the entry, sent before the broker read the ACK.
        broker.send_frame(super::acks::batch(unloaded, 1, 4)).await;
        crate::common::until_idle().await;
        broker.send(answer::ack_response(unloaded, request)).await;
        let (mut consumer, acked) = acking.await.expect("task");
        acked.expect("ack confirmed");
        crate::common::until_idle().await;
        let reset = closed_and_subscribed_again(&mut broker, unloaded).await;
        broker.send_frame(super::acks::batch(reset, 1, 4)).await;
        let taken = [
            consumer.receive().await.expect("receive"),
            consumer.receive().await.expect("receive"),
        ];
        assert_eq!(taken.each_ref().map(|m| m.id().batch_index), [0, 1]);
        let acked = tokio::spawn(async move { consumer.ack(&taken[1]).await });
        loop {
            let frame = broker.recv().await.expect("the client's frames");
            let Some(ack) = frame.command.ack else {
                continue;
            };
            let set = ack.message_id[0].ack_set.first().copied().unwrap_or(0);
            assert_ne!(set & 1, 0, "member 0 acked after the reset: {set:#b}");
            if set & 0b10 == 0 {
                let request = ack.request_id.expect("every ACK is a request");
                broker.send(answer::ack_response(reset, request)).await;
                break;
            }
        }
        acked.await.expect("task").expect("ack confirmed");
    })
    .await;
}

// With receipts: the application's ACK went out, and again after an
// unload; a copy of the message comes before the broker answered it. The
// copy is dropped and not acked again: its ACK will be answered, or sent
// again under the next subscription. An ack again could still be on its
// way when an operator resets the cursor, and ack the reset's copy unseen.
#[tokio::test(start_paused = true)]
async fn a_copy_that_comes_while_its_ack_is_on_its_way_is_not_acked_again() {
    let net = FakeNetwork::new();
    guard("a copy beside its ACK on its way", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_receipts(true)
        })
        .await;
        send(&mut broker, id, 1..=1, "first").await;
        let one = consumer.receive().await.expect("receive");
        let acking = ack_in_background(consumer, one);
        assert_eq!(acks(&mut broker, 1, false).await, [1]);
        let unloaded = closed_and_subscribed_again(&mut broker, id).await;
        let again = next_ack(&mut broker).await;
        assert_eq!(again.message_id[0].entry_id, 1, "sent again");
        // The copy, sent before the broker read the ACK; then a new message.
        send(&mut broker, unloaded, 1..=1, "copy").await;
        send(&mut broker, unloaded, 2..=2, "second").await;
        let request = again.request_id.expect("every ACK is a request");
        broker.send(answer::ack_response(unloaded, request)).await;
        let (mut consumer, acked) = acking.await.expect("task");
        acked.expect("ack confirmed");
        let two = consumer.receive().await.expect("receive");
        assert_eq!(two.id().entry_id, 2, "the copy of 1 is dropped");
        let acked = tokio::spawn(async move { consumer.ack(&two).await });
        let next = next_ack(&mut broker).await;
        let entries: Vec<u64> = next.message_id.iter().map(|i| i.entry_id).collect();
        assert_eq!(entries, [2], "the copy of 1 was acked again");
        let request = next.request_id.expect("every ACK is a request");
        broker.send(answer::ack_response(unloaded, request)).await;
        acked.await.expect("task").expect("ack confirmed");
    })
    .await;
}

// Batch index ack and grouped acks, without receipts: a plain ack waits
// in the group when a member's ACK (sent at once, as member acks are) is
// lost with the consumer, which a reset closes. The member's ack may have
// been lost, though recorded after the group began: the reset's copy of
// the member is dropped and acked again (nothing else sends that ack).
#[tokio::test(start_paused = true)]
async fn a_member_ack_sent_beside_a_waiting_group_and_lost_is_acked_again_on_its_copy() {
    let net = FakeNetwork::new();
    guard("a member ACK lost beside a group", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Exclusive)
                .batch_index_ack(true)
                .ack_group_time(Duration::from_millis(100))
        })
        .await;
        send(&mut broker, id, 1..=1, "plain").await;
        broker.send_frame(super::acks::batch(id, 2, 2)).await;
        let plain = consumer.receive().await.expect("receive");
        consumer.ack(&plain).await.expect("ack");
        let member = consumer.receive().await.expect("receive");
        assert_eq!(member.id().batch_index, 0);
        consumer.ack(&member).await.expect("ack");
        // The member's ACK goes at once; the broker never reads it.
        let lost = next_ack(&mut broker).await;
        assert_eq!(lost.message_id[0].entry_id, 2);
        let reset = closed_and_subscribed_again(&mut broker, id).await;
        broker.send_frame(super::acks::batch(reset, 2, 2)).await;
        let next = consumer.receive().await.expect("receive");
        assert_eq!(next.id().batch_index, 1, "member 0 dropped");
        let member_acks = loop {
            let frame = broker.recv().await.expect("the client's frames");
            let Some(ack) = frame.command.ack else {
                continue;
            };
            let request = ack.request_id.expect("every ACK is a request");
            broker.send(answer::ack_response(reset, request)).await;
            let sets: Vec<i64> = ack
                .message_id
                .iter()
                .filter(|i| i.entry_id == 2)
                .map(|i| i.ack_set.first().copied().unwrap_or(0))
                .collect();
            if !sets.is_empty() {
                break sets;
            }
        };
        assert_eq!(member_acks, [0b10], "member 0 acked again");
    })
    .await;
}

// Without batch index ack the broker never hears of a member's ack until
// its whole batch is acked, and a consumer cannot tell an operator's
// reset from an unload: each closes it. A batch that comes again after a
// reconnect hands out every member, as the Java client's does (its
// members' acks live with the copy they were made on), so a reset's copy
// is never acked for members the application was not handed since.
#[tokio::test(start_paused = true)]
async fn without_batch_index_ack_a_batch_acked_in_part_comes_whole_after_a_reconnect() {
    let net = FakeNetwork::new();
    guard("partly acked batch, then a reconnect", async {
        let (mut consumer, mut broker, id) =
            subscribed_with(&net, |b| b.subscription_type(SubscriptionType::Shared)).await;
        broker.send_frame(super::acks::batch(id, 1, 3)).await;
        let first = consumer.receive().await.expect("receive");
        consumer.ack(&first).await.expect("member 0 recorded");
        let again = closed_and_subscribed_again(&mut broker, id).await;
        broker.send_frame(super::acks::batch(again, 1, 3)).await;
        let copy = [
            consumer.receive().await.expect("receive"),
            consumer.receive().await.expect("receive"),
            consumer.receive().await.expect("receive"),
        ];
        assert_eq!(copy.each_ref().map(|m| m.id().batch_index), [0, 1, 2]);
        for m in &copy {
            consumer.ack(m).await.expect("ack");
        }
        let ack = next_ack(&mut broker).await;
        assert_eq!(ack.consumer_id, again);
        let named: Vec<(u64, Option<i32>)> = ack
            .message_id
            .iter()
            .map(|i| (i.entry_id, i.batch_index))
            .collect();
        assert_eq!(named, [(1, None)], "the entry, once its copy is acked");
    })
    .await;
}

// A member the application acks after a reconnect, from the batch handed
// out before it, keeps its copy away (it was acked since); a second
// reconnect (a reset, for all the consumer knows) forgets it again.
#[tokio::test(start_paused = true)]
async fn without_batch_index_ack_a_member_acked_between_reconnects_is_forgotten_at_the_next() {
    let net = FakeNetwork::new();
    guard("member acked between two reconnects", async {
        let (mut consumer, mut broker, id) =
            subscribed_with(&net, |b| b.subscription_type(SubscriptionType::Shared)).await;
        broker.send_frame(super::acks::batch(id, 1, 3)).await;
        let first = consumer.receive().await.expect("receive");
        let unloaded = closed_and_subscribed_again(&mut broker, id).await;
        consumer.ack(&first).await.expect("member 0 recorded");
        broker.send_frame(super::acks::batch(unloaded, 1, 3)).await;
        assert_eq!(received_members(&mut consumer, 2).await, [1, 2]);
        let reset = closed_and_subscribed_again(&mut broker, unloaded).await;
        broker.send_frame(super::acks::batch(reset, 1, 3)).await;
        assert_eq!(received_members(&mut consumer, 3).await, [0, 1, 2]);
    })
    .await;
}
