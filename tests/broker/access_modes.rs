//! Producer access modes end to end (Apache Pulsar only: pulsar-lite has
//! none): a WaitForExclusive producer waits past the operation timeout and
//! gets the topic once the exclusive one closes, a dropped waiting
//! `create()` leaves no waiter behind on the broker, and
//! ExclusiveWithFencing takes the topic from the producer that held it.

use pulsar_wire::Client;
use pulsar_wire::producer::{AccessMode, Producer, ProducerError};
use pulsar_wire::proto::BaseCommand;

use crate::common::broker::{BrokerKind, TestBroker, skip_unless};
use crate::common::frame_watch::{FrameWatch, Seen};
use crate::common::{FIRING_TIMEOUT, guard, init_tracing, unique_topic};
use crate::raw_reader::read;

const NO_ACCESS_MODES: &str = "pulsar-lite has no producer access modes";

/// A client with the default operation timeout (a busy broker may take
/// seconds to create a topic).
async fn client(broker: &TestBroker) -> Client {
    init_tracing();
    Client::builder()
        .service_url(broker.service_url())
        .build()
        .await
        .expect("client")
}

/// The client that waits for exclusive access: its operation timeout is
/// [`FIRING_TIMEOUT`], so waiting past it shows, and `frames` sees what
/// the broker tells it.
async fn watched_client(broker: &TestBroker, frames: &FrameWatch) -> Client {
    init_tracing();
    Client::builder()
        .service_url(broker.service_url())
        .operation_timeout(FIRING_TIMEOUT)
        .connector(frames.connector())
        .build()
        .await
        .expect("client")
}

/// Whether the broker answered a PRODUCER with `producer_ready` false: the
/// producer is queued for exclusive access.
fn queued(seen: &[Seen]) -> Option<()> {
    seen.iter()
        .any(|s| {
            s.from_broker
                && s.command
                    .producer_success
                    .as_ref()
                    .is_some_and(|p| p.producer_ready == Some(false))
        })
        .then_some(())
}

/// The broker's answer (SUCCESS or ERROR) to the first CLOSE_PRODUCER the
/// client sent.
fn answer_to_close(seen: &[Seen]) -> Option<BaseCommand> {
    let request = seen
        .iter()
        .filter(|s| !s.from_broker)
        .find_map(|s| s.command.close_producer.as_ref())?
        .request_id;
    let answers = |s: &&Seen| {
        let (success, error) = (&s.command.success, &s.command.error);
        s.from_broker
            && (success.as_ref().map(|b| b.request_id) == Some(request)
                || error.as_ref().map(|b| b.request_id) == Some(request))
    };
    seen.iter().find(answers).map(|s| s.command.clone())
}

async fn producer(
    client: &Client,
    topic: &str,
    mode: AccessMode,
) -> Result<Producer, ProducerError> {
    client.producer(topic).access_mode(mode).create().await
}

async fn send(producer: &Producer, body: &str) -> Result<pulsar_wire::MessageId, ProducerError> {
    producer.send(body.to_owned()).await?.await
}

#[tokio::test]
async fn wait_for_exclusive_gets_the_topic_when_the_exclusive_producer_closes() {
    if skip_unless(BrokerKind::Apache, NO_ACCESS_MODES) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("wait for exclusive", async {
        let client = client(&broker).await;
        let frames = FrameWatch::default();
        let watched = watched_client(&broker, &frames).await;
        let topic = unique_topic("wait-exclusive");
        let first = producer(&client, &topic, AccessMode::Exclusive)
            .await
            .expect("exclusive");
        let mut waiting = Box::pin(producer(&watched, &topic, AccessMode::WaitForExclusive));
        tokio::select! {
            early = &mut waiting => panic!("finished before the broker queued it: {early:?}"),
            () = frames.until(queued) => {}
        }
        // Its PRODUCER request went out before the broker queued it, so its
        // operation timeout ends within one timeout from now. Past that it
        // still waits: it neither timed out nor was granted while the first
        // producer holds the topic.
        let early = tokio::time::timeout(FIRING_TIMEOUT * 3 / 2, &mut waiting).await;
        assert!(
            early.is_err(),
            "finished while the topic was held: {early:?}"
        );
        send(&first, "from the first").await.expect("stored");
        first.close().await.expect("close");
        let second = waiting.await.expect("granted once the first closed");
        send(&second, "from the second").await.expect("stored");
        let bodies: Vec<_> = read(&client, &topic, 2)
            .await
            .into_iter()
            .map(|r| r.payload)
            .collect();
        assert_eq!(bodies, ["from the first", "from the second"]);
        second.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn a_dropped_waiting_create_leaves_no_waiter_on_the_broker() {
    if skip_unless(BrokerKind::Apache, NO_ACCESS_MODES) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let frames = FrameWatch::default();
    // The waiting client lives to the end: closing its connection would
    // withdraw the waiter too.
    let (client, _watched, first, topic) = guard("dropped waiter, queued", async {
        let client = client(&broker).await;
        let watched = watched_client(&broker, &frames).await;
        let topic = unique_topic("dropped-waiter");
        let first = producer(&client, &topic, AccessMode::Exclusive)
            .await
            .expect("exclusive");
        let mut waiting = Box::pin(producer(&watched, &topic, AccessMode::WaitForExclusive));
        tokio::select! {
            early = &mut waiting => panic!("finished before the broker queued it: {early:?}"),
            () = frames.until(queued) => {}
        }
        drop(waiting);
        (client, watched, first, topic)
    })
    .await;
    // Dropped while queued: a task of the client withdraws it from the
    // broker's queue (CLOSE_PRODUCER). Its answer comes before the first
    // producer closes, so the broker cannot hand the topic to it.
    let answer = guard(
        "the withdrawal of the dropped waiter",
        frames.until(answer_to_close),
    )
    .await;
    assert!(answer.success.is_some(), "withdrawal refused: {answer:?}");
    guard("dropped waiter, the topic free", async {
        first.close().await.expect("close");
        // Had the waiter stayed queued, it would hold the topic now.
        let next = producer(&client, &topic, AccessMode::Exclusive)
            .await
            .expect("the topic is free: the dropped waiter was withdrawn");
        next.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn exclusive_with_fencing_takes_the_topic_from_the_exclusive_producer() {
    if skip_unless(BrokerKind::Apache, NO_ACCESS_MODES) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("fencing", async {
        let client = client(&broker).await;
        let topic = unique_topic("fencing");
        let old = producer(&client, &topic, AccessMode::Exclusive)
            .await
            .expect("exclusive");
        send(&old, "before").await.expect("stored");
        let new = producer(&client, &topic, AccessMode::ExclusiveWithFencing)
            .await
            .expect("fencing takes the topic");
        send(&new, "after").await.expect("stored");
        let refused = send(&old, "fenced off").await;
        assert!(
            refused.is_err(),
            "the fenced producer still wrote: {refused:?}"
        );
        let bodies: Vec<_> = read(&client, &topic, 2)
            .await
            .into_iter()
            .map(|r| r.payload)
            .collect();
        assert_eq!(bodies, ["before", "after"]);
        new.close().await.expect("close");
    })
    .await;
}
