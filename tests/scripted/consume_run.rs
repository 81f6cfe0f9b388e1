//! `Consumer::run` against the scripted broker: each handler's outcome is
//! sent when the handler returns, not when the next message arrives.

use pulsar_wire::consumer::{Outcome, RunOptions};

use super::*;

#[tokio::test(start_paused = true)]
async fn an_outcome_is_sent_when_the_handler_returns_even_with_nothing_more_to_receive() {
    let net = FakeNetwork::new();
    let (consumer, mut broker, id) = subscribed_with(&net, |b| {
        b.subscription_type(SubscriptionType::Shared)
            .ack_timeout(Duration::from_secs(1))
    })
    .await;
    let runner = consumer.clone();
    let run = tokio::spawn(async move {
        let handler = |_msg| async { Ok::<_, std::convert::Infallible>(Outcome::Ack) };
        runner
            .run(handler, RunOptions::default().concurrency(4))
            .await
    });
    broker
        .send_frame(message(id, 7, "last one for now", Checksum::Valid))
        .await;
    // The one message's ACK comes next: not a redelivery request after the
    // ack timeout, which is what an outcome held until another message
    // arrives would lead to.
    let frame = guard("the ACK", broker.recv()).await.expect("a frame");
    assert_eq!(frame.command.r#type(), Type::Ack, "{:?}", frame.command);
    let body = frame.command.ack.as_ref().expect("body");
    assert_eq!(body.message_id[0].entry_id, 7);
    consumer.close().await.expect("close");
    guard("run ends", run).await.expect("join").expect("run");
}
