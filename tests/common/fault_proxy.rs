//! A loopback TCP proxy that injects faults between the client and a real
//! broker.
//!
//! Each accepted connection follows a [`Plan`]: the next one queued with
//! [`FaultProxy::push_plan`], else the default ([`Plan::Pass`] unless set
//! with [`FaultProxy::set_default`]). On demand, [`FaultProxy::cut_all`]
//! resets every live connection (RST), [`FaultProxy::close_all`] closes them
//! (FIN), and [`FaultProxy::black_hole_all`] stops forwarding on every live
//! one while keeping its sockets open.
//!
//! Lookups answer with the broker's own address, so a client told to use
//! the proxy's address would be sent past it. [`FaultProxy::connector`]
//! gives the client a [`Connector`] that dials the proxy whatever broker
//! address it is asked for (the tests run one broker), so every byte,
//! lookups included, goes through the proxy.
//!
//! Loops are bounded: the proxy accepts at most [`MAX_CONNECTIONS`], a
//! connection lives at most [`MAX_LIFETIME`], and everything stops when the
//! proxy is dropped.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use pulsar_wire::client::{BrokerAddress, BrokerStream, Connector};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// Most connections one proxy accepts.
pub const MAX_CONNECTIONS: usize = 10_000;
/// Longest one proxied connection lives (a bound, not a test timing).
pub const MAX_LIFETIME: Duration = Duration::from_secs(600);

/// What the proxy does with one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Forward both ways.
    Pass,
    /// Forward both ways, at most this many bytes per write (yielding
    /// between writes), so frames arrive in pieces: a slow, fragmenting
    /// link without any wall-clock wait.
    Trickle(usize),
    /// Accept, connect upstream, forward nothing; sockets stay open.
    BlackHole,
    /// Accept and reset at once (RST, no bytes).
    Reset,
    /// Forward both ways until this many bytes went broker → client (the
    /// last chunk cut short, so mid-frame), then close both sockets.
    CloseAfter(usize),
}

struct Shared {
    upstream: SocketAddr,
    plans: Mutex<VecDeque<Plan>>,
    default: Mutex<Plan>,
    accepted: AtomicUsize,
    live: AtomicUsize,
    /// Bumped to reset every live connection.
    cut: watch::Sender<u64>,
    /// Bumped to close every live connection (FIN, not RST).
    close: watch::Sender<u64>,
    /// Bumped to black-hole every live connection.
    hole: watch::Sender<u64>,
}

/// A running fault proxy in front of one broker; stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("accepted", &self.accepted())
            .finish_non_exhaustive()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // The accept task owns every connection task: all end with it.
        self.task.abort();
    }
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Shared {
            upstream,
            plans: Mutex::new(VecDeque::new()),
            default: Mutex::new(Plan::Pass),
            accepted: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            cut: watch::channel(0).0,
            close: watch::channel(0).0,
            hole: watch::channel(0).0,
        });
        let task = tokio::spawn(accept_loop(listener, shared.clone()));
        Self { addr, shared, task }
    }

    /// Where the proxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A client connector that sends every broker connection through the proxy.
    pub fn connector(&self) -> ViaProxy {
        ViaProxy { proxy: self.addr }
    }

    /// The next accepted connection follows `plan` (plans queue up in order).
    pub fn push_plan(&self, plan: Plan) {
        self.shared.plans.lock().expect("plans").push_back(plan);
    }

    /// Connections with no queued plan follow `plan`.
    pub fn set_default(&self, plan: Plan) {
        *self.shared.default.lock().expect("default") = plan;
    }

    /// Resets every live connection now (both sockets, RST).
    pub fn cut_all(&self) {
        self.shared.cut.send_modify(|n| *n += 1);
    }

    /// Closes every live connection now, both sockets, in order (FIN).
    pub fn close_all(&self) {
        self.shared.close.send_modify(|n| *n += 1);
    }

    /// Stops forwarding on every live connection; their sockets stay open.
    pub fn black_hole_all(&self) {
        self.shared.hole.send_modify(|n| *n += 1);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections open right now.
    pub fn live(&self) -> usize {
        self.shared.live.load(Ordering::SeqCst)
    }
}

/// A [`Connector`] that dials the proxy for every broker address.
#[derive(Debug, Clone, Copy)]
pub struct ViaProxy {
    proxy: SocketAddr,
}

impl Connector for ViaProxy {
    fn connect(&self, _: &BrokerAddress) -> BoxFuture<'static, io::Result<Box<dyn BrokerStream>>> {
        let proxy = self.proxy;
        Box::pin(async move {
            let stream = TcpStream::connect(proxy).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn BrokerStream>)
        })
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    while shared.accepted.load(Ordering::SeqCst) < MAX_CONNECTIONS {
        let Ok((client, _)) = listener.accept().await else {
            break;
        };
        // Cuts from here on reach this connection, also while it still
        // connects upstream: a test that saw it accepted may cut it.
        let signals = Signals {
            cut: shared.cut.subscribe(),
            close: shared.close.subscribe(),
            hole: shared.hole.subscribe(),
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let queued = shared.plans.lock().expect("plans").pop_front();
        let plan = queued.unwrap_or_else(|| *shared.default.lock().expect("default"));
        let shared = shared.clone();
        connections.spawn(async move {
            shared.live.fetch_add(1, Ordering::SeqCst);
            let proxied = proxy_one(client, plan, &shared, signals);
            let _ = tokio::time::timeout(MAX_LIFETIME, proxied).await;
            shared.live.fetch_sub(1, Ordering::SeqCst);
        });
        // Reap finished connection tasks so the set stays small.
        while connections.try_join_next().is_some() {}
    }
    // Keep the live connections going until the proxy is dropped.
    while connections.join_next().await.is_some() {}
}

/// Resets `stream`: closing with a zero linger sends RST.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// What one connection hears of [`FaultProxy::cut_all`],
/// [`FaultProxy::close_all`] and [`FaultProxy::black_hole_all`].
struct Signals {
    cut: watch::Receiver<u64>,
    close: watch::Receiver<u64>,
    hole: watch::Receiver<u64>,
}

async fn proxy_one(client: TcpStream, plan: Plan, shared: &Shared, signals: Signals) {
    if plan == Plan::Reset {
        reset(client);
        return;
    }
    let Ok(upstream) = TcpStream::connect(shared.upstream).await else {
        reset(client);
        return;
    };
    let _ = upstream.set_nodelay(true);
    let _ = client.set_nodelay(true);
    let Signals {
        mut cut,
        mut close,
        mut hole,
    } = signals;
    let (mut client_read, mut client_write) = client.into_split();
    let (mut up_read, mut up_write) = upstream.into_split();
    let mut black_hole = plan == Plan::BlackHole;
    let piece = match plan {
        Plan::Trickle(n) => n.max(1),
        _ => usize::MAX,
    };
    let mut budget = match plan {
        Plan::CloseAfter(n) => Some(n),
        _ => None,
    };
    let (mut to_broker, mut to_client) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        tokio::select! {
            _ = cut.changed() => {
                let client = client_read.reunite(client_write);
                let upstream = up_read.reunite(up_write);
                if let (Ok(client), Ok(upstream)) = (client, upstream) {
                    reset(client);
                    reset(upstream);
                }
                return;
            }
            _ = close.changed() => {
                let _ = client_write.shutdown().await;
                let _ = up_write.shutdown().await;
                return;
            }
            _ = hole.changed() => black_hole = true,
            read = client_read.read(&mut to_broker), if !black_hole => {
                let n = match read { Ok(0) | Err(_) => return, Ok(n) => n };
                if forward(&mut up_write, &to_broker[..n], piece).await.is_err() {
                    return;
                }
            }
            read = up_read.read(&mut to_client), if !black_hole => {
                let mut n = match read { Ok(0) | Err(_) => return, Ok(n) => n };
                let last = budget.is_some_and(|left| n >= left);
                if let Some(left) = budget.as_mut() {
                    n = n.min(*left);
                    *left -= n;
                }
                if forward(&mut client_write, &to_client[..n], piece).await.is_err() {
                    return;
                }
                if last {
                    // Mid-frame: both sockets close here.
                    let _ = client_write.shutdown().await;
                    let _ = up_write.shutdown().await;
                    return;
                }
            }
        }
    }
}

/// Writes `bytes` in pieces of at most `piece` bytes, letting other tasks
/// run between them (with TCP_NODELAY each piece goes out on its own).
async fn forward(
    writer: &mut tokio::net::tcp::OwnedWriteHalf,
    bytes: &[u8],
    piece: usize,
) -> std::io::Result<()> {
    for chunk in bytes.chunks(piece) {
        writer.write_all(chunk).await?;
        if chunk.len() < bytes.len() {
            tokio::task::yield_now().await;
        }
    }
    Ok(())
}
