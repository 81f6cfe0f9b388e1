//! OAuth2 client credentials (feature `oauth2`): the flow the Java, Go and
//! C++ clients offer as `AuthenticationOAuth2`.
//!
//! The client id and secret come from a key file as the Java client reads
//! it (`{"client_id": ..., "client_secret": ..., ...}`, read again for every
//! fetch, so a rotated secret is picked up) or are given directly. The
//! issuer's token endpoint is found through
//! `<issuer>/.well-known/openid-configuration` (once), an access token is
//! fetched with the client-credentials grant (with `audience` and `scope`
//! when set) and sent as method `token`, in CONNECT and in AUTH_CHALLENGE
//! answers. A token is reused until 90% of its `expires_in` has passed,
//! then the next request for credentials fetches a fresh one: refreshed
//! before it expires. The client secret goes over plain http only where
//! the rule in `target` allows it.

mod exchange;
mod http;
mod target;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::{AuthError, Authentication};
use crate::client::tls::{Pem, TlsOptions};
use crate::client::{Connector, TcpConnector, TlsConfigProblem};
use crate::clock;
use exchange::{Cache, ClientSecret};
use target::PlainHttp;

/// Why an OAuth2 access token could not be had. Never shows the client
/// secret or a token.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum OAuth2Error {
    /// The key file could not be read.
    #[error("cannot read the OAuth2 key file {path:?}: {source}")]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
    /// The key file is not what the Java client reads.
    #[error("the OAuth2 key file {path:?} {problem}")]
    KeyFileFormat {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: &'static str,
    },
    /// The issuer URL or an endpoint it named cannot be used.
    #[error("OAuth2 URL {url:?} {problem}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// A plain `http://` URL to a host that is not loopback, refused
    /// before connecting: the client secret and the tokens would travel
    /// unencrypted. [`OAuth2ClientCredentials::allow_insecure_http`]
    /// allows it.
    #[error(
        "refused the OAuth2 URL {url:?}: plain http:// to a host that is not loopback would send \
         the client secret and tokens unencrypted; use https://, or call \
         OAuth2ClientCredentials::allow_insecure_http() to accept that"
    )]
    PlaintextRefused {
        /// The URL.
        url: String,
    },
    /// An `https://` issuer's discovery document names a plain `http://`
    /// token endpoint (a misconfigured issuer, or a document altered on
    /// the way): refused before the client secret is sent, on loopback
    /// too. [`OAuth2ClientCredentials::allow_insecure_http`] allows it.
    #[error(
        "refused the token endpoint {token_endpoint:?} named by the https:// OAuth2 issuer \
         {issuer:?}: it is plain http://, so the client secret would travel unencrypted; fix the \
         issuer's discovery document, or call OAuth2ClientCredentials::allow_insecure_http() to \
         accept that"
    )]
    DowngradeRefused {
        /// The issuer URL as given.
        issuer: String,
        /// The token endpoint its discovery document names.
        token_endpoint: String,
    },
    /// The TLS settings for the issuer cannot be used.
    #[error("TLS configuration for the OAuth2 issuer: {problem}")]
    TlsConfig {
        /// What is wrong.
        problem: TlsConfigProblem,
    },
    /// The request could not be made (connect, TLS, HTTP).
    #[error("OAuth2 request to {url} failed: {source}")]
    Http {
        /// The URL.
        url: String,
        /// Why.
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// No answer within the timeout.
    #[error("OAuth2 request to {url} got no answer within {after:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// The issuer answered with an error status (for the token endpoint,
    /// with the OAuth2 error code, e.g. `invalid_client`, when it gave one).
    #[error("OAuth2 issuer answered {url} with HTTP {status}{}", code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Refused {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The OAuth2 `error` field.
        code: Option<String>,
    },
    /// The issuer's answer is not what the protocol says.
    #[error("OAuth2 issuer's answer from {url}: {problem}")]
    BadAnswer {
        /// The URL.
        url: String,
        /// What is wrong.
        problem: &'static str,
    },
}

/// Where the client id and secret come from.
#[derive(Clone)]
enum Credentials {
    KeyFile(PathBuf),
    Given(ClientSecret),
}

/// The `token` method with access tokens from an OAuth2 issuer, by the
/// client-credentials grant (the Java client's `AuthenticationOAuth2`).
///
/// The client id and secret come from a key file as the Java client reads
/// it (JSON with `client_id` and `client_secret`, read again for every
/// fetch) or are given directly. The token endpoint is found once through
/// `<issuer>/.well-known/openid-configuration`; tokens are requested with
/// `audience` and `scope` when set. A token is reused until 90% of its
/// `expires_in` has passed; the next CONNECT or AUTH_CHALLENGE after that
/// fetches a fresh one, before the old one expires. Concurrent
/// connections share one fetch. The issuer is trusted through the
/// system's roots unless [`tls_trust_certs_file`](Self::tls_trust_certs_file)
/// names a CA. Plain `http://` is refused off loopback, and for the token
/// endpoint of an `https://` issuer, unless
/// [`allow_insecure_http`](Self::allow_insecure_http) says otherwise.
///
/// # Examples
/// ```no_run
/// use pulsar_wire::Client;
/// use pulsar_wire::auth::OAuth2ClientCredentials;
/// # async fn demo() -> Result<(), pulsar_wire::Error> {
/// let auth = OAuth2ClientCredentials::from_key_file(
///     "https://auth.example.com/",
///     "/etc/pulsar/oauth2-key.json",
/// )
/// .audience("urn:sn:pulsar:my-org:my-instance");
/// let client = Client::builder()
///     .service_url("pulsar+ssl://pulsar.example.com:6651")
///     .authentication(auth)
///     .build()
///     .await?;
/// # let _ = client;
/// # Ok(()) }
/// ```
pub struct OAuth2ClientCredentials {
    issuer_url: String,
    credentials: Credentials,
    audience: Option<String>,
    scope: Option<String>,
    transport: http::Transport,
    /// The token endpoint once discovered, and the token in use. One fetch
    /// at a time: concurrent connections wait for it and share the token.
    state: tokio::sync::Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    token_endpoint: Option<String>,
    cache: Cache,
}

impl OAuth2ClientCredentials {
    /// Client id and secret from `key_file` (JSON with `client_id` and
    /// `client_secret`, as the Java client's `privateKey` file), tokens
    /// from the issuer at `issuer_url`.
    pub fn from_key_file(issuer_url: impl Into<String>, key_file: impl Into<PathBuf>) -> Self {
        Self::with(issuer_url.into(), Credentials::KeyFile(key_file.into()))
    }

    /// The given client id and secret, tokens from the issuer at `issuer_url`.
    pub fn new(
        issuer_url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        Self::with(
            issuer_url.into(),
            Credentials::Given(ClientSecret {
                client_id: client_id.into(),
                client_secret: client_secret.into(),
            }),
        )
    }

    fn with(issuer_url: String, credentials: Credentials) -> Self {
        Self {
            issuer_url,
            credentials,
            audience: None,
            scope: None,
            transport: http::Transport {
                connector: Arc::new(TcpConnector),
                tls: TlsOptions::default(),
                timeout: Duration::from_secs(30),
                plain_http: PlainHttp::LoopbackOnly,
                tls_config: std::sync::OnceLock::new(),
            },
            state: tokio::sync::Mutex::default(),
        }
    }

    /// The `audience` of the token request (the Pulsar cluster's, as the
    /// issuer knows it). None by default.
    #[must_use]
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// The `scope` of the token request. None by default.
    #[must_use]
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Trusts the CA certificates in this PEM file for an `https://`
    /// issuer instead of the operating system's roots. The file (like the
    /// system's roots without it) is read once, for the first request.
    #[must_use]
    pub fn tls_trust_certs_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.transport.tls.trust = Some(Pem::File(path.into()));
        self
    }

    /// How long one request to the issuer may take, connecting included.
    /// Default 30 s.
    #[must_use]
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.transport.timeout = timeout;
        self
    }

    /// Allows plain `http://` to the issuer and its token endpoint on any
    /// host, and an `https://` issuer's discovery document to name an
    /// `http://` token endpoint.
    ///
    /// Without it, plain `http://` is used only for a host on loopback
    /// (127.0.0.0/8, `::1`, `localhost`), and never for the token
    /// endpoint of an `https://` issuer: anything else fails with
    /// [`OAuth2Error::PlaintextRefused`] or
    /// [`OAuth2Error::DowngradeRefused`] before a byte is sent. Over plain
    /// http the client secret and the tokens travel unencrypted, readable
    /// and alterable by anyone on the path; every such request logs a
    /// WARN, allowed or on loopback.
    ///
    /// # Examples
    /// ```
    /// use pulsar_wire::auth::OAuth2ClientCredentials;
    /// // A test issuer on a private network, without TLS.
    /// let auth = OAuth2ClientCredentials::new("http://issuer.lab:8080", "app", "secret")
    ///     .allow_insecure_http();
    /// # let _ = auth;
    /// ```
    #[must_use]
    pub const fn allow_insecure_http(mut self) -> Self {
        self.transport.plain_http = PlainHttp::Anywhere;
        self
    }

    /// Opens connections to the issuer with `connector` instead of TCP
    /// (custom transports; in-memory issuers in tests).
    #[must_use]
    pub fn connector(mut self, connector: impl Connector) -> Self {
        self.transport.connector = Arc::new(connector);
        self
    }

    /// The access token in use, or a fresh one when it is due.
    async fn access_token(&self) -> Result<Bytes, OAuth2Error> {
        let mut state = self.state.lock().await;
        if let Some(token) = state.cache.valid(clock::now()) {
            return Ok(token);
        }
        let endpoint = match &state.token_endpoint {
            Some(endpoint) => endpoint.clone(),
            None => {
                let endpoint = self.discover().await?;
                state.token_endpoint = Some(endpoint.clone());
                endpoint
            }
        };
        let secret = self.client_secret().await?;
        let form =
            exchange::token_request(&secret, self.audience.as_deref(), self.scope.as_deref());
        let answer = self.transport.post_form(&endpoint, form).await?;
        if answer.status != 200 {
            return Err(OAuth2Error::Refused {
                url: endpoint,
                status: answer.status,
                code: exchange::error_code(&answer.body),
            });
        }
        let issued =
            exchange::token_response(&answer.body).map_err(|problem| OAuth2Error::BadAnswer {
                url: endpoint.clone(),
                problem,
            })?;
        tracing::debug!(lifetime = ?issued.lifetime, "OAuth2 access token fetched");
        Ok(state.cache.store(issued, clock::now()))
    }

    /// The issuer's token endpoint, from its discovery document.
    async fn discover(&self) -> Result<String, OAuth2Error> {
        let url = exchange::discovery_url(&self.issuer_url);
        let answer = self.transport.get(&url).await?;
        if answer.status != 200 {
            return Err(OAuth2Error::Refused {
                url,
                status: answer.status,
                code: None,
            });
        }
        let endpoint = exchange::token_endpoint(&answer.body)
            .map_err(|problem| OAuth2Error::BadAnswer { url, problem })?;
        target::check_token_endpoint(&self.issuer_url, &endpoint, self.transport.plain_http)?;
        Ok(endpoint)
    }

    async fn client_secret(&self) -> Result<ClientSecret, OAuth2Error> {
        match &self.credentials {
            Credentials::Given(secret) => Ok(secret.clone()),
            Credentials::KeyFile(path) => {
                let text =
                    tokio::fs::read_to_string(path)
                        .await
                        .map_err(|e| OAuth2Error::KeyFile {
                            path: path.clone(),
                            source: Arc::new(e),
                        })?;
                exchange::key_file(&text).map_err(|problem| OAuth2Error::KeyFileFormat {
                    path: path.clone(),
                    problem,
                })
            }
        }
    }
}

impl Authentication for OAuth2ClientCredentials {
    fn method(&self) -> &str {
        "token"
    }

    fn credentials(&self) -> BoxFuture<'_, Result<Bytes, AuthError>> {
        Box::pin(async move { Ok(self.access_token().await?) })
    }
}

impl fmt::Debug for OAuth2ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("OAuth2ClientCredentials");
        s.field("issuer_url", &self.issuer_url);
        match &self.credentials {
            Credentials::KeyFile(path) => s.field("key_file", path),
            Credentials::Given(secret) => s.field("client", secret),
        };
        s.field("audience", &self.audience)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}
