//! The CONNECT handshake against a scripted broker: the negotiated frame
//! limit, a refusal, and silence.

use bytes::Bytes;
use pulsar_wire::auth::AuthFailure;
use pulsar_wire::connection::{Connection, ConnectionError, ConnectionOptions};
use pulsar_wire::ids::{ProducerId, SequenceId};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::{self, ServerError};
use pulsar_wire::wire::{Checksum, Frame, Payload, commands};

use crate::common::fake_broker::{FakeBroker, answer};
use crate::common::init_tracing;

#[tokio::test(start_paused = true)]
async fn max_message_size_from_connected_is_honoured() {
    init_tracing();
    let (io, mut broker) = FakeBroker::pair();
    let (conn, ()) = tokio::join!(
        Connection::connect(io, ConnectionOptions::default()),
        broker.handshake_with(Some(1024))
    );
    let conn = conn.expect("handshake");
    assert_eq!(conn.max_message_size(), 1024);
    let big = Frame {
        command: commands::send(ProducerId(0), SequenceId(0), 1),
        payload: Some(Box::new(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata: proto::MessageMetadata::default(),
            data: Bytes::from(vec![0u8; 20 * 1024]),
        })),
    };
    let result = conn.send_payload(big).await;
    assert!(
        matches!(result, Err(ConnectionError::TooLarge { max, .. }) if max == 1024 + 10 * 1024),
        "{result:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn handshake_failures_are_typed() {
    init_tracing();
    let (io, mut broker) = FakeBroker::pair();
    let refuse = async {
        broker.expect(Type::Connect).await;
        broker
            .send(answer::error(
                0,
                ServerError::AuthenticationError,
                "who are you",
            ))
            .await;
    };
    let (conn, ()) = tokio::join!(
        Connection::connect(io, ConnectionOptions::default()),
        refuse
    );
    assert!(
        matches!(
            conn,
            Err(ConnectionError::AuthenticationRefused {
                ref method,
                failure: AuthFailure::Rejected,
                ref message,
            }) if &**method == "none" && message == "who are you"
        ),
        "{conn:?}"
    );

    let (io, mut silent) = FakeBroker::pair();
    let (conn, _) = tokio::join!(
        Connection::connect(io, ConnectionOptions::default()),
        silent.expect(Type::Connect)
    );
    assert!(
        matches!(conn, Err(ConnectionError::Timeout { op: "CONNECT", .. })),
        "{conn:?}"
    );
}
