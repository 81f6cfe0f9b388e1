//! One HTTP/1.1 request to an issuer: a fresh connection through the
//! [`Connector`] (TCP by default), TLS for `https://` with the client's
//! rustls set-up (built once per transport), hyper's client connection,
//! the whole exchange bounded by a timeout. No pool: tokens are fetched
//! every few minutes at most.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;

use super::OAuth2Error;
use super::target::{PlainHttp, Target};
use crate::client::tls::{Tls, TlsOptions};
use crate::client::{ClientError, Connector};

/// The largest issuer answer read (discovery documents and token
/// responses are a few KiB).
const MAX_BODY: usize = 256 * 1024;

/// How requests reach the issuer.
#[derive(Debug)]
pub(crate) struct Transport {
    pub(crate) connector: Arc<dyn Connector>,
    /// The TLS settings; their files are read once, for the first
    /// `https://` request.
    pub(crate) tls: TlsOptions,
    pub(crate) timeout: Duration,
    /// Where plain `http://` may go.
    pub(crate) plain_http: PlainHttp,
    /// The rustls configuration built from `tls`, reused by every request.
    pub(crate) tls_config: OnceLock<Tls>,
}

/// A response: its status and body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Bytes,
}

impl Transport {
    /// `GET url`.
    pub(crate) async fn get(&self, url: &str) -> Result<Answer, OAuth2Error> {
        self.send(url, http::Method::GET, None).await
    }

    /// `POST url` with a form body.
    pub(crate) async fn post_form(&self, url: &str, form: String) -> Result<Answer, OAuth2Error> {
        self.send(url, http::Method::POST, Some(form)).await
    }

    async fn send(
        &self,
        url: &str,
        method: http::Method,
        form: Option<String>,
    ) -> Result<Answer, OAuth2Error> {
        let target = Target::parse(url)?;
        target.check_plain_http(url, self.plain_http)?;
        if !target.is_tls() {
            tracing::warn!(
                url,
                "OAuth2 request over plain http: without TLS, what is sent (the client secret \
                 included) and received can be read and altered on the way"
            );
        }
        let exchange = async {
            let io = self
                .connector
                .connect(&target.address)
                .await
                .map_err(|e| failed(url, e))?;
            let io = match target.address.is_tls() {
                true => self
                    .tls()?
                    .handshake(&target.address, io)
                    .await
                    .map_err(|e| failed(url, e))?,
                false => io,
            };
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
                .await
                .map_err(|e| failed(url, e))?;
            // Drives the connection until the answer is read; ends with it.
            tokio::spawn(connection);
            let mut request = http::Request::builder()
                .method(method)
                .uri(&target.path)
                .header(http::header::HOST, &target.host_header)
                .header(http::header::ACCEPT, "application/json")
                .header(
                    http::header::USER_AGENT,
                    concat!("pulsar-wire/", env!("CARGO_PKG_VERSION")),
                )
                .header(http::header::CONNECTION, "close");
            if form.is_some() {
                request = request.header(
                    http::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                );
            }
            let request = request
                .body(Full::new(Bytes::from(form.unwrap_or_default())))
                .map_err(|_| OAuth2Error::Url {
                    url: url.to_owned(),
                    problem: "cannot be requested",
                })?;
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| failed(url, e))?;
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| failed(url, std::io::Error::other(e.to_string())))?
                .to_bytes();
            Ok(Answer { status, body })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(OAuth2Error::Timeout {
                    url: url.to_owned(),
                    after: self.timeout,
                })
            })
    }

    /// The TLS configuration, built on first use (reading the CA file or
    /// the system's roots from disk) and kept. A failed build is not kept:
    /// the next request tries again.
    fn tls(&self) -> Result<&Tls, OAuth2Error> {
        if let Some(tls) = self.tls_config.get() {
            return Ok(tls);
        }
        let built = self.tls.build().map_err(|e| match e {
            ClientError::TlsConfig { problem } => OAuth2Error::TlsConfig { problem },
            other => OAuth2Error::Http {
                url: String::new(),
                source: Arc::new(other),
            },
        })?;
        Ok(self.tls_config.get_or_init(|| built))
    }
}

fn failed(url: &str, e: impl std::error::Error + Send + Sync + 'static) -> OAuth2Error {
    OAuth2Error::Http {
        url: url.to_owned(),
        source: Arc::new(e),
    }
}
