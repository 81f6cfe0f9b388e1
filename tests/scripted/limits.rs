//! Bounds the consumer keeps whatever the broker or the application does:
//! acks that pile up go out in frames of at most 1000 ids; a broker that
//! sends past the permits it was granted loses the connection. Paused clock.

use std::time::Duration;

use pulsar_wire::consumer::SubscriptionType;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::wire::Checksum;

use super::consume::{message, subscribed, subscribed_with};
use crate::common::fake_broker::FakeNetwork;
use crate::common::guard;

#[tokio::test(start_paused = true)]
async fn acks_grouped_by_the_thousand_go_out_in_frames_of_at_most_1000_ids() {
    const TOTAL: u64 = 2500;
    let net = FakeNetwork::new();
    // Its own hang guard: the common one is shorter than the group time.
    let test = tokio::time::timeout(Duration::from_secs(7200), async {
        // One group for everything: it flushes after an hour of paused time.
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_group_time(Duration::from_secs(3600))
        })
        .await;
        // In waves within the 1000 permits the consumer grants.
        for wave in (0..TOTAL).collect::<Vec<_>>().chunks(1000) {
            for &entry in wave {
                broker
                    .send_frame(message(id, entry, "m", Checksum::Valid))
                    .await;
            }
            for _ in wave {
                let m = consumer.receive().await.expect("message");
                consumer.ack(&m).await.expect("ack");
            }
        }
        let mut frames = Vec::new();
        let mut acked = 0;
        while acked < TOTAL as usize {
            let frame = broker.recv().await.expect("open");
            if frame.command.r#type() == Type::Ack {
                let ids = frame.command.ack.as_ref().expect("ACK").message_id.len();
                frames.push(ids);
                acked += ids;
            }
        }
        assert!(
            frames.iter().all(|&ids| ids <= 1000),
            "ACK frames of {frames:?} ids"
        );
        assert_eq!(acked, TOTAL as usize);
    });
    test.await
        .expect("no outcome within two hours (hang guard)");
}

#[tokio::test(start_paused = true)]
async fn a_broker_that_sends_past_its_permits_loses_the_connection() {
    let net = FakeNetwork::new();
    guard("flood", async {
        // The consumer granted 1000 permits and the application reads nothing.
        let (_consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        for entry in 0..1000 {
            broker
                .send_frame(message(id, entry, "m", Checksum::Valid))
                .await;
        }
        // The 1001st is one nobody asked for: the client hangs up.
        broker
            .send_frame(message(id, 1000, "m", Checksum::Valid))
            .await;
        broker.until_closed().await;
    })
    .await;
}
