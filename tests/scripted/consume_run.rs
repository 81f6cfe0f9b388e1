//! `Consumer::run` against the scripted broker: each handler's outcome is
//! sent when the handler returns, not when the next message arrives.

use pulsar_wire::consumer::{Outcome, RunOptions};

use super::*;

#[tokio::test(start_paused = true)]
async fn an_outcome_is_sent_when_the_handler_returns_even_with_nothing_more_to_receive() {
    outcome_sent_with_nothing_more_to_receive(false).await;
}

#[tokio::test(start_paused = true)]
async fn an_outcome_is_sent_when_a_handler_that_waited_returns_with_nothing_more_to_receive() {
    outcome_sent_with_nothing_more_to_receive(true).await;
}

/// One message for a `run` with 4 calls at once; the handler acks it at
/// once, or, if it `waits`, after yielding once (pending at its first
/// poll, so the call joins the calls in flight).
async fn outcome_sent_with_nothing_more_to_receive(waits: bool) {
    let net = FakeNetwork::new();
    let (consumer, mut broker, id) = subscribed_with(&net, |b| {
        b.subscription_type(SubscriptionType::Shared)
            .ack_timeout(Duration::from_secs(1))
    })
    .await;
    let runner = consumer.clone();
    let run = tokio::spawn(async move {
        let handler = move |_msg| async move {
            if waits {
                tokio::task::yield_now().await;
            }
            Ok::<_, std::convert::Infallible>(Outcome::Ack)
        };
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

/// Runs a handler that works on message 7 for 10 s under a 1 s ack
/// timeout (the test moves the paused clock in half-second steps while the
/// handler waits), then acks; returns the entries of every redelivery
/// request the broker got before the ACK.
async fn redeliveries_during_a_10s_handler(options: RunOptions) -> Vec<u64> {
    let net = FakeNetwork::new();
    let (consumer, mut broker, id) = subscribed_with(&net, |b| {
        b.subscription_type(SubscriptionType::Shared)
            .ack_timeout(Duration::from_secs(1))
    })
    .await;
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let done = std::sync::Arc::new(tokio::sync::Notify::new());
    let (runner, finish) = (consumer.clone(), done.clone());
    let run = tokio::spawn(async move {
        let mut started_tx = Some(started_tx);
        let handler = move |_msg| {
            let (started, finish) = (started_tx.take(), finish.clone());
            async move {
                if let Some(started) = started {
                    let _ = started.send(());
                }
                finish.notified().await;
                Ok::<_, std::convert::Infallible>(Outcome::Ack)
            }
        };
        runner.run(handler, options).await
    });
    broker
        .send_frame(message(id, 7, "ten seconds of work", Checksum::Valid))
        .await;
    guard("the handler starts", started).await.expect("started");
    for _ in 0..20 {
        tokio::time::advance(Duration::from_millis(500)).await;
    }
    done.notify_one();
    let mut redelivered = Vec::new();
    loop {
        let frame = guard("the ACK", broker.recv()).await.expect("a frame");
        match frame.command.r#type() {
            Type::Ack => break,
            Type::RedeliverUnacknowledgedMessages => {
                let body = frame
                    .command
                    .redeliver_unacknowledged_messages
                    .expect("body");
                redelivered.extend(body.message_ids.iter().map(|m| m.entry_id));
            }
            _ => {}
        }
    }
    consumer.close().await.expect("close");
    guard("run ends", run).await.expect("join").expect("run");
    redelivered
}

#[tokio::test(start_paused = true)]
async fn a_leased_10s_handler_under_a_1s_ack_timeout_is_not_redelivered() {
    let leased = RunOptions::default().lease(Duration::from_secs(60));
    assert_eq!(
        redeliveries_during_a_10s_handler(leased).await,
        [] as [u64; 0]
    );
}

#[tokio::test(start_paused = true)]
async fn an_unleased_10s_handler_under_a_1s_ack_timeout_is_redelivered() {
    let redelivered = redeliveries_during_a_10s_handler(RunOptions::default()).await;
    assert_eq!(redelivered, [7]);
}

#[tokio::test(start_paused = true)]
async fn a_lease_ends_at_its_maximum_total() {
    let leased = RunOptions::default().lease(Duration::from_secs(3));
    assert_eq!(redeliveries_during_a_10s_handler(leased).await, [7]);
}
