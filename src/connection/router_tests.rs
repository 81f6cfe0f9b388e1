//! Router tests: plain `#[test]`s, time as `t0 + Duration`, channels read with `try_recv`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::*;
use crate::connection::inbound::Reaction;
use crate::ids::SequenceId;
use crate::message_id::MessageId;
use crate::proto::BaseCommand;
use crate::proto::base_command::Type;
use crate::proto::command_lookup_topic_response::LookupType;
use crate::proto::{self, command_topic_migrated};
use crate::wire::Checksum;
use crate::wire::{Frame, Payload};

const TIMEOUT: Duration = Duration::from_secs(30);

fn base(kind: Type) -> BaseCommand {
    BaseCommand {
        r#type: kind as i32,
        ..BaseCommand::default()
    }
}

fn success(request: u64) -> Frame {
    Frame::simple(BaseCommand {
        success: Some(Box::new(proto::CommandSuccess {
            request_id: request,
            schema: None,
        })),
        ..base(Type::Success)
    })
}

fn error(request: u64, code: ServerError, message: &str) -> Frame {
    Frame::simple(BaseCommand {
        error: Some(Box::new(proto::CommandError {
            request_id: request,
            error: code as i32,
            message: message.into(),
        })),
        ..base(Type::Error)
    })
}

fn receipt(producer: u64, sequence: u64) -> Frame {
    Frame::simple(BaseCommand {
        send_receipt: Some(Box::new(proto::CommandSendReceipt {
            producer_id: producer,
            sequence_id: sequence,
            message_id: Some(MessageId::new(7, sequence).to_proto()),
            highest_sequence_id: None,
        })),
        ..base(Type::SendReceipt)
    })
}

fn message(consumer: u64, entry: u64, with_payload: bool) -> Frame {
    Frame {
        command: BaseCommand {
            message: Some(Box::new(proto::CommandMessage {
                consumer_id: consumer,
                message_id: MessageId::new(3, entry).to_proto(),
                redelivery_count: Some(2),
                ack_set: vec![],
                consumer_epoch: Some(1),
            })),
            ..base(Type::Message)
        },
        payload: with_payload.then(|| {
            Box::new(Payload {
                broker_entry_metadata: None,
                checksum: Checksum::Absent,
                metadata: proto::MessageMetadata::default(),
                data: Bytes::from_static(b"hello"),
            })
        }),
    }
}

fn request(
    router: &mut Router,
    now: Instant,
    id: u64,
    op: &'static str,
) -> oneshot::Receiver<Result<Response, ConnectionError>> {
    let (tx, rx) = oneshot::channel();
    router.insert_request(now, RequestId(id), op, tx);
    rx
}

#[test]
fn answers_reach_their_own_waiter_only() {
    let t0 = crate::clock::now();
    let mut router = Router::new(TIMEOUT);
    let mut a = request(&mut router, t0, 1, "SUBSCRIBE");
    let mut b = request(&mut router, t0, 2, "SUBSCRIBE");
    assert_eq!(router.on_inbound(success(2)), Reaction::None);
    assert!(matches!(b.try_recv(), Ok(Ok(Response::Success(s))) if s.request_id == 2));
    assert!(a.try_recv().is_err(), "request 1 is still waiting");
    assert_eq!(router.pending_requests(), 1);
}

#[test]
fn error_answers_are_typed_server_errors_naming_the_op() {
    let t0 = crate::clock::now();
    let mut router = Router::new(TIMEOUT);
    let mut rx = request(&mut router, t0, 5, "PRODUCER");
    router.on_inbound(error(5, ServerError::ProducerBusy, "taken"));
    match rx.try_recv() {
        Ok(Err(ConnectionError::Server { op, code, message })) => {
            assert_eq!(
                (op, code, message.as_str()),
                ("PRODUCER", ServerError::ProducerBusy, "taken")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_lookup_is_a_server_error() {
    let t0 = crate::clock::now();
    let mut router = Router::new(TIMEOUT);
    let mut rx = request(&mut router, t0, 9, "LOOKUP");
    router.on_inbound(Frame::simple(BaseCommand {
        lookup_topic_response: Some(Box::new(proto::CommandLookupTopicResponse {
            request_id: 9,
            response: Some(LookupType::Failed as i32),
            error: Some(ServerError::TopicNotFound as i32),
            message: Some("no such topic".into()),
            ..proto::CommandLookupTopicResponse::default()
        })),
        ..base(Type::LookupResponse)
    }));
    assert!(matches!(
        rx.try_recv(),
        Ok(Err(ConnectionError::Server {
            op: "LOOKUP",
            code: ServerError::TopicNotFound,
            ..
        }))
    ));
}

#[test]
fn requests_time_out_at_their_deadline_and_late_answers_are_dropped() {
    let t0 = crate::clock::now();
    let mut router = Router::new(TIMEOUT);
    let mut early = request(&mut router, t0, 1, "LOOKUP");
    let mut later = request(&mut router, t0 + Duration::from_secs(10), 2, "LOOKUP");
    assert_eq!(router.next_deadline(), Some(t0 + TIMEOUT));

    assert_eq!(router.expire(t0 + Duration::from_secs(29)), 0);
    assert_eq!(router.expire(t0 + TIMEOUT), 1);
    assert!(matches!(
        early.try_recv(),
        Ok(Err(ConnectionError::Timeout {
            op: "LOOKUP",
            after: TIMEOUT
        }))
    ));
    assert_eq!(router.next_deadline(), Some(t0 + Duration::from_secs(40)));

    // The answer to request 1 arrives late: dropped, and never taken for request 2's.
    router.on_inbound(success(1));
    assert!(later.try_recv().is_err());
    router.on_inbound(success(2));
    assert!(matches!(later.try_recv(), Ok(Ok(Response::Success(_)))));
    assert_eq!(router.next_deadline(), None);
}

#[test]
fn fail_all_poisons_every_waiter_and_registration() {
    let t0 = crate::clock::now();
    let mut router = Router::new(TIMEOUT);
    let mut requests: Vec<_> = (0..3)
        .map(|i| request(&mut router, t0, i, "SEEK"))
        .collect();
    let (ptx, mut prx) = mpsc::unbounded_channel();
    let (ctx, mut crx) = mpsc::unbounded_channel();
    router.register_producer(ProducerId(1), ptx);
    router.register_consumer(ConsumerId(1), ctx);

    router.fail_all(&ConnectionError::Disconnected);
    for rx in &mut requests {
        assert!(matches!(
            rx.try_recv(),
            Ok(Err(ConnectionError::Disconnected))
        ));
    }
    assert!(matches!(
        prx.try_recv(),
        Ok(ProducerEvent::ConnectionLost(ConnectionError::Disconnected))
    ));
    assert!(matches!(
        crx.try_recv(),
        Ok(ConsumerEvent::ConnectionLost(ConnectionError::Disconnected))
    ));
    assert_eq!(router.pending_requests(), 0);
    assert_eq!(router.next_deadline(), None);
    // Registrations are gone: nothing more is delivered.
    router.on_inbound(receipt(1, 0));
    assert!(prx.try_recv().is_err());
}

#[test]
fn receipts_and_messages_go_to_their_owner_and_unknown_ids_are_ignored() {
    let mut router = Router::new(TIMEOUT);
    let (ptx, mut prx) = mpsc::unbounded_channel();
    let (ctx, mut crx) = mpsc::unbounded_channel();
    router.register_producer(ProducerId(4), ptx);
    router.register_consumer(ConsumerId(8), ctx);
    router.on_flow(ConsumerId(8), 2);

    router.on_inbound(receipt(4, 11));
    router.on_inbound(receipt(99, 1)); // unknown producer: logged, ignored
    router.on_inbound(message(8, 5, true));
    router.on_inbound(message(99, 6, true)); // unknown consumer
    router.on_inbound(message(8, 7, false)); // no payload: ignored

    match prx.try_recv() {
        Ok(ProducerEvent::Receipt {
            sequence_id,
            message_id,
            ..
        }) => {
            assert_eq!(sequence_id, SequenceId(11));
            assert_eq!(message_id, Some(MessageId::new(7, 11)));
        }
        other => panic!("{other:?}"),
    }
    assert!(prx.try_recv().is_err());
    match crx.try_recv() {
        Ok(ConsumerEvent::Message {
            message_id,
            redelivery_count,
            consumer_epoch,
            payload,
            ..
        }) => {
            assert_eq!(message_id, MessageId::new(3, 5));
            assert_eq!((redelivery_count, consumer_epoch), (2, Some(1)));
            assert_eq!(payload.data, Bytes::from_static(b"hello"));
        }
        other => panic!("{other:?}"),
    }
    assert!(crx.try_recv().is_err());
}

#[test]
fn broker_close_delivers_the_hint_and_keeps_routing_the_receipts_after_it() {
    let mut router = Router::new(TIMEOUT);
    let (ptx, mut prx) = mpsc::unbounded_channel();
    router.register_producer(ProducerId(1), ptx);
    router.on_inbound(Frame::simple(BaseCommand {
        close_producer: Some(Box::new(proto::CommandCloseProducer {
            producer_id: 1,
            request_id: 0,
            assigned_broker_service_url: Some("pulsar://b2:6650".into()),
            assigned_broker_service_url_tls: None,
        })),
        ..base(Type::CloseProducer)
    }));
    router.on_inbound(receipt(1, 0));
    assert!(matches!(prx.try_recv(),
        Ok(ProducerEvent::Closed(hint)) if hint.broker_url.as_deref() == Some("pulsar://b2:6650")));
    assert!(
        matches!(prx.try_recv(), Ok(ProducerEvent::Receipt { .. })),
        "a receipt after the close still arrives"
    );
    router.unregister_producer(ProducerId(1));
    router.on_inbound(receipt(1, 1));
    assert!(prx.try_recv().is_err(), "nothing once unregistered");
}

#[test]
fn consumer_notifications_are_routed() {
    let mut router = Router::new(TIMEOUT);
    let (ctx, mut crx) = mpsc::unbounded_channel();
    router.register_consumer(ConsumerId(2), ctx);
    router.on_inbound(Frame::simple(BaseCommand {
        active_consumer_change: Some(Box::new(proto::CommandActiveConsumerChange {
            consumer_id: 2,
            is_active: Some(true),
        })),
        ..base(Type::ActiveConsumerChange)
    }));
    router.on_inbound(Frame::simple(BaseCommand {
        reached_end_of_topic: Some(Box::new(proto::CommandReachedEndOfTopic { consumer_id: 2 })),
        ..base(Type::ReachedEndOfTopic)
    }));
    router.on_inbound(Frame::simple(BaseCommand {
        topic_migrated: Some(Box::new(proto::CommandTopicMigrated {
            resource_id: 2,
            resource_type: command_topic_migrated::ResourceType::Consumer as i32,
            broker_service_url: Some("pulsar://other:6650".into()),
            broker_service_url_tls: None,
        })),
        ..base(Type::TopicMigrated)
    }));
    assert!(matches!(
        crx.try_recv(),
        Ok(ConsumerEvent::ActiveConsumerChange { is_active: true })
    ));
    assert!(matches!(
        crx.try_recv(),
        Ok(ConsumerEvent::ReachedEndOfTopic)
    ));
    assert!(matches!(
        crx.try_recv(),
        Ok(ConsumerEvent::TopicMigrated(_))
    ));
}

#[test]
fn a_dropped_mailbox_unregisters_itself() {
    let mut router = Router::new(TIMEOUT);
    let (ptx, prx) = mpsc::unbounded_channel();
    router.register_producer(ProducerId(1), ptx);
    drop(prx);
    router.on_inbound(receipt(1, 0));
    assert!(router.producers.is_empty());
}

#[test]
fn an_entry_beyond_the_permits_granted_is_a_protocol_violation() {
    let mut router = Router::new(TIMEOUT);
    let (ctx, mut crx) = mpsc::unbounded_channel();
    router.register_consumer(ConsumerId(8), ctx);
    router.on_flow(ConsumerId(8), 2);
    router.on_flow(ConsumerId(99), 1000); // not registered: nothing granted
    assert_eq!(router.on_inbound(message(8, 1, true)), Reaction::None);
    assert_eq!(router.on_inbound(message(8, 2, true)), Reaction::None);
    assert_eq!(
        router.on_inbound(message(8, 3, true)),
        Reaction::PermitsExceeded {
            consumer: ConsumerId(8)
        }
    );
    assert!(matches!(crx.try_recv(), Ok(ConsumerEvent::Message { .. })));
    assert!(matches!(crx.try_recv(), Ok(ConsumerEvent::Message { .. })));
    assert!(crx.try_recv().is_err(), "the third is not delivered");
}

#[test]
fn producer_waiting_for_exclusive_access_stays_pending() {
    let t0 = crate::clock::now();
    let mut router = Router::new(TIMEOUT);
    let mut rx = request(&mut router, t0, 3, "PRODUCER");
    let answer = |ready| {
        Frame::simple(BaseCommand {
            producer_success: Some(Box::new(proto::CommandProducerSuccess {
                request_id: 3,
                producer_name: "p".into(),
                producer_ready: Some(ready),
                ..proto::CommandProducerSuccess::default()
            })),
            ..base(Type::ProducerSuccess)
        })
    };
    router.on_inbound(answer(false));
    assert!(rx.try_recv().is_err());
    // Queued: it waits as long as it takes, the operation timeout no longer applies.
    assert_eq!(router.next_deadline(), None);
    assert_eq!(router.expire(t0 + TIMEOUT * 100), 0);
    assert!(rx.try_recv().is_err());
    router.on_inbound(answer(true));
    assert!(matches!(
        rx.try_recv(),
        Ok(Ok(Response::ProducerSuccess(_)))
    ));
    // The same answer naming a LOOKUP does not take it off its timeout.
    let mut lookup = request(&mut router, t0, 3, "LOOKUP");
    router.on_inbound(answer(false));
    assert_eq!(router.expire(t0 + TIMEOUT), 1);
    assert!(matches!(
        lookup.try_recv(),
        Ok(Err(ConnectionError::Timeout { .. }))
    ));
}

#[test]
fn ping_and_auth_challenge_ask_the_actor_to_answer() {
    let mut router = Router::new(TIMEOUT);
    assert_eq!(
        router.on_inbound(Frame::simple(crate::wire::commands::ping())),
        Reaction::SendPong
    );
    assert_eq!(
        router.on_inbound(Frame::simple(crate::wire::commands::pong())),
        Reaction::None
    );
    let challenge = BaseCommand {
        auth_challenge: Some(Box::default()),
        ..base(Type::AuthChallenge)
    };
    assert_eq!(
        router.on_inbound(Frame::simple(challenge)),
        Reaction::AnswerAuthChallenge
    );
}

#[test]
fn a_timeout_of_duration_max_never_overflows() {
    let t0 = crate::clock::now();
    let mut router = Router::new(Duration::MAX);
    let (tx, _rx) = oneshot::channel();
    router.insert_request(t0, RequestId(1), "LOOKUP", tx);
    assert_eq!(router.pending_requests(), 1);
}
