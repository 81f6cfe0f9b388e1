//! A scripted broker: the test plays the broker frame by frame over an
//! in-memory `tokio::io::duplex`, through the crate's own codec (h2's test
//! kit style). [`FakeNetwork`] is a [`Connector`] that hands such streams to
//! scripted brokers listening on made-up addresses, so a client can be
//! redirected from one "broker" to another without any socket.
//!
//! Everything is in memory, so tests may pause tokio's clock.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use pulsar_wire::client::{BrokerAddress, BrokerStream, Connector};
use pulsar_wire::codec::PulsarCodec;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::proto::{self, BaseCommand, ServerError};
use pulsar_wire::wire::{Frame, commands};
use tokio::io::DuplexStream;
use tokio::sync::mpsc;
use tokio_util::codec::Framed;

/// Bytes the duplex pipe buffers in each direction.
const PIPE: usize = 64 * 1024;

/// The broker's end of one connection.
pub struct FakeBroker {
    frames: Framed<Box<dyn BrokerStream>, PulsarCodec>,
    /// Answer PINGs seen while waiting for other frames (default on).
    pub answer_pings: bool,
    /// PINGs seen so far.
    pub pings: usize,
}

impl FakeBroker {
    /// A connected pair: the client's stream and the broker's end.
    pub fn pair() -> (DuplexStream, Self) {
        let (client, broker) = tokio::io::duplex(PIPE);
        (client, Self::over(Box::new(broker)))
    }

    fn over(io: Box<dyn BrokerStream>) -> Self {
        Self {
            frames: Framed::new(io, PulsarCodec::default()),
            answer_pings: true,
            pings: 0,
        }
    }

    /// The next frame that is not a PING; `None` once the client closed the socket.
    pub async fn recv(&mut self) -> Option<Frame> {
        loop {
            let frame = self
                .frames
                .next()
                .await?
                .expect("client sent a valid frame");
            if frame.command.r#type() != Type::Ping {
                return Some(frame);
            }
            self.pings += 1;
            if self.answer_pings {
                self.send(commands::pong()).await;
            }
        }
    }

    /// Answers PINGs until `count` have arrived in all; any other frame is a
    /// test failure.
    pub async fn answer_pings_until(&mut self, count: usize) {
        while self.pings < count {
            let frame = self
                .frames
                .next()
                .await
                .expect("open")
                .expect("valid frame");
            assert_eq!(frame.command.r#type(), Type::Ping, "only PINGs expected");
            self.pings += 1;
            if self.answer_pings {
                self.send(commands::pong()).await;
            }
        }
    }

    /// The next frame, which must be of type `kind`.
    pub async fn expect(&mut self, kind: Type) -> Frame {
        let frame = self
            .recv()
            .await
            .unwrap_or_else(|| panic!("expected {kind:?}, the client closed the socket"));
        let got = frame.command.r#type();
        assert_eq!(got, kind, "expected {kind:?}, got {got:?}");
        frame
    }

    /// Sends one command to the client.
    pub async fn send(&mut self, command: BaseCommand) {
        self.send_frame(Frame::simple(command)).await;
    }

    /// Sends one frame (a MESSAGE with its payload, say) to the client.
    pub async fn send_frame(&mut self, frame: Frame) {
        // A client that is gone is fine: some scripts outlive their client.
        let _ = self.frames.send(frame).await;
    }

    /// Writes `bytes` to the client as they are: hostile input that no
    /// encoder would produce (lying sizes, bad magic, truncated frames).
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt as _;
        // A client that is gone is fine, as in `send_frame`.
        let _ = self.frames.get_mut().write_all(bytes).await;
    }

    /// Expects CONNECT and answers CONNECTED (no `max_message_size`, like pulsar-lite).
    pub async fn handshake(&mut self) {
        self.handshake_with(None).await;
    }

    /// Expects CONNECT and answers CONNECTED with `max_message_size`.
    pub async fn handshake_with(&mut self, max_message_size: Option<i32>) {
        self.expect(Type::Connect).await;
        self.send(answer::connected(max_message_size)).await;
    }

    /// Expects CONNECT asking a Pulsar proxy for `broker` (its
    /// `proxy_to_broker_url`, `host:port`) and answers CONNECTED.
    pub async fn handshake_via_proxy(&mut self, broker: &str) {
        let connect = self.expect(Type::Connect).await;
        let target = connect
            .command
            .connect
            .as_ref()
            .and_then(|c| c.proxy_to_broker_url.clone());
        assert_eq!(target.as_deref(), Some(broker), "CONNECT names the broker");
        self.send(answer::connected(None)).await;
    }

    /// Waits until the client closes the socket, discarding what it sends.
    pub async fn until_closed(&mut self) {
        while self.recv().await.is_some() {}
    }
}

/// The request id a client request carries (LOOKUP, PARTITIONED_METADATA, PRODUCER, SUBSCRIBE,
/// TC_CLIENT_CONNECT_REQUEST, NEW_TXN).
pub fn request_id(frame: &Frame) -> u64 {
    let c = &frame.command;
    c.lookup_topic
        .as_ref()
        .map(|b| b.request_id)
        .or(c.partition_metadata.as_ref().map(|b| b.request_id))
        .or(c.producer.as_ref().map(|b| b.request_id))
        .or(c.subscribe.as_ref().map(|b| b.request_id))
        .or(c.tc_client_connect_request.as_ref().map(|b| b.request_id))
        .or(c.new_txn.as_ref().map(|b| b.request_id))
        .unwrap_or_else(|| panic!("{:?} carries no request id", c.r#type()))
}

/// The topic of a LOOKUP or PARTITIONED_METADATA.
pub fn topic_of(frame: &Frame) -> String {
    let c = &frame.command;
    c.lookup_topic
        .as_ref()
        .map(|b| b.topic.clone())
        .or(c.partition_metadata.as_ref().map(|b| b.topic.clone()))
        .unwrap_or_else(|| panic!("{:?} carries no topic", c.r#type()))
}

/// Commands a broker sends.
pub mod answer {
    use super::*;

    fn base(kind: Type) -> BaseCommand {
        BaseCommand {
            r#type: kind as i32,
            ..BaseCommand::default()
        }
    }

    pub fn connected(max_message_size: Option<i32>) -> BaseCommand {
        BaseCommand {
            connected: Some(Box::new(proto::CommandConnected {
                server_version: "fake-broker".into(),
                protocol_version: Some(21),
                max_message_size,
                feature_flags: None,
            })),
            ..base(Type::Connected)
        }
    }

    /// ACK_RESPONSE of consumer `consumer` to ACK request `request`.
    pub fn ack_response(consumer: u64, request: u64) -> BaseCommand {
        BaseCommand {
            ack_response: Some(Box::new(proto::CommandAckResponse {
                consumer_id: consumer,
                request_id: Some(request),
                ..proto::CommandAckResponse::default()
            })),
            ..base(Type::AckResponse)
        }
    }

    /// ADD_SUBSCRIPTION_TO_TXN_RESPONSE to request `request`: added.
    pub fn subscription_added(request: u64) -> BaseCommand {
        BaseCommand {
            add_subscription_to_txn_response: Some(Box::new(
                proto::CommandAddSubscriptionToTxnResponse {
                    request_id: request,
                    ..proto::CommandAddSubscriptionToTxnResponse::default()
                },
            )),
            ..base(Type::AddSubscriptionToTxnResponse)
        }
    }

    pub fn success(request: u64) -> BaseCommand {
        BaseCommand {
            success: Some(Box::new(proto::CommandSuccess {
                request_id: request,
                schema: None,
            })),
            ..base(Type::Success)
        }
    }

    pub fn error(request: u64, code: ServerError, message: &str) -> BaseCommand {
        BaseCommand {
            error: Some(Box::new(proto::CommandError {
                request_id: request,
                error: code as i32,
                message: message.into(),
            })),
            ..base(Type::Error)
        }
    }

    pub fn lookup(request: u64, kind: LookupType, url: &str, authoritative: bool) -> BaseCommand {
        BaseCommand {
            lookup_topic_response: Some(Box::new(proto::CommandLookupTopicResponse {
                broker_service_url: Some(url.into()),
                response: Some(kind as i32),
                request_id: request,
                authoritative: Some(authoritative),
                ..proto::CommandLookupTopicResponse::default()
            })),
            ..base(Type::LookupResponse)
        }
    }

    /// A Pulsar proxy's lookup answer: Connect to `url`, through the proxy
    /// (`proxy_through_service_url`).
    pub fn lookup_via_proxy(request: u64, url: &str) -> BaseCommand {
        let mut answer = lookup(request, LookupType::Connect, url, true);
        if let Some(body) = answer.lookup_topic_response.as_mut() {
            body.proxy_through_service_url = Some(true);
        }
        answer
    }

    /// TC_CLIENT_CONNECT_RESPONSE: the coordinator is attached, or `error`.
    pub fn tc_connected(request: u64, error: Option<(ServerError, &str)>) -> BaseCommand {
        BaseCommand {
            tc_client_connect_response: Some(Box::new(proto::CommandTcClientConnectResponse {
                request_id: request,
                error: error.map(|(code, _)| code as i32),
                message: error.map(|(_, message)| message.into()),
            })),
            ..base(Type::TcClientConnectResponse)
        }
    }

    /// NEW_TXN_RESPONSE with the new transaction's id.
    pub fn new_txn(request: u64, most_bits: u64, least_bits: u64) -> BaseCommand {
        BaseCommand {
            new_txn_response: Some(Box::new(proto::CommandNewTxnResponse {
                request_id: request,
                txnid_most_bits: Some(most_bits),
                txnid_least_bits: Some(least_bits),
                ..proto::CommandNewTxnResponse::default()
            })),
            ..base(Type::NewTxnResponse)
        }
    }

    /// END_TXN_RESPONSE: the transaction ended as asked.
    pub fn end_txn(request: u64) -> BaseCommand {
        BaseCommand {
            end_txn_response: Some(Box::new(proto::CommandEndTxnResponse {
                request_id: request,
                ..proto::CommandEndTxnResponse::default()
            })),
            ..base(Type::EndTxnResponse)
        }
    }

    /// END_TXN_RESPONSE refusing the end with `code`.
    pub fn end_txn_refused(request: u64, code: ServerError, message: &str) -> BaseCommand {
        BaseCommand {
            end_txn_response: Some(Box::new(proto::CommandEndTxnResponse {
                request_id: request,
                error: Some(code as i32),
                message: Some(message.into()),
                ..proto::CommandEndTxnResponse::default()
            })),
            ..base(Type::EndTxnResponse)
        }
    }

    pub fn partitions(request: u64, partitions: u32) -> BaseCommand {
        BaseCommand {
            partition_metadata_response: Some(Box::new(
                proto::CommandPartitionedTopicMetadataResponse {
                    partitions: Some(partitions),
                    request_id: request,
                    ..proto::CommandPartitionedTopicMetadataResponse::default()
                },
            )),
            ..base(Type::PartitionedMetadataResponse)
        }
    }

    /// AUTH_CHALLENGE asking for refreshed credentials (as Apache Pulsar
    /// sends when a connection's token is about to expire).
    pub fn auth_challenge() -> BaseCommand {
        BaseCommand {
            auth_challenge: Some(Box::new(proto::CommandAuthChallenge {
                server_version: Some("fake-broker".into()),
                challenge: Some(proto::AuthData {
                    auth_method_name: Some("refresh".into()),
                    auth_data: Some(b"refresh".to_vec().into()),
                }),
                protocol_version: Some(21),
            })),
            ..base(Type::AuthChallenge)
        }
    }

    pub fn receipt(producer: u64, sequence: u64) -> BaseCommand {
        BaseCommand {
            send_receipt: Some(Box::new(proto::CommandSendReceipt {
                producer_id: producer,
                sequence_id: sequence,
                message_id: Some(pulsar_wire::MessageId::new(1, sequence).to_proto()),
                highest_sequence_id: None,
            })),
            ..base(Type::SendReceipt)
        }
    }

    /// The receipt of a broker with deduplication on for a sequence id it
    /// has already stored: the position (-1, -1), nothing stored again.
    pub fn duplicate_receipt(producer: u64, sequence: u64) -> BaseCommand {
        let mut receipt = receipt(producer, sequence);
        if let Some(body) = receipt.send_receipt.as_mut() {
            body.message_id = Some(pulsar_wire::MessageId::new(u64::MAX, u64::MAX).to_proto());
        }
        receipt
    }
}

#[derive(Default)]
struct Net {
    listeners: HashMap<String, mpsc::UnboundedSender<DuplexStream>>,
    connects: HashMap<String, usize>,
}

/// Made-up broker addresses with scripted brokers behind them.
#[derive(Clone, Default)]
pub struct FakeNetwork {
    net: Arc<Mutex<Net>>,
}

impl std::fmt::Debug for FakeNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeNetwork")
    }
}

/// Incoming connections to one made-up address.
pub struct FakeListener {
    incoming: mpsc::UnboundedReceiver<DuplexStream>,
}

impl FakeListener {
    /// The broker's end of the next connection to this address.
    pub async fn accept(&mut self) -> FakeBroker {
        FakeBroker::over(Box::new(self.incoming.recv().await.expect("network alive")))
    }

    /// The broker's end of the next connection, after a TLS handshake as
    /// the server `config` describes.
    #[cfg(feature = "tls")]
    pub async fn accept_tls(&mut self, config: Arc<rustls::ServerConfig>) -> FakeBroker {
        let io = self.incoming.recv().await.expect("network alive");
        let tls = tokio_rustls::TlsAcceptor::from(config)
            .accept(io)
            .await
            .expect("TLS handshake");
        FakeBroker::over(Box::new(tls))
    }
}

impl FakeNetwork {
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts connections to `address` (`host:port`).
    pub fn listen(&self, address: &str) -> FakeListener {
        let (tx, incoming) = mpsc::unbounded_channel();
        let mut net = self.net.lock().expect("lock");
        net.listeners.insert(address.to_owned(), tx);
        FakeListener { incoming }
    }

    /// How many times a client connected to `address`.
    pub fn connects(&self, address: &str) -> usize {
        let net = self.net.lock().expect("lock");
        net.connects.get(address).copied().unwrap_or(0)
    }
}

impl Connector for FakeNetwork {
    fn connect(
        &self,
        address: &BrokerAddress,
    ) -> BoxFuture<'static, io::Result<Box<dyn BrokerStream>>> {
        let address = address.to_string();
        let mut net = self.net.lock().expect("lock");
        *net.connects.entry(address.clone()).or_default() += 1;
        let outcome = match net.listeners.get(&address) {
            Some(listener) => {
                let (client, broker) = tokio::io::duplex(PIPE);
                listener
                    .send(broker)
                    .map(|()| Box::new(client) as Box<dyn BrokerStream>)
                    .map_err(|_| io::ErrorKind::ConnectionRefused.into())
            }
            None => Err(io::ErrorKind::ConnectionRefused.into()),
        };
        Box::pin(async move { outcome })
    }
}
