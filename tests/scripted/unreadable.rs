//! Entries the consumer cannot decode, against a scripted broker: an
//! encrypted entry and one with an unknown codec are never acked, each
//! comes to the application as an `Unreadable` error naming it, the
//! messages after them keep flowing, and the
//! ack timeout asks for them again, once per expiry: no spinning.

use std::time::Duration;

use bytes::Bytes;
use pulsar_wire::MessageId;
use pulsar_wire::consumer::{
    ConsumerBuilder, ConsumerError, CryptoFailureAction, SubscriptionType, Unreadable,
};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::{self, EncryptionKeys};
use pulsar_wire::wire::Checksum;

use super::consume::{message, subscribed_with};
use super::hostile_entries::{entry, meta};
use crate::common::fake_broker::FakeNetwork;
use crate::common::guard;

fn encrypted() -> proto::MessageMetadata {
    proto::MessageMetadata {
        encryption_keys: vec![EncryptionKeys {
            key: "k1".into(),
            value: Bytes::from_static(b"data key"),
            metadata: Vec::new(),
        }],
        ..meta(None, 0, None)
    }
}

fn unreadable(result: Result<pulsar_wire::Message, ConsumerError>) -> (MessageId, Unreadable) {
    match result {
        Err(ConsumerError::Unreadable { id, reason, .. }) => (id, reason),
        other => panic!("expected Unreadable, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn unreadable_entries_are_never_acked_and_come_back_after_the_ack_timeout() {
    let net = FakeNetwork::new();
    guard("unreadable entries", async {
        let setup = |b: ConsumerBuilder| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_timeout(Duration::from_secs(5))
        };
        let (mut consumer, mut broker, id) = subscribed_with(&net, setup).await;
        let ciphertext = Bytes::from_static(b"ciphertext");
        broker
            .send_frame(entry(id, 10, encrypted(), ciphertext))
            .await;
        let odd = Bytes::from_static(b"abcd");
        broker
            .send_frame(entry(id, 11, meta(None, 99, Some(4)), odd))
            .await;

        let (first, why) = unreadable(consumer.receive().await);
        assert_eq!((first, why), (MessageId::new(1, 10), Unreadable::Encrypted));
        let (second, why) = unreadable(consumer.receive().await);
        assert_eq!(
            (second, why),
            (MessageId::new(1, 11), Unreadable::UnknownCompression(99))
        );
        broker
            .send_frame(message(id, 12, "after", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("the readable one");
        assert_eq!(m.id(), MessageId::new(1, 12));
        consumer.ack(&m).await.expect("ack");
        // The first ACK on the wire is the readable message's.
        let ack = broker.expect(Type::Ack).await;
        let ids = &ack.command.ack.as_ref().expect("body").message_id;
        assert_eq!(ids.iter().map(|i| i.entry_id).collect::<Vec<_>>(), [12]);

        // The ack timeout requests both again, in one command, once.
        let redeliver = broker.expect(Type::RedeliverUnacknowledgedMessages).await;
        let body = redeliver
            .command
            .redeliver_unacknowledged_messages
            .expect("body");
        let entries: Vec<_> = body.message_ids.iter().map(|i| i.entry_id).collect();
        assert_eq!(entries, [10, 11]);
        assert!(consumer.try_receive().await.expect("open").is_none());
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn discard_acks_an_encrypted_entry_and_consume_hands_it_out() {
    let net = FakeNetwork::new();
    guard("crypto failure actions", async {
        let discard = |b: ConsumerBuilder| {
            b.subscription_type(SubscriptionType::Shared)
                .crypto_failure_action(CryptoFailureAction::Discard)
        };
        let (_consumer, mut broker, id) = subscribed_with(&net, discard).await;
        let ciphertext = Bytes::from_static(b"ciphertext");
        broker
            .send_frame(entry(id, 10, encrypted(), ciphertext.clone()))
            .await;
        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.as_ref().expect("body");
        let decryption = proto::command_ack::ValidationError::DecryptionError as i32;
        assert_eq!(body.validation_error, Some(decryption));

        let net = FakeNetwork::new();
        let consume = |b: ConsumerBuilder| b.crypto_failure_action(CryptoFailureAction::Consume);
        let (mut consumer, mut broker, id) = subscribed_with(&net, consume).await;
        broker
            .send_frame(entry(id, 10, encrypted(), ciphertext.clone()))
            .await;
        let m = consumer.receive().await.expect("handed out");
        assert_eq!(m.payload(), &ciphertext);
        let context = m.encryption_context().expect("context");
        assert_eq!(context.keys()[0].name, "k1");
        consumer.ack(&m).await.expect("ack");
        let ack = broker.expect(Type::Ack).await;
        assert_eq!(
            ack.command.ack.as_ref().expect("body").validation_error,
            None
        );
    })
    .await;
}
