//! No producer left behind on the broker: a PRODUCER that times out, a
//! dropped `create()`, a partitioned create with a failing partition and a
//! producer closed while its re-creation waits for exclusive access all end
//! with CLOSE_PRODUCER for what the broker may hold. A producer queued for
//! exclusive access waits past the operation timeout, and a broker that
//! closes every re-created producer meets growing delays. Paused clock.

use pulsar_wire::producer::AccessMode;
use pulsar_wire::wire::Frame;
use tokio::task::JoinHandle;

use super::reconnect::close_producer;
use super::*;

/// A client of the one-broker fake cluster `net` (operation timeout 5 s,
/// keepalive 30 s)
/// and the broker's end of its connection.
async fn connected(net: &FakeNetwork) -> (Client, FakeBroker, FakeListener) {
    init_tracing();
    let mut svc = net.listen(SERVICE);
    let client = Client::builder()
        .service_url(format!("pulsar://{SERVICE}"))
        .connector(net.clone())
        .operation_timeout(Duration::from_secs(5))
        .build();
    let script = async {
        let mut broker = svc.accept().await;
        broker.handshake().await;
        broker
    };
    let (client, broker) = tokio::join!(client, script);
    (client.expect("client"), broker, svc)
}

/// Creates a producer on `topic` in `mode`, answering for the broker;
/// returns it and its id on the broker.
async fn created(client: &Client, broker: &mut FakeBroker, mode: AccessMode) -> (Producer, u64) {
    let create = client
        .producer("orders")
        .batching(false)
        .access_mode(mode)
        .create();
    let script = async {
        answer_metadata(broker, 0).await;
        answer_lookup(broker).await;
        let asked = broker.expect(Type::Producer).await;
        broker
            .send(producer_success(request_id(&asked), "p-1", -1))
            .await;
        producer_body(&asked).producer_id
    };
    let (producer, id) = tokio::join!(create, script);
    (producer.expect("producer"), id)
}

/// Answers PARTITIONED_METADATA with `partitions`.
async fn answer_metadata(broker: &mut FakeBroker, partitions: u32) {
    let meta = broker.expect(Type::PartitionedMetadata).await;
    broker
        .send(answer::partitions(request_id(&meta), partitions))
        .await;
}

fn producer_body(frame: &Frame) -> &proto::CommandProducer {
    frame.command.producer.as_ref().expect("PRODUCER")
}

/// PRODUCER_SUCCESS with `producer_ready: false`: queued for exclusive access.
fn queued(request: u64) -> BaseCommand {
    let mut answer = producer_success(request, "p-1", -1);
    if let Some(body) = answer.producer_success.as_mut() {
        body.producer_ready = Some(false);
    }
    answer
}

/// Starts creating a WaitForExclusive producer and queues it on the broker
/// (PRODUCER_SUCCESS with `producer_ready: false`); returns the creation
/// and its PRODUCER.
async fn queued_create(
    client: Client,
    broker: &mut FakeBroker,
) -> (JoinHandle<Result<Producer, ProducerError>>, Frame) {
    let create = tokio::spawn(async move {
        client
            .producer("orders")
            .access_mode(AccessMode::WaitForExclusive)
            .create()
            .await
    });
    answer_metadata(broker, 0).await;
    answer_lookup(broker).await;
    let asked = broker.expect(Type::Producer).await;
    assert_eq!(
        producer_body(&asked).producer_access_mode,
        Some(proto::ProducerAccessMode::WaitForExclusive as i32)
    );
    broker.send(queued(request_id(&asked))).await;
    (create, asked)
}

/// Expects CLOSE_PRODUCER for `producer` and answers it.
async fn expect_close(broker: &mut FakeBroker, producer: u64) {
    let close = broker.expect(Type::CloseProducer).await;
    let body = close
        .command
        .close_producer
        .as_ref()
        .expect("CLOSE_PRODUCER");
    assert_eq!(
        body.producer_id, producer,
        "closes the producer it asked for"
    );
    broker.send(answer::success(body.request_id)).await;
}

#[tokio::test(start_paused = true)]
async fn a_create_cut_off_by_a_lost_connection_is_made_on_a_new_one() {
    // As the Java client does: a passing failure while creating (here the
    // connection dropped with PRODUCER pending) is tried again with
    // backoff; only the operation timeout, or a final or busy refusal,
    // ends the attempts.
    guard("PRODUCER cut off", async {
        let net = FakeNetwork::new();
        let (client, mut broker, mut svc) = connected(&net).await;
        let create =
            tokio::spawn(async move { client.producer("orders").batching(false).create().await });
        answer_metadata(&mut broker, 0).await;
        answer_lookup(&mut broker).await;
        broker.expect(Type::Producer).await;
        drop(broker);
        let mut fresh = svc.accept().await;
        fresh.handshake().await;
        answer_lookup(&mut fresh).await;
        let asked = fresh.expect(Type::Producer).await;
        fresh
            .send(producer_success(request_id(&asked), "p-1", -1))
            .await;
        let producer = create
            .await
            .expect("task")
            .expect("created on the new connection");
        assert_eq!(producer.name(), "p-1");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_create_refused_as_busy_fails_at_once() {
    guard("PRODUCER busy", async {
        let net = FakeNetwork::new();
        let (client, mut broker, _svc) = connected(&net).await;
        let create = tokio::spawn(async move {
            client
                .producer("orders")
                .access_mode(AccessMode::Exclusive)
                .create()
                .await
        });
        answer_metadata(&mut broker, 0).await;
        answer_lookup(&mut broker).await;
        let asked = broker.expect(Type::Producer).await;
        let busy = answer::error(request_id(&asked), ServerError::ProducerBusy, "exclusive");
        broker.send(busy).await;
        let result = create.await.expect("task");
        assert!(
            matches!(
                &result,
                Err(ProducerError::Create {
                    source: pulsar_wire::connection::ConnectionError::Server {
                        code: ServerError::ProducerBusy,
                        ..
                    },
                    ..
                })
            ),
            "{result:?}"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_producer_request_that_times_out_is_closed_on_the_broker() {
    guard("PRODUCER timeout", async {
        let net = FakeNetwork::new();
        let (client, mut broker, _svc) = connected(&net).await;
        let create = tokio::spawn(async move { client.producer("orders").create().await });
        answer_metadata(&mut broker, 0).await;
        answer_lookup(&mut broker).await;
        let asked = broker.expect(Type::Producer).await;
        let id = producer_body(&asked).producer_id;
        // No answer within the operation timeout...
        let failed = create.await.expect("task");
        assert!(
            matches!(
                failed,
                Err(ProducerError::Create {
                    source: pulsar_wire::connection::ConnectionError::Timeout { .. },
                    ..
                })
            ),
            "{failed:?}"
        );
        // ...so a late success on the broker must not keep the name.
        expect_close(&mut broker, id).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn wait_for_exclusive_waits_past_the_operation_timeout() {
    guard("wait for exclusive", async {
        let net = FakeNetwork::new();
        let (client, mut broker, _svc) = connected(&net).await;
        let (create, asked) = queued_create(client, &mut broker).await;
        // A keepalive round (six operation timeouts) passes: no timeout, no close.
        broker.answer_pings_until(1).await;
        broker
            .send(producer_success(request_id(&asked), "p-1", -1))
            .await;
        let producer = create.await.expect("task").expect("granted at last");
        assert_eq!(producer.name(), "p-1");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn dropping_a_waiting_create_withdraws_the_producer() {
    guard("dropped create", async {
        let net = FakeNetwork::new();
        let (client, mut broker, _svc) = connected(&net).await;
        let (create, asked) = queued_create(client, &mut broker).await;
        create.abort();
        assert!(create.await.expect_err("aborted").is_cancelled());
        expect_close(&mut broker, producer_body(&asked).producer_id).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_create_closes_the_partitions_that_succeeded() {
    guard("partial create", async {
        let net = FakeNetwork::new();
        let (client, mut broker, _svc) = connected(&net).await;
        let create = tokio::spawn(async move { client.producer("orders").create().await });
        answer_metadata(&mut broker, 2).await;
        answer_lookup(&mut broker).await;
        answer_lookup(&mut broker).await;
        let mut made = None;
        for _ in 0..2 {
            let asked = broker.expect(Type::Producer).await;
            let body = producer_body(&asked);
            if body.topic.ends_with("-partition-0") {
                made = Some(body.producer_id);
                broker
                    .send(producer_success(request_id(&asked), "p-1", -1))
                    .await;
            } else {
                broker
                    .send(answer::error(
                        request_id(&asked),
                        ServerError::ProducerBusy,
                        "busy",
                    ))
                    .await;
            }
        }
        let failed = create.await.expect("task");
        assert!(
            matches!(failed, Err(ProducerError::Create { .. })),
            "{failed:?}"
        );
        expect_close(&mut broker, made.expect("partition 0 was made")).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn closing_a_producer_whose_re_creation_waits_withdraws_it() {
    guard("close while queued", async {
        let net = FakeNetwork::new();
        let (client, mut broker, _svc) = connected(&net).await;
        let (producer, first) = created(&client, &mut broker, AccessMode::WaitForExclusive).await;
        broker.send(close_producer(first, None)).await;
        answer_lookup(&mut broker).await;
        let again = broker.expect(Type::Producer).await;
        broker.send(queued(request_id(&again))).await;
        // Queued behind another producer; the application gives up.
        producer.close().await.expect("closed");
        expect_close(&mut broker, producer_body(&again).producer_id).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_broker_that_closes_every_re_created_producer_meets_growing_delays() {
    guard("close ping-pong", async {
        let net = FakeNetwork::new();
        let (client, mut broker, _svc) = connected(&net).await;
        let (_producer, mut id) = created(&client, &mut broker, AccessMode::Shared).await;
        let mut created_at = Vec::new();
        broker.send(close_producer(id, None)).await;
        for _ in 0..8 {
            answer_lookup(&mut broker).await;
            let asked = broker.expect(Type::Producer).await;
            created_at.push(tokio::time::Instant::now());
            broker
                .send(producer_success(request_id(&asked), "p-1", -1))
                .await;
            id = producer_body(&asked).producer_id;
            broker.send(close_producer(id, None)).await;
        }
        let gaps: Vec<Duration> = created_at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.windows(2).all(|w| w[1] >= w[0]),
            "delays never shrink: {gaps:?}"
        );
        assert!(
            gaps[gaps.len() - 1] >= Duration::from_secs(6),
            "the seventh re-create waits seconds, not 100 ms: {gaps:?}"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_close_that_meets_a_lost_connection_is_done_and_closing_again_too() {
    guard("close during a connection loss", async {
        let net = FakeNetwork::new();
        let (client, mut broker, svc) = connected(&net).await;
        drop(svc); // no broker to reconnect to
        let (producer, id) = created(&client, &mut broker, AccessMode::Shared).await;
        let script = async {
            let close = broker.expect(Type::CloseProducer).await;
            let body = close.command.close_producer.expect("body");
            assert_eq!(body.producer_id, id);
            drop(broker); // the connection is lost before the answer
        };
        let (closed, ()) = tokio::join!(producer.close(), script);
        closed.expect("nothing of it is left on the broker: closed");
        producer.close().await.expect("closing again is done too");
    })
    .await;
}
