//! A pattern consumer under topic churn, on a broker with topic-list
//! watchers (paused clock): topics made and deleted one after another,
//! each read from and acked, leave nothing behind in the consumer: its
//! live heap is the same after the last thousand topics as after the
//! first. A message of a topic that left is still acked `Ok`, and a topic
//! that comes back is read again, by a new subscription.

use super::*;
use crate::hostile::live_bytes;

/// Topics made and deleted, one at a time.
const TOPICS: usize = 2_000;

/// What the consumer's heap may grow by between the first half of the
/// churn and the second: noise (a map or a buffer that doubled), far
/// below what a thousand topics kept would take.
const FLAT: isize = 64 * 1024;

/// The next frame from the client; periodic listings (beside the watcher)
/// are answered "unchanged" on the way.
async fn next_frame(broker: &mut FakeBroker) -> pulsar_wire::wire::Frame {
    loop {
        let frame = broker.recv().await.expect("open");
        let Some(listing) = frame.command.get_topics_of_namespace.as_ref() else {
            return frame;
        };
        let hash = listing.topics_hash.clone().unwrap_or_default();
        let unchanged = topics_answer(listing.request_id, &[], &hash, false);
        broker.send(unchanged).await;
    }
}

/// The watcher reports `topic` made (`hash` counts the updates); answers
/// until it is subscribed and its first FLOW came: returns its consumer id.
async fn join(broker: &mut FakeBroker, watcher: u64, topic: &str, hash: &mut u64) -> u64 {
    *hash += 1;
    let made = watch_update(watcher, &[topic], &[], &format!("churn-{hash}"));
    broker.send(made).await;
    let mut subscribed = None;
    loop {
        let frame = next_frame(broker).await;
        match frame.command.r#type() {
            Type::PartitionedMetadata => {
                assert_eq!(topic_of(&frame), topic);
                broker.send(answer::partitions(request_id(&frame), 0)).await;
            }
            Type::Lookup => answer_lookup(broker, request_id(&frame)).await,
            Type::Subscribe => {
                let body = frame.command.subscribe.as_ref().expect("body");
                assert_eq!(body.topic, topic);
                subscribed = Some(body.consumer_id);
                broker.send(answer::success(body.request_id)).await;
            }
            Type::Flow => {
                let body = frame.command.flow.as_ref().expect("body");
                assert_eq!(Some(body.consumer_id), subscribed);
                return body.consumer_id;
            }
            other => panic!("unexpected {other:?} while {topic} joins"),
        }
    }
}

/// The watcher reports `topic` deleted; its consumer `id` is closed.
async fn leave(broker: &mut FakeBroker, watcher: u64, topic: &str, id: u64, hash: &mut u64) {
    *hash += 1;
    let deleted = watch_update(watcher, &[], &[topic], &format!("churn-{hash}"));
    broker.send(deleted).await;
    let frame = next_frame(broker).await;
    let body = frame
        .command
        .close_consumer
        .as_ref()
        .expect("CLOSE_CONSUMER");
    assert_eq!(body.consumer_id, id, "{topic}");
    broker.send(answer::success(body.request_id)).await;
}

/// The broker delivers message `entry` of `topic` to consumer `id`; the
/// application receives it.
async fn one_message(
    broker: &mut FakeBroker,
    consumer: &mut Consumer,
    (id, entry): (u64, u64),
    topic: &str,
) -> Message {
    broker
        .send_frame(message(id, entry, "churn", Checksum::Absent))
        .await;
    let msg = consumer.receive().await.expect("message");
    assert_eq!(msg.topic(), topic);
    msg
}

/// This thread's live heap once every task is idle (the paused clock
/// moves only then).
async fn settled_heap() -> isize {
    crate::common::until_idle().await;
    live_bytes()
}

#[tokio::test(start_paused = true)]
async fn a_pattern_consumer_frees_what_it_kept_for_topics_that_left() {
    let net = FakeNetwork::new();
    init_tracing();
    let mut svc = net.listen(SERVICE);
    let week = Duration::from_secs(7 * 24 * 3600);
    guard_for("topic churn", week, async {
        let (mut consumer, mut broker, _, watcher) = watched(&net, &mut svc).await;
        let mut hash = 0;
        let mut late = None;
        let mut heap = Vec::new();
        for i in 0..TOPICS {
            let topic = full(&format!("pat-churn-{i}"));
            let id = join(&mut broker, watcher, &topic, &mut hash).await;
            let msg = one_message(&mut broker, &mut consumer, (id, 0), &topic).await;
            if i == TOPICS - 2 {
                late = Some(msg);
            } else {
                consumer.ack(&msg).await.expect("ack");
                let ack = next_frame(&mut broker).await;
                let body = ack.command.ack.as_ref().expect("ACK");
                assert_eq!(body.consumer_id, id);
                // Answered, as a broker answers every ACK request.
                let request = body.request_id.expect("an ACK request");
                broker.send(answer::ack_response(id, request)).await;
            }
            leave(&mut broker, watcher, &topic, id, &mut hash).await;
            if i + 1 == TOPICS / 2 || i + 1 == TOPICS {
                heap.push(settled_heap().await);
            }
        }
        let grown = heap[1] - heap[0];
        assert!(
            grown < FLAT,
            "the heap grew by {grown} bytes over the last {} topics",
            TOPICS / 2
        );
        assert_eq!(consumer.topics(), [full("pat-a")]);

        // A message of a topic that left is acked without complaint.
        let late = late.expect("held back");
        consumer.ack(&late).await.expect("a late ack");

        // A topic that comes back is read again, by a new subscription.
        let first = full("pat-churn-0");
        let id = join(&mut broker, watcher, &first, &mut hash).await;
        one_message(&mut broker, &mut consumer, (id, 0), &first).await;
        let read: std::collections::BTreeSet<String> = consumer.topics().into_iter().collect();
        assert_eq!(read, [full("pat-a"), first].into_iter().collect());
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn subs_moved_by_freeing_keep_their_events_subscribe_attempts_and_acks() {
    let net = FakeNetwork::new();
    init_tracing();
    let mut svc = net.listen(SERVICE);
    guard("subs moved", async {
        let (mut consumer, mut broker, a_id, watcher) =
            watched_with(&net, &mut svc, |b| b.ack_receipts(true)).await;
        let (a, b, c) = (full("pat-a"), full("pat-b"), full("pat-c"));
        let mut hash = 0;
        let b_id = join(&mut broker, watcher, &b, &mut hash).await;
        let c_id = join(&mut broker, watcher, &c, &mut hash).await;
        let from_c = one_message(&mut broker, &mut consumer, (c_id, 0), &c).await;

        // pat-c loses its consumer and subscribes again (after its backoff);
        // meanwhile pat-a leaves, and pat-b and pat-c move down the list.
        broker
            .send(crate::consume::reconnect::close_consumer(c_id))
            .await;
        leave(&mut broker, watcher, &a, a_id, &mut hash).await;
        // The ack waits for pat-c's new subscription.
        let acking = tokio::spawn({
            let consumer = consumer.clone();
            async move { consumer.ack(&from_c).await }
        });
        let (mut again, mut flowed, mut acked) = (None, false, false);
        while !(flowed && acked) {
            let frame = next_frame(&mut broker).await;
            match frame.command.r#type() {
                Type::Lookup => answer_lookup(&mut broker, request_id(&frame)).await,
                Type::Subscribe => {
                    let body = frame.command.subscribe.as_ref().expect("body");
                    assert_eq!(body.topic, c);
                    again = Some(body.consumer_id);
                    broker.send(answer::success(body.request_id)).await;
                }
                Type::Flow => {
                    let body = frame.command.flow.as_ref().expect("body");
                    assert_eq!(Some(body.consumer_id), again, "FLOW for pat-c's new id");
                    flowed = true;
                }
                Type::Ack => {
                    let body = frame.command.ack.as_ref().expect("body");
                    assert_eq!(Some(body.consumer_id), again, "ACK under pat-c's new id");
                    let request = body.request_id.expect("a receipt request");
                    broker
                        .send(answer::ack_response(body.consumer_id, request))
                        .await;
                    acked = true;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        acking.await.expect("task").expect("acked, confirmed");
        let again = again.expect("subscribed again");
        assert_ne!(again, c_id);

        // Each moved sub's events still reach it.
        one_message(&mut broker, &mut consumer, (b_id, 0), &b).await;
        one_message(&mut broker, &mut consumer, (again, 1), &c).await;
        assert_eq!(consumer.topics(), [b, c]);
    })
    .await;
}
