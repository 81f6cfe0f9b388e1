//! A broker whose frames are always already there: the connection's socket
//! never runs dry, as on a fast link with a broker flooding the client
//! (PONGs nobody asked for, here). What the application queues on the
//! connection's two lanes (requests and acks on the control lane, SEND
//! frames on the data lane) must still go out while the flood goes on.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, BytesMut};
use pulsar_wire::codec::PulsarCodec;
use pulsar_wire::connection::{Connection, ConnectionOptions};
use pulsar_wire::ids::{ProducerId, SequenceId};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::wire::{Frame, commands};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::codec::{Decoder, Encoder};

use crate::common::fake_broker::answer;
use crate::common::init_tracing;

/// PONGs the flood holds in all; then the socket has nothing more.
const FLOOD: usize = 100_000;

/// PONGs encoded at a time.
const CHUNK: usize = 256;

/// What the broker's end has seen: how many PONGs were handed to the
/// client when each frame type of interest arrived.
#[derive(Default)]
struct Seen {
    /// The flood has begun.
    open: bool,
    /// The client's read waiting for the flood to begin.
    reader: Option<Waker>,
    served: usize,
    lookup_at: Option<usize>,
    send_at: Option<usize>,
}

/// A broker's end as a byte stream: CONNECTED once CONNECT arrives, then a
/// flood of PONGs that is ready at every read until [`FLOOD`] are served.
struct AlwaysReady {
    codec: PulsarCodec,
    written: BytesMut,
    to_client: BytesMut,
    pongs: BytesMut,
    seen: Arc<Mutex<Seen>>,
}

impl AlwaysReady {
    fn new(seen: Arc<Mutex<Seen>>) -> Self {
        let mut codec = PulsarCodec::default();
        let mut pongs = BytesMut::new();
        for _ in 0..CHUNK {
            codec
                .encode(Frame::simple(commands::pong()), &mut pongs)
                .expect("PONG encodes");
        }
        Self {
            codec,
            written: BytesMut::new(),
            to_client: BytesMut::new(),
            pongs,
            seen,
        }
    }

    fn on_frame(&mut self, frame: &Frame) {
        let mut seen = self.seen.lock().expect("not poisoned");
        match frame.command.r#type() {
            Type::Connect => {
                self.codec
                    .encode(Frame::simple(answer::connected(None)), &mut self.to_client)
                    .expect("CONNECTED encodes");
                if let Some(reader) = seen.reader.take() {
                    reader.wake();
                }
            }
            Type::Lookup => seen.lookup_at = seen.lookup_at.or(Some(seen.served)),
            Type::Send => seen.send_at = seen.send_at.or(Some(seen.served)),
            _ => {}
        }
    }
}

impl AsyncRead for AlwaysReady {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut seen = this.seen.lock().expect("not poisoned");
        if this.to_client.is_empty() && seen.open && seen.served < FLOOD {
            seen.served += CHUNK;
            this.to_client.extend_from_slice(&this.pongs);
        }
        if this.to_client.is_empty() {
            // Before CONNECT, before the flood or after it.
            seen.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        drop(seen);
        let n = this.to_client.len().min(buf.remaining());
        buf.put_slice(&this.to_client[..n]);
        this.to_client.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for AlwaysReady {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.written.extend_from_slice(bytes);
        while let Some(frame) = this
            .codec
            .decode(&mut this.written)
            .expect("the client writes valid frames")
        {
            this.on_frame(&frame);
        }
        Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test(start_paused = true)]
async fn requests_and_sends_go_out_while_the_socket_never_runs_dry() {
    init_tracing();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let conn = Connection::connect(AlwaysReady::new(seen.clone()), ConnectionOptions::default())
        .await
        .expect("handshake");

    // Both lanes hold a frame when the flood begins: the actor's next
    // turn finds the socket ready, and ready again after every read.
    let mut lookup = Box::pin(conn.request("LOOKUP", |id| commands::lookup("t", id, false)));
    assert!(
        futures::poll!(&mut lookup).is_pending(),
        "queued, unanswered"
    );
    let send = Frame::simple(commands::send(ProducerId(1), SequenceId(0), 1));
    conn.send_payload(send).await.expect("queued");
    {
        let mut seen = seen.lock().expect("not poisoned");
        seen.open = true;
        if let Some(reader) = seen.reader.take() {
            reader.wake();
        }
    }

    // The LOOKUP is never answered: wait until the connection has served
    // the flood, or sent both frames.
    loop {
        tokio::task::yield_now().await;
        let seen = seen.lock().expect("not poisoned");
        if seen.served >= FLOOD || (seen.lookup_at.is_some() && seen.send_at.is_some()) {
            break;
        }
    }
    let (served, lookup_at, send_at) = {
        let seen = seen.lock().expect("not poisoned");
        (seen.served, seen.lookup_at, seen.send_at)
    };
    let flood_over = |at: Option<usize>| at.is_none_or(|at| at >= FLOOD);
    assert!(
        !flood_over(lookup_at),
        "the LOOKUP went out only after {served} PONGs (at {lookup_at:?})"
    );
    assert!(
        !flood_over(send_at),
        "the SEND went out only after {served} PONGs (at {send_at:?})"
    );
    drop(lookup);
    conn.close().await;
}
