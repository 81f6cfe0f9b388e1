//! Proof on the wire: the codec alone, over a plain `TcpStream`, against the
//! real broker. No client layer is involved.

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use prost::Message as _;
use pulsar_wire::MessageId;
use pulsar_wire::codec::PulsarCodec;
use pulsar_wire::ids::{ConsumerId, ProducerId, RequestId, SequenceId};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::{self, BaseCommand, MessageMetadata, SingleMessageMetadata};
use pulsar_wire::wire::{self, Frame, batch, commands};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

use crate::common::broker::{BrokerKind, BrokerOptions, TestBroker, skip_unless};
use crate::common::{guard, unique_topic};

/// A connection speaking raw frames.
struct RawConnection {
    frames: Framed<TcpStream, PulsarCodec>,
    /// Broker PINGs seen (each answered with a PONG).
    pings_answered: usize,
    answer_pings: bool,
}

impl RawConnection {
    async fn open(broker: &TestBroker) -> Self {
        let socket = TcpStream::connect(broker.addr()).await.expect("connect");
        Self {
            frames: Framed::new(socket, PulsarCodec::default()),
            pings_answered: 0,
            answer_pings: true,
        }
    }

    /// Opens a connection and completes CONNECT → CONNECTED.
    async fn connected(broker: &TestBroker) -> (Self, proto::CommandConnected) {
        let mut conn = Self::open(broker).await;
        conn.send(commands::connect(None, None)).await;
        let frame = conn.next().await.expect("CONNECTED");
        assert_eq!(
            frame.command.r#type(),
            Type::Connected,
            "{:?}",
            frame.command.r#type()
        );
        (conn, *frame.command.connected.expect("body"))
    }

    async fn send(&mut self, command: BaseCommand) {
        self.frames
            .send(Frame::simple(command))
            .await
            .expect("send");
    }

    async fn send_payload(&mut self, command: BaseCommand, metadata: MessageMetadata, data: Bytes) {
        let frame = Frame {
            command,
            payload: Some(Box::new(wire::Payload {
                broker_entry_metadata: None,
                checksum: wire::Checksum::Valid,
                metadata,
                data,
            })),
        };
        self.frames.send(frame).await.expect("send");
    }

    /// The next frame that is not a broker PING (PINGs are answered here
    /// unless `answer_pings` is off); `None` when the broker closed the socket.
    async fn next(&mut self) -> Option<Frame> {
        loop {
            let frame = self.frames.next().await?.expect("valid frame");
            if frame.command.r#type() == Type::Ping {
                if self.answer_pings {
                    self.send(commands::pong()).await;
                    self.pings_answered += 1;
                }
                continue;
            }
            return Some(frame);
        }
    }

    /// Reads frames, answering PINGs, until `count` PINGs have been answered.
    async fn answer_pings_until(&mut self, count: usize) {
        while self.pings_answered < count {
            let frame = self
                .frames
                .next()
                .await
                .expect("open")
                .expect("valid frame");
            assert_eq!(
                frame.command.r#type(),
                Type::Ping,
                "only PINGs expected while idle"
            );
            self.send(commands::pong()).await;
            self.pings_answered += 1;
        }
    }

    async fn expect(&mut self, kind: Type) -> Frame {
        let frame = self
            .next()
            .await
            .unwrap_or_else(|| panic!("closed while waiting for {kind:?}"));
        assert_eq!(
            frame.command.r#type(),
            kind,
            "unexpected {:?}",
            frame.command
        );
        frame
    }
}

#[tokio::test]
async fn connect_is_answered_with_connected() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let (_conn, connected) = guard("handshake", RawConnection::connected(&broker)).await;
    assert!(!connected.server_version.is_empty());
}

#[tokio::test]
async fn ping_is_answered_with_pong() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("ping", async {
        let (mut conn, _) = RawConnection::connected(&broker).await;
        conn.send(commands::ping()).await;
        conn.expect(Type::Pong).await;
    })
    .await;
}

#[tokio::test]
async fn answering_broker_pings_keeps_the_connection_alive() {
    if skip_unless(
        BrokerKind::Lite,
        "needs a broker of its own with a 1 s keepalive",
    ) {
        return;
    }
    // PING every second, closed after 2 s without PONG.
    let options = BrokerOptions {
        keep_alive_secs: 1,
        liveness_timeout_secs: 2,
        ..BrokerOptions::default()
    };
    let Some(broker) = TestBroker::start_with(options).await else {
        return;
    };
    guard("keepalive", async {
        let (mut answering, _) = RawConnection::connected(&broker).await;
        let (mut silent, _) = RawConnection::connected(&broker).await;
        silent.answer_pings = false;
        let silent_closed = async { while silent.next().await.is_some() {} };
        // Three answered PINGs span more than the 2 s liveness timeout.
        tokio::join!(silent_closed, answering.answer_pings_until(3));
        // The silent connection was closed by the broker (answering matters);
        // the answering one outlived it and still works.
        let topic = unique_topic("keepalive");
        answering
            .send(commands::lookup(&topic, RequestId(1), false))
            .await;
        answering.expect(Type::LookupResponse).await;
    })
    .await;
}

#[tokio::test]
async fn lookup_answers_connect_to_this_broker() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("lookup", async {
        let (mut conn, _) = RawConnection::connected(&broker).await;
        conn.send(commands::lookup(
            &unique_topic("lookup"),
            RequestId(7),
            false,
        ))
        .await;
        let frame = conn.expect(Type::LookupResponse).await;
        let answer = frame.command.lookup_topic_response.expect("body");
        assert_eq!(answer.request_id, 7);
        assert_eq!(
            answer.response(),
            proto::command_lookup_topic_response::LookupType::Connect
        );
        assert_eq!(
            answer.broker_service_url.as_deref(),
            Some(broker.service_url().as_str())
        );
    })
    .await;
}

#[tokio::test]
async fn partitioned_metadata_reports_partitions() {
    let partitioned = unique_topic("partitioned");
    let options = BrokerOptions {
        partitioned_topics: vec![(partitioned.clone(), 3)],
        ..BrokerOptions::default()
    };
    let Some(broker) = TestBroker::start_with(options).await else {
        return;
    };
    guard("partitioned metadata", async {
        let (mut conn, _) = RawConnection::connected(&broker).await;
        for (topic, request, partitions) in [(partitioned, 1, 3), (unique_topic("plain"), 2, 0)] {
            conn.send(commands::partitioned_metadata(&topic, RequestId(request)))
                .await;
            let frame = conn.expect(Type::PartitionedMetadataResponse).await;
            let answer = frame.command.partition_metadata_response.expect("body");
            assert_eq!(
                (answer.request_id, answer.partitions),
                (request, Some(partitions)),
                "{topic}"
            );
        }
    })
    .await;
}

fn metadata(sequence_id: u64) -> MessageMetadata {
    MessageMetadata {
        producer_name: "raw-producer".into(),
        sequence_id,
        publish_time: 1_700_000_000_000,
        properties: vec![proto::KeyValue {
            key: "origin".into(),
            value: "pulsar-wire".into(),
        }],
        partition_key: Some("k".into()),
        event_time: Some(42),
        ..MessageMetadata::default()
    }
}

/// The broker accepts what we encode — a plain SEND and a batched SEND —
/// and hands it back to a consumer unchanged.
#[tokio::test]
async fn broker_accepts_our_frames_and_returns_them_intact() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let topic = unique_topic("raw-frames");
    guard("produce and consume raw frames", async {
        let (mut conn, _) = RawConnection::connected(&broker).await;
        conn.send(commands::producer(proto::CommandProducer {
            topic: topic.clone(),
            producer_id: 1,
            request_id: 1,
            ..proto::CommandProducer::default()
        }))
        .await;
        conn.expect(Type::ProducerSuccess).await;

        conn.send_payload(
            commands::send(ProducerId(1), SequenceId(0), 1),
            metadata(0),
            Bytes::from_static(b"single"),
        )
        .await;
        let receipt = conn
            .expect(Type::SendReceipt)
            .await
            .command
            .send_receipt
            .expect("body");
        assert_eq!((receipt.producer_id, receipt.sequence_id), (1, 0));
        let first_id = MessageId::from_proto(receipt.message_id.as_ref().expect("id"));

        let mut batch_payload = BytesMut::new();
        for (i, text) in ["one", "two", "three"].iter().enumerate() {
            let member = SingleMessageMetadata {
                payload_size: text.len() as i32,
                partition_key: Some(format!("key-{i}")),
                sequence_id: Some(1 + i as u64),
                ..SingleMessageMetadata::default()
            };
            batch::write_member(&member, text.as_bytes(), &mut batch_payload);
        }
        let batch_metadata = MessageMetadata {
            num_messages_in_batch: Some(3),
            ..metadata(1)
        };
        conn.send_payload(
            commands::send(ProducerId(1), SequenceId(1), 3),
            batch_metadata,
            batch_payload.freeze(),
        )
        .await;
        conn.expect(Type::SendReceipt).await;

        conn.send(commands::subscribe(proto::CommandSubscribe {
            topic: topic.clone(),
            subscription: "raw".into(),
            sub_type: proto::command_subscribe::SubType::Shared as i32,
            consumer_id: 1,
            request_id: 2,
            initial_position: Some(proto::command_subscribe::InitialPosition::Earliest as i32),
            ..proto::CommandSubscribe::default()
        }))
        .await;
        conn.expect(Type::Success).await;
        conn.send(commands::flow(ConsumerId(1), 10)).await;

        let single = conn.expect(Type::Message).await;
        let id = MessageId::from_proto(&single.command.message.as_ref().expect("body").message_id);
        assert_eq!(id, first_id);
        let payload = single.payload.expect("payload");
        assert_eq!(payload.data, Bytes::from_static(b"single"));
        assert_eq!(payload.metadata.properties, metadata(0).properties);
        assert_eq!(payload.metadata.partition_key.as_deref(), Some("k"));
        assert_eq!(payload.metadata.event_time, Some(42));

        let batched = conn.expect(Type::Message).await.payload.expect("payload");
        assert_eq!(batched.metadata.num_messages_in_batch, Some(3));
        let members: Vec<_> = batch::members(batched.data, 3)
            .collect::<Result<_, _>>()
            .expect("members");
        let texts: Vec<&[u8]> = members.iter().map(|m| &m.payload[..]).collect();
        assert_eq!(texts, [&b"one"[..], b"two", b"three"]);
        assert_eq!(members[2].metadata.partition_key.as_deref(), Some("key-2"));
    })
    .await;
}

/// A frame we encode is also what `prost` would produce for the same
/// command: no hand-rolled protobuf sneaks in.
#[test]
fn our_command_bytes_are_plain_protobuf() {
    let command = commands::lookup("persistent://public/default/t", RequestId(3), true);
    let mut buf = BytesMut::new();
    wire::encode_command(&command, &mut buf).expect("encode");
    assert_eq!(&buf[8..], &command.encode_to_vec()[..]);
}
