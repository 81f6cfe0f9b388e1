//! Dead-letter forwarding against the scripted broker (paused clock): the
//! original is acked only after the copy's receipt, a failed copy
//! redelivers it after a backoff, and a hanging publish stalls nothing.

use std::time::Duration;

use pulsar_wire::MessageId;
use pulsar_wire::consumer::dead_letter::{ORIGIN_MESSAGE_ID, REAL_TOPIC};
use pulsar_wire::consumer::{DeadLetterPolicy, SubscriptionType};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::proto::{self, BaseCommand, ServerError};
use pulsar_wire::wire::{Checksum, Frame};

use crate::common::fake_broker::{FakeNetwork, answer, request_id, topic_of};
use crate::common::guard;
use crate::consume::{SERVICE, TOPIC, message, subscribed_with};

/// A MESSAGE for `consumer` of entry `(1, entry)` delivered `count` times before.
fn redelivered(consumer: u64, entry: u64, text: &'static str, count: u32) -> Frame {
    let mut frame = message(consumer, entry, text, Checksum::Valid);
    if let Some(m) = frame.command.message.as_mut() {
        m.redelivery_count = Some(count);
    }
    frame
}

/// A dead-letter forward acks the original only after the copy's receipt:
/// a failed publish redelivers it (no ack, after a 100 ms backoff), the next delivery is forwarded
/// again and acked once the broker confirms. The application never sees it.
#[tokio::test(start_paused = true)]
async fn a_dead_letter_original_is_acked_only_after_the_copy_is_confirmed() {
    guard("dead letter receipt", async {
        let net = FakeNetwork::default();
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .dead_letter_policy(DeadLetterPolicy::after_redeliveries(2))
        })
        .await;
        broker.send_frame(redelivered(id, 5, "poison", 2)).await;

        // The dead-letter producer is created on first use.
        let meta = broker.expect(Type::PartitionedMetadata).await;
        let dlq = format!("{TOPIC}-sub-DLQ");
        assert_eq!(topic_of(&meta), dlq);
        broker.send(answer::partitions(request_id(&meta), 0)).await;
        let lookup = broker.expect(Type::Lookup).await;
        let here = format!("pulsar://{SERVICE}");
        let found = answer::lookup(request_id(&lookup), LookupType::Connect, &here, true);
        broker.send(found).await;
        let create = broker.expect(Type::Producer).await;
        let body = create.command.producer.as_ref().expect("body");
        assert_eq!(body.topic, dlq);
        let producer = body.producer_id;
        broker
            .send(BaseCommand {
                r#type: Type::ProducerSuccess as i32,
                producer_success: Some(Box::new(proto::CommandProducerSuccess {
                    request_id: body.request_id,
                    producer_name: "dlq".into(),
                    last_sequence_id: Some(-1),
                    ..proto::CommandProducerSuccess::default()
                })),
                ..BaseCommand::default()
            })
            .await;

        // First copy: the broker fails it. The original is redelivered, and
        // the frame right after the SEND is that request, not an ACK.
        let send = broker.expect(Type::Send).await;
        let props: Vec<(String, String)> = send
            .payload
            .as_ref()
            .expect("payload")
            .metadata
            .properties
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect();
        assert!(
            props.contains(&(REAL_TOPIC.into(), TOPIC.into())),
            "{props:?}"
        );
        assert!(
            props.contains(&(ORIGIN_MESSAGE_ID.into(), "1:5:-1".into())),
            "{props:?}"
        );
        let sequence = send.command.send.as_ref().expect("send").sequence_id;
        // The DLQ refuses the copy for good (a transient error would only
        // make its producer send it again). Paused clock: the backoff
        // before the redelivery is exact.
        let failed_at = tokio::time::Instant::now();
        broker
            .send(BaseCommand {
                r#type: Type::SendError as i32,
                send_error: Some(Box::new(proto::CommandSendError {
                    producer_id: producer,
                    sequence_id: sequence,
                    error: ServerError::NotAllowedError as i32,
                    message: "refused".into(),
                })),
                ..BaseCommand::default()
            })
            .await;
        let redeliver = broker.expect(Type::RedeliverUnacknowledgedMessages).await;
        let ids = &redeliver
            .command
            .redeliver_unacknowledged_messages
            .as_ref()
            .expect("body")
            .message_ids;
        assert_eq!(ids, &[MessageId::new(1, 5).to_proto()]);
        assert_eq!(
            failed_at.elapsed(),
            Duration::from_millis(100),
            "the first failure backs off 100 ms"
        );

        // Back with count 3: forwarded again; this time the broker confirms
        // and only then the original is acked.
        broker.send_frame(redelivered(id, 5, "poison", 3)).await;
        let send = broker.expect(Type::Send).await;
        let sequence = send.command.send.as_ref().expect("send").sequence_id;
        broker.send(answer::receipt(producer, sequence)).await;
        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.as_ref().expect("body");
        assert_eq!(body.message_id, [MessageId::new(1, 5).to_proto()]);
        assert!(matches!(consumer.try_receive().await, Ok(None)));
    })
    .await;
}

/// A dead-letter publish that hangs does not hold up the consumer: while
/// the broker leaves the DLQ's metadata request unanswered, another
/// message is delivered and its ACK goes out.
#[tokio::test(start_paused = true)]
async fn a_hanging_dead_letter_publish_does_not_stall_the_consumer() {
    guard("dead letter off the loop", async {
        let net = FakeNetwork::default();
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .dead_letter_policy(DeadLetterPolicy::after_redeliveries(1))
        })
        .await;
        broker.send_frame(redelivered(id, 5, "poison", 1)).await;
        let meta = broker.expect(Type::PartitionedMetadata).await;
        assert_eq!(topic_of(&meta), format!("{TOPIC}-sub-DLQ"));
        // Never answered. Meanwhile:
        broker.send_frame(redelivered(id, 6, "fine", 0)).await;
        let m = consumer.receive().await.expect("receive");
        assert_eq!(m.payload().as_ref(), b"fine");
        consumer.ack(&m).await.expect("ack");
        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.as_ref().expect("body");
        assert_eq!(body.message_id, [MessageId::new(1, 6).to_proto()]);
    })
    .await;
}
