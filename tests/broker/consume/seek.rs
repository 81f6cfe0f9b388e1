//! Seek is exact: after `seek()` returns, nothing queued before it reaches
//! the application, members of a batch before the target never come, and
//! the target itself comes only when asked for (inclusive). On both
//! brokers: pulsar-lite delivers nothing more to a consumer attached
//! during a SEEK, but the consumer subscribes again after every seek.

use super::*;

/// Produces `0..100` as texts `m00..m99`: plain, or in batches of 10.
/// Returns each message's id (a batch member's id carries its index).
async fn hundred(client: &Client, topic: &str, batched: bool) -> Vec<MessageId> {
    let mut producer = RawProducer::create(client, topic).await;
    let mut ids = Vec::with_capacity(100);
    if batched {
        for b in 0..10 {
            let texts: Vec<String> = (0..10).map(|i| format!("m{:02}", b * 10 + i)).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let entry = producer.send_batch(&refs).await;
            ids.extend((0..10).map(|i| entry.entry().with_batch_index(i)));
        }
    } else {
        for i in 0..100 {
            ids.push(producer.send(&format!("m{i:02}")).await);
        }
    }
    ids
}

/// Receives 10 of 100 (90 still queued), seeks to the 6th message (`m05`)
/// and checks that exactly the expected tail follows, in order.
async fn seek_to_the_sixth(batched: bool, inclusive: bool) {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("seek", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-seek-exact");
        let ids = hundred(&client, &topic, batched).await;
        let mut c = client
            .consumer(&topic, "s")
            .initial_position(InitialPosition::Earliest)
            .seek_inclusive(inclusive)
            .subscribe()
            .await
            .expect("subscribe");
        let first: Vec<String> = take(&mut c, 10).await.iter().map(text).collect();
        assert_eq!(
            first,
            (0..10).map(|i| format!("m{i:02}")).collect::<Vec<_>>()
        );
        c.seek(ids[5]).await.expect("seek");
        let from = if inclusive { 5 } else { 6 };
        for i in from..100 {
            let m = c.receive().await.expect("receive");
            assert_eq!(text(&m), format!("m{i:02}"), "after the seek to m05");
        }
        c.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn seek_starts_after_the_target_and_drops_the_old_queue() {
    seek_to_the_sixth(false, false).await;
}

#[tokio::test]
async fn seek_inclusive_starts_at_the_target() {
    seek_to_the_sixth(false, true).await;
}

#[tokio::test]
async fn seek_to_a_batch_member_skips_the_members_before_it() {
    seek_to_the_sixth(true, false).await;
}

#[tokio::test]
async fn seek_inclusive_to_a_batch_member_starts_at_it() {
    seek_to_the_sixth(true, true).await;
}

/// After a seek, a rewind made elsewhere (an admin's cursor reset back
/// before the seek's target) brings every message from there to the
/// application again, batched or not, the seek's target too: the seek
/// filters nothing after the reset, and acks nothing before it.
async fn a_cursor_reset_after_a_seek(batched: bool) {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite has no admin API to reset a cursor",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("cursor reset after a seek", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-seek-reset");
        let ids = hundred(&client, &topic, batched).await;
        let mut c = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("subscribe");
        c.seek(ids[50]).await.expect("seek");
        for i in 51..100 {
            let m = c.receive().await.expect("receive");
            assert_eq!(text(&m), format!("m{i:02}"), "after the seek to m50");
        }
        let admin = std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL");
        crate::common::admin::reset_cursor(&admin, &topic, "s", ids[10]).await;
        // From the reset on, each once more: for a batch, also the member
        // the seek skipped in its own entry (the consumer forgets at the
        // reset's reconnect what it skipped there, as the Java client).
        let expected: Vec<String> = (10..100).map(|i| format!("m{i:02}")).collect();
        let mut again = Vec::new();
        for _ in 0..expected.len() {
            let m = c.receive().await.expect("receive");
            c.ack(&m).await.expect("ack");
            again.push(text(&m));
        }
        assert_eq!(again, expected, "everything from the reset, in order");
        c.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn a_cursor_reset_after_a_seek_brings_every_message_back() {
    a_cursor_reset_after_a_seek(false).await;
}

#[tokio::test]
async fn a_cursor_reset_after_a_seek_brings_every_batch_member_back() {
    a_cursor_reset_after_a_seek(true).await;
}

/// How the consumer acks before an operator's cursor reset.
#[derive(Clone, Copy, PartialEq)]
enum AckedBefore {
    /// Each message, on Shared.
    OneByOne,
    /// All at once with one cumulative ack, on Exclusive.
    Cumulative,
    /// Batches of 10 with batch index ack, on Shared: every member but
    /// the last of each batch, so each batch stays partly acked.
    BatchMembers,
    /// As `BatchMembers`, without batch index ack: the broker never hears
    /// of the members' acks, which the consumer keeps.
    BatchMembersKeptByTheConsumer,
}

/// An operator's cursor reset brings back messages the consumer acked,
/// once the broker confirmed the acks: they are handed out again, not
/// dropped and acked anew behind the operator's back. With receipts, so
/// every ack is confirmed before the reset.
async fn a_cursor_reset_after_acks(acked: AckedBefore) {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite has no admin API to reset a cursor",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("cursor reset after acks", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-acked-reset");
        let batched = matches!(
            acked,
            AckedBefore::BatchMembers | AckedBefore::BatchMembersKeptByTheConsumer
        );
        let ids = hundred(&client, &topic, batched).await;
        let kind = if acked == AckedBefore::Cumulative {
            SubscriptionType::Exclusive
        } else {
            SubscriptionType::Shared
        };
        let mut c = client
            .consumer(&topic, "s")
            .subscription_type(kind)
            .initial_position(InitialPosition::Earliest)
            .ack_receipts(true)
            .batch_index_ack(acked == AckedBefore::BatchMembers)
            .subscribe()
            .await
            .expect("subscribe");
        for i in 0..100 {
            let m = c.receive().await.expect("receive");
            assert_eq!(text(&m), format!("m{i:02}"));
            match acked {
                AckedBefore::OneByOne => c.ack(&m).await.expect("ack confirmed"),
                AckedBefore::Cumulative if i == 99 => {
                    c.ack_cumulative(&m).await.expect("ack confirmed");
                }
                AckedBefore::BatchMembers | AckedBefore::BatchMembersKeptByTheConsumer
                    if i % 10 != 9 =>
                {
                    c.ack(&m).await.expect("ack confirmed");
                }
                _ => {}
            }
        }
        let admin = std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL");
        crate::common::admin::reset_cursor(&admin, &topic, "s", ids[10]).await;
        let expected: Vec<String> = (10..100).map(|i| format!("m{i:02}")).collect();
        let mut again = Vec::new();
        for _ in 0..expected.len() {
            let m = c.receive().await.expect("receive");
            c.ack(&m).await.expect("ack");
            again.push(text(&m));
        }
        assert_eq!(again, expected, "everything from the reset, in order");
        c.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn a_cursor_reset_brings_back_messages_acked_one_by_one() {
    a_cursor_reset_after_acks(AckedBefore::OneByOne).await;
}

#[tokio::test]
async fn a_cursor_reset_brings_back_messages_acked_cumulatively() {
    a_cursor_reset_after_acks(AckedBefore::Cumulative).await;
}

#[tokio::test]
async fn a_cursor_reset_brings_back_batch_members_acked_with_batch_index_ack() {
    a_cursor_reset_after_acks(AckedBefore::BatchMembers).await;
}

#[tokio::test]
async fn a_cursor_reset_brings_back_batch_members_acked_without_batch_index_ack() {
    a_cursor_reset_after_acks(AckedBefore::BatchMembersKeptByTheConsumer).await;
}
