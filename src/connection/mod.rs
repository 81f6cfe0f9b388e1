//! One broker connection: the [`Connection`] handle and the actor behind it.
//!
//! Each TCP connection is owned by one task (the actor, in `actor.rs`); any
//! number of cheap [`Connection`] clones talk to it over two lanes. The
//! control lane carries requests, registrations and control frames (ack,
//! flow, redeliver) and is always served before the data lane, which carries
//! SEND frames and is bounded so producers feel backpressure.
//!
//! Most code gets a `Connection` from [`Client::lookup`](crate::client::Client::lookup);
//! [`Connection::connect`] runs one over any byte stream (a `TcpStream`, or
//! `tokio::io::duplex` in tests).

mod actor;
mod command;
mod error;
mod events;
mod handshake;
mod inbound;
mod keepalive;
mod options;
mod outbox;
mod router;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::codec::FramedRead;
use tracing::{Instrument, info, info_span};

pub(crate) use error::is_final_code;
pub use error::{ConnectionError, TlsProblem};
pub(crate) use events::TopicListEvent;
pub use events::{BrokerHint, ConsumerEvent, ProducerEvent, Response};
pub use options::ConnectionOptions;

use crate::clock;
use crate::codec::PulsarCodec;
use crate::ids::{ConsumerId, ProducerId, RequestId, WatcherId};
use crate::proto::BaseCommand;
use crate::wire::{self, Frame};
use command::Command;
#[cfg(feature = "fuzzing")]
pub(crate) use router::Router;

/// Capacity of the control lane: requests, registrations, acks and flow.
const CONTROL_LANE_CAPACITY: usize = 1024;

/// Bytes one read from the socket can take. A consumer with a backlog
/// gets dozens of 1 KiB messages per read rather than seven (tokio-util's
/// default is 8 KiB), and a block is allocated per dozens of messages:
/// the messages' payloads are slices of it.
const READ_BUFFER: usize = 64 * 1024;

/// Names one connection in logs and tells connections apart (unique in the process).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub u64);

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A handle to one broker connection. Cloning is cheap; the connection
/// lives while a handle does (or until it fails or is closed).
///
/// The methods that queue a command without waiting for an answer
/// ([`send_control`](Self::send_control), the registrations) queue it when
/// called if the control lane has room; their futures wait for room when
/// it is full.
///
/// # Examples
/// ```no_run
/// use pulsar_wire::connection::{Connection, ConnectionOptions, Response};
/// use pulsar_wire::wire::commands;
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let socket = tokio::net::TcpStream::connect("127.0.0.1:6650").await?;
/// let conn = Connection::connect(socket, ConnectionOptions::default()).await?;
/// let topic = "persistent://public/default/orders";
/// match conn.request("PARTITIONED_METADATA", |id| commands::partitioned_metadata(topic, id)).await? {
///     Response::PartitionedMetadataResponse(r) => println!("{} partitions", r.partitions()),
///     other => println!("unexpected {}", other.kind()),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

struct Inner {
    id: ConnectionId,
    peer: String,
    control: mpsc::Sender<Command>,
    data: mpsc::Sender<Frame>,
    next_request: AtomicU64,
    /// `Some(error)` once the actor has ended.
    state: watch::Receiver<Option<ConnectionError>>,
    max_message_size: usize,
    /// The smaller of the broker's and this side's limit.
    max_receive_size: usize,
    /// Whether the broker takes topic-list watchers.
    supports_topic_watchers: bool,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.inner.id)
            .field("peer", &self.inner.peer)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Runs the CONNECT handshake over `io` and starts the connection's actor task.
    ///
    /// # Errors
    /// [`ConnectionError::Server`] if the broker refused CONNECT,
    /// [`ConnectionError::Timeout`] if it did not answer within the
    /// operation timeout, or the IO/frame error that broke the handshake.
    pub async fn connect<S>(io: S, options: ConnectionOptions) -> Result<Self, ConnectionError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let id = ConnectionId(NEXT_ID.fetch_add(1, Ordering::Relaxed));
        let span = info_span!("connection", id = %id, peer = %options.peer);
        let (read_half, mut writer) = tokio::io::split(io);
        let max_frame = wire::max_frame_size_for(options.max_message_size);
        let codec = PulsarCodec::with_max_frame(max_frame);
        let mut reader = FramedRead::with_capacity(read_half, codec, READ_BUFFER);
        let connected = handshake::handshake(&mut reader, &mut writer, &options)
            .instrument(span.clone())
            .await?;
        span.in_scope(|| {
            info!(
                server = %connected.server_version,
                protocol = connected.protocol_version,
                max_message_size = connected.max_message_size,
                "connected"
            );
        });

        let (control_tx, control_rx) = mpsc::channel(CONTROL_LANE_CAPACITY);
        let (data_tx, data_rx) = mpsc::channel(options.data_lane_capacity);
        let (state_tx, state_rx) = watch::channel(None);
        let peer = options.peer.clone();
        let max_receive = options.max_message_size;
        let core = actor::Core::new(clock::now(), options);
        let lanes = actor::Lanes {
            control: control_rx,
            data: data_rx,
        };
        tokio::spawn(actor::run(reader, writer, lanes, core, state_tx).instrument(span));
        Ok(Self {
            inner: Arc::new(Inner {
                id,
                peer,
                control: control_tx,
                data: data_tx,
                next_request: AtomicU64::new(0),
                state: state_rx,
                max_message_size: connected.max_message_size,
                max_receive_size: connected.max_message_size.min(max_receive),
                supports_topic_watchers: connected.supports_topic_watchers,
            }),
        })
    }

    /// This connection's id (as in its log span).
    pub fn id(&self) -> ConnectionId {
        self.inner.id
    }

    /// The peer this connection was opened to, as given in [`ConnectionOptions::peer_name`].
    pub fn peer(&self) -> &str {
        &self.inner.peer
    }

    /// Sends a request and waits for its answer.
    ///
    /// The handle allocates the request id and passes it to `build`, which
    /// makes the command (usually a [`wire::commands`] constructor). The
    /// actor registers the request and writes it in one step. `op` names the
    /// request in errors and logs (e.g. `"LOOKUP"`).
    ///
    /// # Errors
    /// [`ConnectionError::Server`] for an error answer (the broker's code
    /// and message), [`ConnectionError::Timeout`] after the operation
    /// timeout, or the error that ended the connection.
    pub async fn request(
        &self,
        op: &'static str,
        build: impl FnOnce(RequestId) -> BaseCommand,
    ) -> Result<Response, ConnectionError> {
        self.send_request(op, build).await?.await
    }

    /// Queues a request as [`request`](Self::request) does, in order with
    /// the commands queued before and after it, and returns the future of
    /// its answer, to await elsewhere.
    ///
    /// # Errors
    /// The error that ended the connection, if the request was not queued.
    pub(crate) async fn send_request(
        &self,
        op: &'static str,
        build: impl FnOnce(RequestId) -> BaseCommand,
    ) -> Result<
        impl Future<Output = Result<Response, ConnectionError>> + Send + 'static,
        ConnectionError,
    > {
        let (command, answer) = self.new_request(op, build);
        self.send_command(command).await?;
        Ok(answer)
    }

    /// A request to queue, and the future of its answer.
    fn new_request(
        &self,
        op: &'static str,
        build: impl FnOnce(RequestId) -> BaseCommand,
    ) -> (
        Command,
        impl Future<Output = Result<Response, ConnectionError>> + Send + 'static,
    ) {
        let id = RequestId(self.inner.next_request.fetch_add(1, Ordering::Relaxed));
        let (reply, answer) = oneshot::channel();
        let command = Command::Request {
            id,
            op,
            command: build(id),
            reply,
        };
        let conn = self.clone();
        let answer = async move { answer.await.unwrap_or_else(|_| Err(conn.final_error())) };
        (command, answer)
    }

    /// Queues a request as [`send_request`](Self::send_request) does, but
    /// when this is called (at once if the control lane has room, else
    /// once it has), and returns the future of its answer, which needs no
    /// borrow of the connection.
    pub(crate) fn queue_request(
        &self,
        op: &'static str,
        build: impl FnOnce(RequestId) -> BaseCommand,
    ) -> impl Future<Output = Result<Response, ConnectionError>> + Send + 'static {
        let (command, answer) = self.new_request(op, build);
        let waiting = self.try_queue(command);
        let conn = self.clone();
        async move {
            if let Some(command) = waiting? {
                conn.send_when_room(command).await?;
            }
            answer.await
        }
    }

    /// Queues a command that gets no answer (ack, flow, redeliver) on the
    /// control lane, ahead of any queued SEND frames. It is queued when
    /// this is called if the lane has room; the future waits for room
    /// otherwise.
    ///
    /// # Errors
    /// The error that ended the connection.
    pub fn send_control(
        &self,
        command: BaseCommand,
    ) -> impl Future<Output = Result<(), ConnectionError>> + Send + '_ {
        self.send_command(Command::Control(command))
    }

    /// Gives back to the broker the `permits` it charged consumer
    /// `consumer` for one entry whose messages never reach the
    /// application (refused, skipped as acked, or a chunk that completes
    /// nothing yet), as [`send_control`](Self::send_control) would a FLOW.
    ///
    /// The FLOW carries every permit, as the broker counts them (by
    /// message); the connection's own count of what the broker may still
    /// send (by entry) gets back only the one permit that entry took. So a
    /// broker that announces more messages in a batch than it holds
    /// cannot lift flow control with the refund.
    ///
    /// # Errors
    /// The error that ended the connection.
    pub fn give_back_permits(
        &self,
        consumer: ConsumerId,
        permits: u32,
    ) -> impl Future<Output = Result<(), ConnectionError>> + Send + '_ {
        self.send_command(Command::GiveBack { consumer, permits })
    }

    /// Queues a SEND frame on the data lane; waits while the lane is full
    /// (backpressure). The receipt or error arrives on the producer's mailbox.
    ///
    /// # Errors
    /// [`ConnectionError::TooLarge`] if the frame exceeds what the broker
    /// accepts, or the error that ended the connection.
    pub async fn send_payload(&self, frame: Frame) -> Result<(), ConnectionError> {
        let size = wire::encoded_len(&frame);
        let max = wire::max_frame_size_for(self.inner.max_message_size);
        if size > max {
            return Err(ConnectionError::TooLarge { size, max });
        }
        self.inner
            .data
            .send(frame)
            .await
            .map_err(|_| self.final_error())
    }

    /// Routes SEND_RECEIPT, SEND_ERROR, CLOSE_PRODUCER and TOPIC_MIGRATED
    /// for producer `id` to `mailbox`. Register before sending PRODUCER.
    ///
    /// The mailbox is unbounded so the actor never blocks on it; its bound is
    /// the producer's own: receipts only come for SENDs it made, so it holds
    /// at most the producer's pending messages. If the connection dies the
    /// mailbox gets [`ProducerEvent::ConnectionLost`], also when it dies
    /// before the registration is processed.
    ///
    /// # Errors
    /// The error that ended the connection.
    pub fn register_producer(
        &self,
        id: ProducerId,
        mailbox: mpsc::UnboundedSender<ProducerEvent>,
    ) -> impl Future<Output = Result<(), ConnectionError>> + Send + '_ {
        self.send_command(Command::RegisterProducer { id, mailbox })
    }

    /// Routes MESSAGE, CLOSE_CONSUMER, ACTIVE_CONSUMER_CHANGE,
    /// REACHED_END_OF_TOPIC and TOPIC_MIGRATED for consumer `id` to
    /// `mailbox`. Register before sending SUBSCRIBE.
    ///
    /// The mailbox is unbounded so a slow consumer never blocks the actor
    /// (and every other consumer on the connection). Its bound is flow
    /// control, enforced here: the connection counts the FLOW permits sent
    /// for `id` and the entries received for it, and a broker that sends an
    /// entry past them ends the connection
    /// ([`ConnectionError::PermitsExceeded`]). So it holds at most the
    /// consumer's receiver queue plus a few notifications. If the connection dies the mailbox gets
    /// [`ConsumerEvent::ConnectionLost`].
    ///
    /// # Errors
    /// The error that ended the connection.
    pub fn register_consumer(
        &self,
        id: ConsumerId,
        mailbox: mpsc::UnboundedSender<ConsumerEvent>,
    ) -> impl Future<Output = Result<(), ConnectionError>> + Send + '_ {
        self.send_command(Command::RegisterConsumer { id, mailbox })
    }

    /// Routes WATCH_TOPIC_UPDATE for watcher `id` to `mailbox`. Register
    /// before sending WATCH_TOPIC_LIST. If the connection dies the mailbox
    /// gets [`TopicListEvent::ConnectionLost`].
    ///
    /// # Errors
    /// The error that ended the connection.
    pub(crate) fn register_watcher(
        &self,
        id: WatcherId,
        mailbox: mpsc::UnboundedSender<TopicListEvent>,
    ) -> impl Future<Output = Result<(), ConnectionError>> + Send + '_ {
        self.send_command(Command::RegisterWatcher { id, mailbox })
    }

    /// Stops routing to watcher `id`. A no-op on a closed connection.
    pub(crate) fn unregister_watcher(&self, id: WatcherId) -> impl Future<Output = ()> + Send + '_ {
        let queued = self.send_command(Command::UnregisterWatcher(id));
        async move {
            let _ = queued.await;
        }
    }

    /// A watcher id unique in the process, as consumer ids.
    pub(crate) fn next_watcher_id(&self) -> WatcherId {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        WatcherId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// Whether the broker takes WATCH_TOPIC_LIST (CONNECTED's feature
    /// flags said so; pulsar-lite sends none).
    pub fn supports_topic_watchers(&self) -> bool {
        self.inner.supports_topic_watchers
    }

    /// Stops routing to producer `id` (after CLOSE_PRODUCER, say). A no-op
    /// on a closed connection, whose registrations are gone anyway.
    pub fn unregister_producer(&self, id: ProducerId) -> impl Future<Output = ()> + Send + '_ {
        let queued = self.send_command(Command::UnregisterProducer(id));
        async move {
            let _ = queued.await;
        }
    }

    /// Stops routing to consumer `id`. A no-op on a closed connection.
    pub fn unregister_consumer(&self, id: ConsumerId) -> impl Future<Output = ()> + Send + '_ {
        let queued = self.send_command(Command::UnregisterConsumer(id));
        async move {
            let _ = queued.await;
        }
    }

    /// Closes producer `id` on the broker (CLOSE_PRODUCER, waiting for the
    /// answer) and stops routing to it, whatever the answer.
    ///
    /// # Errors
    /// The CLOSE_PRODUCER request's error: the broker refused it, gave no
    /// answer in time, or the connection is gone (then the broker has let
    /// go of the producer already).
    pub async fn close_producer(&self, id: ProducerId) -> Result<(), ConnectionError> {
        let closed = self
            .request("CLOSE_PRODUCER", |request| {
                crate::wire::commands::close_producer(id, request)
            })
            .await;
        self.unregister_producer(id).await;
        closed.map(drop)
    }

    /// Closes consumer `id` on the broker (CLOSE_CONSUMER, waiting for the
    /// answer) and stops routing to it, whatever the answer.
    ///
    /// # Errors
    /// As [`close_producer`](Self::close_producer), for CLOSE_CONSUMER.
    pub async fn close_consumer(&self, id: ConsumerId) -> Result<(), ConnectionError> {
        let closed = self
            .request("CLOSE_CONSUMER", |request| {
                crate::wire::commands::close_consumer(id, request)
            })
            .await;
        self.unregister_consumer(id).await;
        closed.map(drop)
    }

    /// A producer id never used before on this connection.
    ///
    /// Ids are unique in the whole process, not only per connection: a
    /// broker may still hold a producer or consumer of a connection that was
    /// reset (pulsar-lite does, and closes the new connection when an id
    /// comes again), so a reconnect must not start over at 0.
    pub fn next_producer_id(&self) -> ProducerId {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        ProducerId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// A consumer id never used before on this connection (use a fresh one
    /// for every subscribe attempt); unique in the process, as producer ids.
    pub fn next_consumer_id(&self) -> ConsumerId {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        ConsumerId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The largest message the broker accepts (CONNECTED's
    /// `max_message_size`, or 5 MiB when it sent none).
    pub fn max_message_size(&self) -> usize {
        self.inner.max_message_size
    }

    /// The largest message accepted from the broker: the smaller of its
    /// `max_message_size` and [`ConnectionOptions::max_message_size`].
    /// Frames past it are refused.
    pub fn max_receive_size(&self) -> usize {
        self.inner.max_receive_size
    }

    /// Whether the connection has ended (failed or closed).
    pub fn is_closed(&self) -> bool {
        self.inner.state.borrow().is_some()
    }

    /// Waits until the connection ends; returns the error that ended it
    /// (the same one every waiter got). Returns at once if it already has.
    pub async fn closed(&self) -> ConnectionError {
        wait_closed(self.inner.state.clone()).await
    }

    /// A future that resolves when the connection ends, without holding the
    /// connection open (the pool uses it to forget dead connections).
    pub(crate) fn closed_signal(
        &self,
    ) -> impl std::future::Future<Output = ConnectionError> + Send + 'static {
        wait_closed(self.inner.state.clone())
    }

    /// Flushes what is queued, closes the socket, and fails every pending
    /// request and registration with [`ConnectionError::Closed`]. Returns
    /// once that is done; at once if the connection had already ended.
    pub async fn close(&self) {
        let (done, finished) = oneshot::channel();
        if self.send_command(Command::Close { done }).await.is_ok() {
            let _ = finished.await;
        }
    }

    /// Queues `command` on the control lane, at once when it has room (as
    /// it nearly always has): the future returned then holds nothing. Only
    /// a full lane makes it wait, in a boxed future that holds the command,
    /// so the futures of the tasks awaiting this (every consumer's and
    /// producer's) stay small.
    fn send_command(
        &self,
        command: Command,
    ) -> impl Future<Output = Result<(), ConnectionError>> + Send + '_ {
        let queued = self
            .try_queue(command)
            .map(|full| full.map(|command| Box::pin(self.send_when_room(command))));
        async move {
            match queued {
                Ok(None) => Ok(()),
                Ok(Some(waiting)) => waiting.await,
                Err(err) => Err(err),
            }
        }
    }

    /// Queues `command` on the control lane now if it has room; hands it
    /// back if the lane is full.
    fn try_queue(&self, command: Command) -> Result<Option<Command>, ConnectionError> {
        match self.inner.control.try_send(command) {
            Ok(()) => Ok(None),
            Err(mpsc::error::TrySendError::Full(command)) => Ok(Some(command)),
            Err(mpsc::error::TrySendError::Closed(command)) => Err(self.fail(command)),
        }
    }

    /// Queues `command` once the control lane has room.
    async fn send_when_room(&self, command: Command) -> Result<(), ConnectionError> {
        match self.inner.control.send(command).await {
            Ok(()) => Ok(()),
            Err(mpsc::error::SendError(command)) => Err(self.fail(command)),
        }
    }

    /// Answers `command` with the error that ended the connection, and
    /// returns that error.
    fn fail(&self, command: Command) -> ConnectionError {
        let err = self.final_error();
        command.fail(&err);
        err
    }

    /// The error that ended the connection (`Closed` if the actor is gone without one).
    fn final_error(&self) -> ConnectionError {
        self.inner
            .state
            .borrow()
            .clone()
            .unwrap_or(ConnectionError::Closed)
    }
}

async fn wait_closed(mut state: watch::Receiver<Option<ConnectionError>>) -> ConnectionError {
    match state.wait_for(Option::is_some).await {
        Ok(err) => err.clone().unwrap_or(ConnectionError::Closed),
        Err(_) => ConnectionError::Closed,
    }
}
