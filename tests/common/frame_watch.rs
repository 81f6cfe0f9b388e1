//! A [`Connector`] that dials the broker as the client asked and decodes a
//! copy of every frame passing either way, so a test can wait for the
//! broker to have said something the client does not surface (a producer
//! queued for exclusive access, the answer to a close sent from a task of
//! the client's own). The bytes pass unchanged.

use std::io;
use std::sync::Arc;

use bytes::BytesMut;
use futures::future::BoxFuture;
use pulsar_wire::client::{BrokerAddress, BrokerStream, Connector};
use pulsar_wire::codec::PulsarCodec;
use pulsar_wire::proto::BaseCommand;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_util::codec::Decoder;

/// Bytes the in-memory pipe to the client buffers in each direction.
const PIPE: usize = 256 * 1024;

/// One command seen on a watched connection.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Sent by the broker (else by the client).
    pub from_broker: bool,
    pub command: BaseCommand,
}

/// The commands of every connection made through [`FrameWatch::connector`],
/// in the order each direction carried them.
#[derive(Debug, Clone)]
pub struct FrameWatch {
    seen: Arc<watch::Sender<Vec<Seen>>>,
}

impl Default for FrameWatch {
    fn default() -> Self {
        Self {
            seen: Arc::new(watch::Sender::new(Vec::new())),
        }
    }
}

impl FrameWatch {
    /// A connector whose connections this watch sees.
    pub fn connector(&self) -> Watched {
        Watched {
            seen: self.seen.clone(),
        }
    }

    /// Waits until `find` returns something for the commands seen so far
    /// (it is asked again after each new one), and returns it.
    pub async fn until<T>(&self, mut find: impl FnMut(&[Seen]) -> Option<T>) -> T {
        let mut seen = self.seen.subscribe();
        let mut found = None;
        seen.wait_for(|commands| {
            found = find(commands);
            found.is_some()
        })
        .await
        .expect("the watch lives as long as self");
        found.expect("wait_for returned on a match")
    }
}

/// The connector of a [`FrameWatch`].
#[derive(Debug, Clone)]
pub struct Watched {
    seen: Arc<watch::Sender<Vec<Seen>>>,
}

impl Connector for Watched {
    fn connect(
        &self,
        address: &BrokerAddress,
    ) -> BoxFuture<'static, io::Result<Box<dyn BrokerStream>>> {
        let target = (address.host().to_owned(), address.port());
        let seen = self.seen.clone();
        Box::pin(async move {
            let broker = TcpStream::connect((target.0.as_str(), target.1)).await?;
            broker.set_nodelay(true)?;
            let (client, relay) = tokio::io::duplex(PIPE);
            let (from_broker, to_broker) = broker.into_split();
            let (from_client, to_client) = tokio::io::split(relay);
            tokio::spawn(pump(from_client, to_broker, false, seen.clone()));
            tokio::spawn(pump(from_broker, to_client, true, seen));
            Ok(Box::new(client) as Box<dyn BrokerStream>)
        })
    }
}

/// Copies `from` to `to` until either ends, recording each whole frame of
/// the copy as it completes. A copy that stops decoding (a frame over the
/// codec's limit) is still forwarded.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    from_broker: bool,
    seen: Arc<watch::Sender<Vec<Seen>>>,
) {
    let mut codec = PulsarCodec::default();
    let mut copy = BytesMut::new();
    let mut decoding = true;
    let mut buf = vec![0; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if decoding {
            copy.extend_from_slice(&buf[..n]);
            loop {
                match codec.decode(&mut copy) {
                    Ok(Some(frame)) => seen.send_modify(|s| {
                        s.push(Seen {
                            from_broker,
                            command: frame.command,
                        });
                    }),
                    Ok(None) => break,
                    Err(_) => {
                        decoding = false;
                        copy.clear();
                        break;
                    }
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
