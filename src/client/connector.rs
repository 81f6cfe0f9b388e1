//! [`Connector`]: how the pool opens a byte stream to a broker address.

use std::fmt;
use std::io;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};

use super::BrokerAddress;

/// A byte stream to a broker: anything readable and writable that a
/// connection's actor task can own.
pub trait BrokerStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> BrokerStream for T {}

/// Opens byte streams to broker addresses for the connection pool.
///
/// The default, [`TcpConnector`], opens TCP connections. Another one can be
/// given to [`ClientBuilder::connector`](super::ClientBuilder::connector):
/// tests use one that hands out in-memory `tokio::io::duplex` streams to
/// scripted brokers, so redirects between "addresses" need no network.
///
/// # Examples
/// ```
/// use futures::future::BoxFuture;
/// use pulsar_wire::client::{BrokerAddress, BrokerStream, Connector};
///
/// /// Refuses every address (a stand-in for a real transport).
/// #[derive(Debug)]
/// struct Nowhere;
///
/// impl Connector for Nowhere {
///     fn connect(&self, _: &BrokerAddress) -> BoxFuture<'static, std::io::Result<Box<dyn BrokerStream>>> {
///         Box::pin(async { Err(std::io::ErrorKind::ConnectionRefused.into()) })
///     }
/// }
/// ```
pub trait Connector: fmt::Debug + Send + Sync + 'static {
    /// Opens a stream to `address`. The pool bounds the time it may take.
    fn connect(
        &self,
        address: &BrokerAddress,
    ) -> BoxFuture<'static, io::Result<Box<dyn BrokerStream>>>;
}

/// Plain TCP, with `TCP_NODELAY` set (Pulsar frames are small and latency-bound).
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpConnector;

impl Connector for TcpConnector {
    fn connect(
        &self,
        address: &BrokerAddress,
    ) -> BoxFuture<'static, io::Result<Box<dyn BrokerStream>>> {
        let host = address.host().to_owned();
        let port = address.port();
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn BrokerStream>)
        })
    }
}
