//! The connection actor: the one task that owns a broker socket.
//!
//! It waits on six things at once, in this order of preference (`biased`):
//! writing out what is queued, reading a frame, the control lane (requests,
//! registrations, acks, flow: never queued behind data), the data lane (SEND
//! frames, bounded: producer backpressure), and one timer for request
//! timeouts and keepalive. After each turn of reads it takes what the lanes
//! hold without waiting, so a socket that is always ready cannot starve
//! them. Outgoing frames are queued in one [`Outbox`]
//! (a payload after its encoded head, not copied) that is written with
//! vectored writes as the socket accepts it, so a slow broker never stops the
//! actor from reading; while the buffer is above a high-water mark the lanes
//! are not read, which pushes back on the handles. The sixth is fresh
//! credentials being fetched to answer an AUTH_CHALLENGE. A socket that
//! takes none of the queued bytes for an operation timeout ends the
//! connection ([`ConnectionError::WriteStalled`]), even while the broker
//! keeps sending (which keeps the keepalive content).
//!
//! Only the loop awaits. What happens on a command, a frame or a tick is
//! decided by plain functions over [`Core`] and the pure [`Router`] and
//! [`Keepalive`]. When the loop ends for any reason, every waiter and every
//! registration gets the same error ("poison") and the lanes are drained,
//! so nothing waits forever.

use std::io::{self, IoSlice};
use std::task::Poll;
use std::time::Instant;

use bytes::Buf;
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::codec::FramedRead;
use tracing::{debug, trace, warn};

use super::command::Command;
use super::handshake::challenge_answer;
use super::inbound::Reaction;
use super::keepalive::{self, Keepalive};
use super::outbox::{MAX_SLICES, Outbox};
use super::router::Router;
use super::{ConnectionError, ConnectionOptions};
use crate::auth::{self, AuthError};
use crate::clock;
use crate::codec::PulsarCodec;
use crate::ids::ConsumerId;
use crate::proto::BaseCommand;
use crate::wire::commands::AuthPayload;
use crate::wire::{Frame, FrameError, commands};

/// Above this many queued output bytes the lanes are not read until the
/// socket takes some (one frame may overshoot it).
const HIGH_WATER: usize = 256 * 1024;

/// Frames taken from the socket in one turn of the loop, after the first:
/// one read brings dozens of MESSAGE frames, and the turn's fixed work
/// (the clock, the timer, the write side) is done once for them.
const FRAMES_PER_TURN: usize = 64;

/// The receiving ends of a connection's two lanes.
pub(crate) struct Lanes {
    pub(crate) control: mpsc::Receiver<Command>,
    pub(crate) data: mpsc::Receiver<Frame>,
}

/// The actor's state apart from the socket: what the plain handlers touch.
pub(crate) struct Core {
    pub(crate) router: Router,
    pub(crate) keepalive: Keepalive,
    pub(crate) options: ConnectionOptions,
    /// Encoded frames not yet written to the socket.
    pub(crate) out: Outbox,
    /// Since when bytes have waited for the socket without any being
    /// taken (`None` while nothing waits, or the last write made progress
    /// and nothing is left).
    pub(crate) stalled_since: Option<Instant>,
    /// Fresh credentials being fetched to answer an AUTH_CHALLENGE.
    pub(crate) pending_auth: Option<PendingAuth>,
}

/// Credentials on their way from the [`Authentication`](crate::auth::Authentication) provider.
pub(crate) type PendingAuth = BoxFuture<'static, Result<AuthPayload, AuthError>>;

impl Core {
    pub(crate) fn new(now: Instant, options: ConnectionOptions) -> Self {
        Self {
            router: Router::new(options.operation_timeout),
            keepalive: Keepalive::new(now, options.keepalive_interval),
            options,
            out: Outbox::default(),
            stalled_since: None,
            pending_auth: None,
        }
    }

    fn write_command(&mut self, command: &BaseCommand) -> Result<(), FrameError> {
        self.out.command(command)
    }

    /// The earliest moment a timer has something to do.
    fn next_deadline(&self) -> Instant {
        let keepalive = self.keepalive.next_deadline();
        let write = self
            .stalled_since
            .map(|since| clock::after(since, self.options.operation_timeout));
        [self.router.next_deadline(), write]
            .into_iter()
            .flatten()
            .fold(keepalive, Instant::min)
    }

    /// Notes the state of the output after a write of `written` bytes (or
    /// none) at `now`: a write that made progress restarts the stall clock,
    /// bytes left waiting start it.
    pub(crate) fn on_output(&mut self, now: Instant, written: usize) {
        if self.out.is_empty() {
            self.stalled_since = None;
        } else if written > 0 || self.stalled_since.is_none() {
            self.stalled_since = Some(now);
        }
    }
}

/// Handles one command from the control lane; returns the completion signal
/// of a `Close` (the loop ends on it).
pub(crate) fn handle_command(
    core: &mut Core,
    now: Instant,
    command: Command,
) -> Option<oneshot::Sender<()>> {
    match command {
        Command::Request {
            id,
            op,
            command,
            reply,
        } => match core.write_command(&command) {
            Ok(()) => {
                trace!(request = %id, op, "request sent");
                core.router.insert_request(now, id, op, reply);
            }
            Err(e) => {
                let _ = reply.send(Err(e.into()));
            }
        },
        Command::Control(command) => {
            if let Some(flow) = &command.flow {
                core.router
                    .on_flow(ConsumerId(flow.consumer_id), flow.message_permits);
            }
            if let Err(e) = core.write_command(&command) {
                let kind = command.r#type().as_str_name();
                warn!(command = kind, error = %e, "control command could not be encoded");
            }
        }
        Command::GiveBack { consumer, permits } => {
            // The broker counts members, the router entries: a refund
            // counted in members would let a broker that lies about a
            // batch's size grant itself permits.
            core.router.on_flow(consumer, permits.min(1));
            if let Err(e) = core.write_command(&commands::flow(consumer, permits)) {
                warn!(command = "FLOW", error = %e, "control command could not be encoded");
            }
        }
        Command::RegisterProducer { id, mailbox } => core.router.register_producer(id, mailbox),
        Command::RegisterConsumer { id, mailbox } => core.router.register_consumer(id, mailbox),
        Command::UnregisterProducer(id) => core.router.unregister_producer(id),
        Command::UnregisterConsumer(id) => core.router.unregister_consumer(id),
        Command::RegisterWatcher { id, mailbox } => core.router.register_watcher(id, mailbox),
        Command::UnregisterWatcher(id) => core.router.unregister_watcher(id),
        Command::Close { done } => return Some(done),
    }
    None
}

/// Handles one frame from the broker; an error (a protocol violation) ends
/// the connection.
pub(crate) fn handle_inbound(core: &mut Core, frame: Frame) -> Result<(), ConnectionError> {
    core.keepalive.on_activity();
    trace!(command = frame.command.r#type().as_str_name(), "received");
    let answer = match core.router.on_inbound(frame) {
        Reaction::None => return Ok(()),
        Reaction::PermitsExceeded { consumer } => {
            warn!(%consumer, "broker ignores flow control: dropping the connection");
            return Err(ConnectionError::PermitsExceeded {
                consumer: consumer.0,
            });
        }
        Reaction::ReturnPermit { consumer } => {
            core.router.on_flow(consumer, 1);
            commands::flow(consumer, 1)
        }
        Reaction::SendPong => commands::pong(),
        Reaction::AnswerAuthChallenge => {
            debug!("answering AUTH_CHALLENGE");
            match core.options.auth.clone() {
                // Fetching may do IO: the loop awaits it and answers then.
                Some(auth) => {
                    core.pending_auth =
                        Some(Box::pin(async move { auth::fetch(auth.as_ref()).await }));
                    return Ok(());
                }
                None => challenge_answer(None),
            }
        }
    };
    if let Err(e) = core.write_command(&answer) {
        warn!(error = %e, "answer could not be encoded");
    }
    Ok(())
}

/// Answers the AUTH_CHALLENGE with the fetched credentials; a provider
/// failure ends the connection (the broker would drop it anyway).
pub(crate) fn handle_credentials(
    core: &mut Core,
    fetched: Result<AuthPayload, AuthError>,
) -> Result<(), ConnectionError> {
    let fresh = fetched?;
    core.write_command(&commands::auth_response(&fresh))?;
    Ok(())
}

/// Waits for the credentials in `slot` (pending forever when there are none).
async fn credentials(slot: &mut Option<PendingAuth>) -> Result<AuthPayload, AuthError> {
    let Some(fetching) = slot.as_mut() else {
        return std::future::pending().await;
    };
    let fetched = fetching.await;
    *slot = None;
    fetched
}

/// Expires requests, runs the keepalive and checks that the socket takes
/// what is queued; an error ends the connection.
pub(crate) fn handle_tick(core: &mut Core, now: Instant) -> Result<(), ConnectionError> {
    core.router.expire(now);
    let after = core.options.operation_timeout;
    if core
        .stalled_since
        .is_some_and(|since| now >= clock::after(since, after))
    {
        return Err(ConnectionError::WriteStalled { after });
    }
    match core.keepalive.on_tick(now) {
        None => Ok(()),
        Some(keepalive::Action::SendPing) => {
            trace!("keepalive PING");
            core.write_command(&commands::ping())?;
            Ok(())
        }
        Some(keepalive::Action::Dead) => Err(ConnectionError::KeepaliveExpired {
            interval: core.keepalive.interval(),
        }),
    }
}

/// What [`write_some`] returns for a flush.
const FLUSHED: usize = usize::MAX;

/// Writes some of `out` (up to [`MAX_SLICES`] pieces in one vectored
/// write), or flushes once it is empty; returns the bytes written, or
/// [`FLUSHED`]. Cancelled, it has taken nothing out of `out`.
async fn write_some<W: AsyncWrite + Unpin>(writer: &mut W, out: &mut Outbox) -> io::Result<usize> {
    if out.is_empty() {
        return writer.flush().await.map(|()| FLUSHED);
    }
    let written = {
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        let n = out.chunks_vectored(&mut slices);
        writer.write_vectored(&slices[..n]).await?
    };
    out.advance(written);
    Ok(written)
}

/// Handles up to [`FRAMES_PER_TURN`] more frames, as long as the socket
/// has them now (the task's waker is registered when it has none, as by
/// `select!`).
async fn handle_ready_frames<R>(
    reader: &mut FramedRead<R, PulsarCodec>,
    core: &mut Core,
) -> Result<(), ConnectionError>
where
    R: AsyncRead + Unpin,
{
    for _ in 0..FRAMES_PER_TURN {
        match futures::poll!(reader.next()) {
            Poll::Pending => return Ok(()),
            Poll::Ready(Some(Ok(frame))) => handle_inbound(core, frame)?,
            Poll::Ready(Some(Err(e))) => return Err(e.into()),
            Poll::Ready(None) => return Err(ConnectionError::Disconnected),
        }
    }
    Ok(())
}

/// Handles a command from the control lane (`None`: every handle is
/// gone). An error ends the loop; on a `Close`, `closing` then holds whom
/// to tell once the socket is flushed.
fn on_control(
    core: &mut Core,
    command: Option<Command>,
    closing: &mut Option<oneshot::Sender<()>>,
) -> Result<(), ConnectionError> {
    let Some(command) = command else {
        return Err(ConnectionError::Closed);
    };
    if let Some(done) = handle_command(core, clock::now(), command) {
        *closing = Some(done);
        return Err(ConnectionError::Closed);
    }
    Ok(())
}

/// Queues a SEND frame from the data lane for the socket.
fn on_data(core: &mut Core, frame: Frame) {
    if let Err(e) = core.out.frame(frame) {
        warn!(error = %e, "SEND frame could not be encoded");
    }
}

/// Takes what each lane holds now, up to [`FRAMES_PER_TURN`] from each
/// and while the output has room, without waiting. It runs after every
/// turn of reads: the loop prefers the socket, and a socket that always
/// has the next frame ready (a fast link, a broker flooding the client)
/// would otherwise keep requests, acks and SENDs waiting for as long as
/// it lasts.
fn take_ready_lanes(
    core: &mut Core,
    lanes: &mut Lanes,
    data_open: &mut bool,
    closing: &mut Option<oneshot::Sender<()>>,
) -> Result<(), ConnectionError> {
    for _ in 0..FRAMES_PER_TURN {
        if core.out.len() >= HIGH_WATER {
            return Ok(());
        }
        match lanes.control.try_recv() {
            Ok(command) => on_control(core, Some(command), closing)?,
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Disconnected) => return on_control(core, None, closing),
        }
    }
    for _ in 0..FRAMES_PER_TURN {
        if !*data_open || core.out.len() >= HIGH_WATER {
            break;
        }
        match lanes.data.try_recv() {
            Ok(frame) => on_data(core, frame),
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Disconnected) => *data_open = false,
        }
    }
    Ok(())
}

/// The actor's loop: runs until the socket dies, a `Close` arrives or every
/// handle is dropped, then poisons everything still waiting.
pub(crate) async fn run<R, W>(
    mut reader: FramedRead<R, PulsarCodec>,
    mut writer: W,
    mut lanes: Lanes,
    mut core: Core,
    state: watch::Sender<Option<ConnectionError>>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut data_open = true;
    let mut unflushed = false;
    let mut closing = None;
    let timer = tokio::time::sleep_until(core.next_deadline().into());
    tokio::pin!(timer);

    let err = loop {
        let now = clock::now();
        core.on_output(now, 0);
        if let Err(e) = handle_tick(&mut core, now) {
            break e;
        }
        let deadline = core.next_deadline().into();
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        let room = core.out.len() < HIGH_WATER;
        tokio::select! {
            biased;
            written = write_some(&mut writer, &mut core.out), if !core.out.is_empty() || unflushed => {
                match written {
                    Ok(0) => break io::Error::from(io::ErrorKind::WriteZero).into(),
                    Ok(FLUSHED) => unflushed = false,
                    Ok(n) => {
                        unflushed = true;
                        core.on_output(clock::now(), n);
                    }
                    Err(e) => break e.into(),
                }
            },
            read = reader.next() => match read {
                Some(Ok(frame)) => {
                    if let Err(e) = handle_inbound(&mut core, frame) {
                        break e;
                    }
                    if let Err(e) = handle_ready_frames(&mut reader, &mut core).await {
                        break e;
                    }
                    if let Err(e) = take_ready_lanes(&mut core, &mut lanes, &mut data_open, &mut closing) {
                        break e;
                    }
                }
                Some(Err(e)) => break e.into(),
                None => break ConnectionError::Disconnected,
            },
            command = lanes.control.recv(), if room => {
                if let Err(e) = on_control(&mut core, command, &mut closing) {
                    break e;
                }
            },
            frame = lanes.data.recv(), if room && data_open => match frame {
                Some(frame) => on_data(&mut core, frame),
                None => data_open = false,
            },
            fetched = credentials(&mut core.pending_auth), if core.pending_auth.is_some() => {
                if let Err(e) = handle_credentials(&mut core, fetched) {
                    break e;
                }
            },
            () = &mut timer => {}
        }
    };

    if matches!(err, ConnectionError::Closed) {
        // Best effort: what was queued (acks, say) still goes out.
        let flush = async {
            writer.write_all_buf(&mut core.out).await?;
            writer.shutdown().await
        };
        let timeout = core.options.operation_timeout;
        if let Ok(Err(e)) = tokio::time::timeout(timeout, flush).await {
            debug!(error = %e, "flush on close failed");
        }
    }
    debug!(error = %err, pending = core.router.pending_requests(), "connection ended");
    core.router.fail_all(&err);
    state.send_replace(Some(err.clone()));
    lanes.control.close();
    lanes.data.close();
    while let Some(command) = lanes.control.recv().await {
        command.fail(&err);
    }
    if let Some(done) = closing {
        let _ = done.send(());
    }
}
