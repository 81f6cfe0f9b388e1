//! One connection against a scripted broker: correlation, timeouts, late
//! answers, error answers, sudden death, keepalive, handshake, close.

use std::time::Duration;

use bytes::Bytes;
use pulsar_wire::connection::{
    Connection, ConnectionError, ConnectionOptions, ConsumerEvent, ProducerEvent, Response,
};
use pulsar_wire::ids::{ConsumerId, ProducerId, SequenceId};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::proto::{self, BaseCommand, ServerError};
use pulsar_wire::wire::{Checksum, Frame, Payload, commands};
use tokio::sync::mpsc;

use crate::common::fake_broker::{FakeBroker, answer, request_id, topic_of};
use crate::common::{guard, init_tracing};

const SECS_30: Duration = Duration::from_secs(30);

async fn connected(options: ConnectionOptions) -> (Connection, FakeBroker) {
    init_tracing();
    let (io, mut broker) = FakeBroker::pair();
    let (conn, ()) = tokio::join!(Connection::connect(io, options), broker.handshake());
    (conn.expect("handshake"), broker)
}

fn spawn_lookup(
    conn: &Connection,
    topic: &'static str,
) -> tokio::task::JoinHandle<Result<Response, ConnectionError>> {
    let conn = conn.clone();
    tokio::spawn(async move {
        conn.request("LOOKUP", |id| commands::lookup(topic, id, false))
            .await
    })
}

fn lookup_url(response: Result<Response, ConnectionError>) -> String {
    match response {
        Ok(Response::LookupResponse(r)) => r.broker_service_url.unwrap_or_default(),
        other => panic!("expected a LOOKUP_RESPONSE, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn answers_are_matched_by_request_id_in_any_order() {
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    let a = spawn_lookup(&conn, "a");
    let first = broker.expect(Type::Lookup).await;
    let b = spawn_lookup(&conn, "b");
    let second = broker.expect(Type::Lookup).await;
    for frame in [second, first] {
        let url = format!("pulsar://{}:6650", topic_of(&frame));
        let id = request_id(&frame);
        broker
            .send(answer::lookup(id, LookupType::Connect, &url, false))
            .await;
    }
    assert_eq!(
        lookup_url(guard("a", a).await.expect("task")),
        "pulsar://a:6650"
    );
    assert_eq!(
        lookup_url(guard("b", b).await.expect("task")),
        "pulsar://b:6650"
    );
}

#[tokio::test(start_paused = true)]
async fn a_broker_that_never_answers_gives_a_timeout() {
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    let pending = spawn_lookup(&conn, "t");
    broker.expect(Type::Lookup).await; // …and never answer
    let result = guard("timeout", pending).await.expect("task");
    assert!(
        matches!(result, Err(ConnectionError::Timeout { op: "LOOKUP", after }) if after == SECS_30),
        "{result:?}"
    );
    assert!(
        !conn.is_closed(),
        "a timeout fails the request, not the connection"
    );
}

#[tokio::test(start_paused = true)]
async fn a_late_answer_after_a_timeout_is_dropped() {
    let options = ConnectionOptions::default().operation_timeout(Duration::from_secs(5));
    let (conn, mut broker) = connected(options).await;
    let early = spawn_lookup(&conn, "early");
    let early_id = request_id(&broker.expect(Type::Lookup).await);
    let timed_out = guard("early", early).await.expect("task");
    assert!(
        matches!(timed_out, Err(ConnectionError::Timeout { .. })),
        "{timed_out:?}"
    );

    let late = spawn_lookup(&conn, "late");
    let late_frame = broker.expect(Type::Lookup).await;
    assert_ne!(request_id(&late_frame), early_id, "ids are never reused");
    // The answer to the timed-out request comes first; it must not be taken
    // for the answer to the new one.
    let stale = answer::lookup(early_id, LookupType::Connect, "pulsar://stale:1", false);
    broker.send(stale).await;
    let fresh = answer::lookup(
        request_id(&late_frame),
        LookupType::Connect,
        "pulsar://fresh:2",
        false,
    );
    broker.send(fresh).await;
    assert_eq!(
        lookup_url(guard("late", late).await.expect("task")),
        "pulsar://fresh:2"
    );
}

#[tokio::test(start_paused = true)]
async fn an_error_answer_is_a_typed_server_error() {
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    let pending = {
        let conn = conn.clone();
        tokio::spawn(async move {
            conn.request("PARTITIONED_METADATA", |id| {
                commands::partitioned_metadata("t", id)
            })
            .await
        })
    };
    let id = request_id(&broker.expect(Type::PartitionedMetadata).await);
    broker
        .send(answer::error(id, ServerError::TopicNotFound, "no topic t"))
        .await;
    match guard("error", pending).await.expect("task") {
        Err(ConnectionError::Server { op, code, message }) => {
            assert_eq!(op, "PARTITIONED_METADATA");
            assert_eq!(code, ServerError::TopicNotFound);
            assert_eq!(message, "no topic t");
        }
        other => panic!("{other:?}"),
    }
    assert!(!conn.is_closed());
}

#[tokio::test(start_paused = true)]
async fn when_the_socket_dies_every_waiter_and_registration_gets_the_error() {
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    let (ptx, mut producer) = mpsc::unbounded_channel();
    let (ctx, mut consumer) = mpsc::unbounded_channel();
    conn.register_producer(conn.next_producer_id(), ptx)
        .await
        .expect("register");
    conn.register_consumer(conn.next_consumer_id(), ctx)
        .await
        .expect("register");
    let pending: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|t| spawn_lookup(&conn, t))
        .collect();
    for _ in 0..3 {
        broker.expect(Type::Lookup).await;
    }
    drop(broker); // mid-request

    for p in pending {
        let result = guard("waiter", p).await.expect("task");
        assert!(
            matches!(result, Err(ConnectionError::Disconnected)),
            "{result:?}"
        );
    }
    assert!(matches!(
        guard("producer", producer.recv()).await,
        Some(ProducerEvent::ConnectionLost(ConnectionError::Disconnected))
    ));
    assert!(matches!(
        guard("consumer", consumer.recv()).await,
        Some(ConsumerEvent::ConnectionLost(ConnectionError::Disconnected))
    ));
    assert!(matches!(
        guard("closed", conn.closed()).await,
        ConnectionError::Disconnected
    ));
    assert!(conn.is_closed());
    // Later calls fail at once with the same error.
    let after = conn
        .request("LOOKUP", |id| commands::lookup("t", id, false))
        .await;
    assert!(
        matches!(after, Err(ConnectionError::Disconnected)),
        "{after:?}"
    );
    let (tx, mut late) = mpsc::unbounded_channel();
    assert!(conn.register_producer(ProducerId(99), tx).await.is_err());
    assert!(matches!(
        late.recv().await,
        Some(ProducerEvent::ConnectionLost(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_silent_broker_is_declared_dead_within_two_keepalive_intervals() {
    // Shorter than the operation timeout, so the waiter sees the death, not its own timeout.
    let interval = Duration::from_secs(10);
    let options = ConnectionOptions::default().keepalive_interval(interval);
    let started = tokio::time::Instant::now();
    let (conn, mut broker) = connected(options).await;
    broker.answer_pings = false;
    let pending = spawn_lookup(&conn, "t");
    broker.expect(Type::Lookup).await; // from now on the broker is silent

    let err = guard("keepalive", conn.closed()).await;
    assert!(
        matches!(err, ConnectionError::KeepaliveExpired { interval: i } if i == interval),
        "{err:?}"
    );
    assert!(
        started.elapsed() <= 2 * interval,
        "dead after {:?}",
        started.elapsed()
    );
    let result = guard("waiter", pending).await.expect("task");
    assert!(
        matches!(result, Err(ConnectionError::KeepaliveExpired { .. })),
        "{result:?}"
    );
    broker.until_closed().await;
    assert_eq!(broker.pings, 1, "one PING, unanswered, then death");
}

#[tokio::test(start_paused = true)]
async fn broker_pings_are_answered_and_answered_pings_keep_the_connection_alive() {
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    broker.send(commands::ping()).await;
    broker.expect(Type::Pong).await;
    // The client pings once per interval; while we wait for its tenth PING
    // the paused clock jumps from one keepalive deadline to the next.
    // (Its own hang guard: the common one is shorter than ten intervals.)
    tokio::time::timeout(20 * SECS_30, broker.answer_pings_until(10))
        .await
        .expect("ten PINGs within twenty intervals");
    assert!(!conn.is_closed(), "answered pings keep it alive: {conn:?}");
    conn.close().await;
    broker.until_closed().await;
}

#[tokio::test(start_paused = true)]
async fn receipts_and_messages_reach_their_mailboxes() {
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    let (ptx, mut producer) = mpsc::unbounded_channel();
    let (ctx, mut consumer) = mpsc::unbounded_channel();
    let (pid, cid) = (conn.next_producer_id(), conn.next_consumer_id());
    conn.register_producer(pid, ptx).await.expect("register");
    conn.register_consumer(cid, ctx).await.expect("register");
    // A control frame after the registrations: once the broker sees it,
    // both registrations are in place (one lane, in order).
    conn.send_control(commands::flow(cid, 10))
        .await
        .expect("flow");
    broker.expect(Type::Flow).await;

    broker.send(answer::receipt(pid.0, 41)).await;
    broker.send(answer::receipt(pid.0 + 100, 1)).await; // unknown producer: ignored
    let message = BaseCommand {
        r#type: Type::Message as i32,
        message: Some(Box::new(proto::CommandMessage {
            consumer_id: cid.0,
            message_id: pulsar_wire::MessageId::new(5, 6).to_proto(),
            ..proto::CommandMessage::default()
        })),
        ..BaseCommand::default()
    };
    broker
        .send_frame(Frame {
            command: message,
            payload: Some(Box::new(Payload {
                broker_entry_metadata: None,
                checksum: Checksum::Absent,
                metadata: proto::MessageMetadata::default(),
                data: Bytes::from_static(b"hi"),
            })),
        })
        .await;
    match guard("receipt", producer.recv()).await {
        Some(ProducerEvent::Receipt { sequence_id, .. }) => assert_eq!(sequence_id, SequenceId(41)),
        other => panic!("{other:?}"),
    }
    match guard("message", consumer.recv()).await {
        Some(ConsumerEvent::Message {
            message_id,
            payload,
            ..
        }) => {
            assert_eq!(message_id, pulsar_wire::MessageId::new(5, 6));
            assert_eq!(payload.data, Bytes::from_static(b"hi"));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn close_flushes_queued_frames_and_fails_waiters_with_closed() {
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    let pending = spawn_lookup(&conn, "t");
    broker.expect(Type::Lookup).await;
    conn.send_control(commands::flow(ConsumerId(3), 5))
        .await
        .expect("queued");
    guard("close", conn.close()).await;
    let result = guard("waiter", pending).await.expect("task");
    assert!(matches!(result, Err(ConnectionError::Closed)), "{result:?}");
    broker.expect(Type::Flow).await;
    assert!(
        broker.recv().await.is_none(),
        "socket closed after the flush"
    );
    assert!(conn.is_closed());
}

#[tokio::test(start_paused = true)]
async fn control_frames_overtake_queued_send_frames() {
    const SENDS: u64 = 30;
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    // The broker reads nothing yet: the pipe and the actor's output buffer
    // fill up, and the rest of the SENDs wait on the data lane.
    for sequence in 0..SENDS {
        let frame = Frame {
            command: commands::send(ProducerId(0), SequenceId(sequence), 1),
            payload: Some(Box::new(Payload {
                broker_entry_metadata: None,
                checksum: Checksum::Valid,
                metadata: proto::MessageMetadata::default(),
                data: Bytes::from(vec![0u8; 32 * 1024]),
            })),
        };
        conn.send_payload(frame).await.expect("queued");
    }
    conn.send_control(commands::flow(ConsumerId(1), 1))
        .await
        .expect("queued");

    let mut sends_before_flow = 0;
    loop {
        let frame = guard("frame", broker.recv()).await.expect("a frame");
        match frame.command.r#type() {
            Type::Send => sends_before_flow += 1,
            Type::Flow => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        sends_before_flow < SENDS,
        "FLOW waited behind all {SENDS} SENDs instead of overtaking the queued ones"
    );
    for _ in sends_before_flow..SENDS {
        broker.expect(Type::Send).await;
    }
}

#[tokio::test(start_paused = true)]
async fn control_frames_past_the_lanes_room_wait_for_it_and_go_out_in_order() {
    // More than the control lane holds (1024), sent by one task that does
    // not yield while the lane has room: the actor cannot drain it
    // meanwhile, so the last ones wait for room.
    const FLOWS: u32 = 1024 + 64;
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    let sender = {
        let conn = conn.clone();
        tokio::spawn(async move {
            for permits in 1..=FLOWS {
                conn.send_control(commands::flow(ConsumerId(1), permits))
                    .await?;
            }
            Ok::<_, ConnectionError>(())
        })
    };
    for permits in 1..=FLOWS {
        let frame = guard("FLOW", broker.expect(Type::Flow)).await;
        let flow = frame.command.flow.expect("a FLOW body");
        assert_eq!(flow.message_permits, permits, "FLOWs out of order");
    }
    guard("sender", sender)
        .await
        .expect("task")
        .expect("every FLOW queued");
}

#[tokio::test(start_paused = true)]
async fn a_broker_that_keeps_sending_but_stops_reading_is_declared_dead() {
    let (conn, mut broker) = connected(ConnectionOptions::default()).await;
    // More than the pipe holds: most of it waits in the actor's buffer.
    for sequence in 0..8 {
        let frame = Frame {
            command: commands::send(ProducerId(0), SequenceId(sequence), 1),
            payload: Some(Box::new(Payload {
                broker_entry_metadata: None,
                checksum: Checksum::Valid,
                metadata: proto::MessageMetadata::default(),
                data: Bytes::from(vec![0u8; 32 * 1024]),
            })),
        };
        conn.send_payload(frame).await.expect("queued");
    }
    let pending = spawn_lookup(&conn, "t");
    // The broker reads nothing but pings every 10 s, so the client's
    // keepalive sees a live peer all along.
    let mut every = tokio::time::interval(Duration::from_secs(10));
    let err = guard("stalled writes", async {
        loop {
            tokio::select! {
                _ = every.tick() => broker.send(commands::ping()).await,
                err = conn.closed() => break err,
            }
        }
    })
    .await;
    assert!(
        matches!(err, ConnectionError::WriteStalled { after } if after == SECS_30),
        "{err:?}"
    );
    let waiter = guard("waiter", pending).await.expect("task");
    assert!(waiter.is_err(), "{waiter:?}");
    let late = Frame {
        command: commands::send(ProducerId(0), SequenceId(9), 1),
        payload: None,
    };
    assert!(conn.send_payload(late).await.is_err(), "sends fail at once");
}
