//! A small OAuth2 issuer for the tests: discovery
//! (`/.well-known/openid-configuration`) and a client-credentials token
//! endpoint (`/oauth/token`) that signs HS256 JWTs with a given key, so an
//! Apache Pulsar broker with that secret key accepts them. It serves plain
//! HTTP/1.1 (and HTTPS in memory, once given a certificate), one request
//! per connection, over loopback TCP ([`Issuer::serve_tcp`]) or over
//! in-memory streams ([`Issuer::connector`], for paused-clock tests).

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use pulsar_wire::client::{BrokerAddress, BrokerStream, Connector};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::jwt;

/// The URL of the in-memory issuer over plain HTTP (loopback, as far as
/// the client can tell).
pub const IN_MEMORY_URL: &str = "http://localhost";

/// The URL of the in-memory issuer over HTTPS (see [`Issuer::tls`]).
pub const IN_MEMORY_TLS_URL: &str = "https://issuer.test";

/// What the issuer was asked for, and what it hands out.
#[derive(Debug, Default)]
struct State {
    key: Vec<u8>,
    /// client id → (secret, role the token is for).
    clients: HashMap<String, (String, String)>,
    /// `expires_in` of the tokens, and their `exp` from now.
    lifetime_secs: u64,
    required_audience: Option<String>,
    discovery_requests: usize,
    token_requests: usize,
    /// The form fields of the last token request.
    last_form: HashMap<String, String>,
    /// The `token_endpoint` the discovery document names, if not the
    /// issuer's own `/oauth/token`.
    token_endpoint: Option<String>,
    /// The `expires_in` of token answers, if not `lifetime_secs`.
    expires_in: Option<serde_json::Value>,
    /// Where the in-memory connector was asked to connect (`host:port`).
    connects: Vec<String>,
    /// The server side of in-memory HTTPS.
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// The issuer; cheap to clone (clones share their state).
#[derive(Debug, Clone)]
pub struct Issuer {
    state: Arc<Mutex<State>>,
    /// The number of token requests so far, to wait on.
    tokens: tokio::sync::watch::Sender<usize>,
    tcp: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Issuer {
    /// An issuer signing with `key`, tokens valid for `lifetime_secs`.
    pub fn new(key: Vec<u8>, lifetime_secs: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                key,
                lifetime_secs,
                ..State::default()
            })),
            tcp: Arc::default(),
            tokens: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Returns once `n` tokens have been asked for.
    pub async fn token_requests_reach(&self, n: usize) {
        let mut seen = self.tokens.subscribe();
        seen.wait_for(|&count| count >= n)
            .await
            .expect("issuer alive");
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("issuer state")
    }

    /// Registers a client whose tokens carry `sub` = `role`.
    pub fn client(&self, id: &str, secret: &str, role: &str) -> &Self {
        self.state()
            .clients
            .insert(id.to_owned(), (secret.to_owned(), role.to_owned()));
        self
    }

    /// Refuses token requests for another audience (`invalid_request`).
    pub fn require_audience(&self, audience: &str) -> &Self {
        self.state().required_audience = Some(audience.to_owned());
        self
    }

    /// Names `url` as the token endpoint in the discovery document. Every
    /// POST, whatever its path, is served as a token request, so a test
    /// can tell whether the form was sent at all.
    pub fn token_endpoint(&self, url: &str) -> &Self {
        self.state().token_endpoint = Some(url.to_owned());
        self
    }

    /// Answers token requests with this `expires_in` (any JSON value)
    /// instead of the tokens' lifetime.
    pub fn expires_in(&self, value: serde_json::Value) -> &Self {
        self.state().expires_in = Some(value);
        self
    }

    /// Serves in-memory connections to TLS addresses over TLS as `config`
    /// says ([`IN_MEMORY_TLS_URL`]); plaintext addresses stay plain.
    pub fn tls(&self, config: Arc<rustls::ServerConfig>) -> &Self {
        self.state().tls = Some(config);
        self
    }

    /// Where the in-memory connector was asked to connect, in order.
    pub fn connects(&self) -> Vec<String> {
        self.state().connects.clone()
    }

    /// How many discovery documents and tokens were asked for.
    pub fn requests(&self) -> (usize, usize) {
        let s = self.state();
        (s.discovery_requests, s.token_requests)
    }

    /// A form field of the last token request.
    pub fn last_form(&self, field: &str) -> Option<String> {
        self.state().last_form.get(field).cloned()
    }

    /// Serves on a free loopback port until dropped; returns `http://127.0.0.1:PORT`.
    pub async fn serve_tcp(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let issuer = self.clone();
        let url = base.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (issuer, url) = (issuer.clone(), url.clone());
                tokio::spawn(async move { issuer.serve(socket, &url).await });
            }
        });
        *self.tcp.lock().expect("tcp") = Some(task);
        base
    }

    /// A connector whose every connection reaches this issuer in memory
    /// (base URL [`IN_MEMORY_URL`]).
    pub fn connector(&self) -> InMemory {
        InMemory(self.clone())
    }

    /// Answers one HTTP/1.1 request on `io`.
    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(&self, mut io: S, base: &str) {
        let Some((head, body)) = read_request(&mut io).await else {
            return;
        };
        let request_line = head.lines().next().unwrap_or_default().to_owned();
        let (status, json) = match request_line.split_whitespace().take(2).collect::<Vec<_>>()[..] {
            ["GET", "/.well-known/openid-configuration"] => {
                let mut s = self.state();
                s.discovery_requests += 1;
                let endpoint = s
                    .token_endpoint
                    .clone()
                    .unwrap_or_else(|| format!("{base}/oauth/token"));
                (
                    200,
                    serde_json::json!({ "issuer": base, "token_endpoint": endpoint }),
                )
            }
            ["POST", _] => self.token(&form(&body)),
            _ => (404, serde_json::json!({ "error": "not_found" })),
        };
        let body = json.to_string();
        let reason = if status == 200 { "OK" } else { "Error" };
        let response = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = io.write_all(response.as_bytes()).await;
        let _ = io.shutdown().await;
    }

    fn token(&self, form: &HashMap<String, String>) -> (u16, serde_json::Value) {
        let mut s = self.state();
        s.token_requests += 1;
        self.tokens.send_replace(s.token_requests);
        s.last_form = form.clone();
        let field = |k: &str| form.get(k).map(String::as_str);
        if field("grant_type") != Some("client_credentials") {
            return (
                400,
                serde_json::json!({ "error": "unsupported_grant_type" }),
            );
        }
        let role = match s.clients.get(field("client_id").unwrap_or_default()) {
            Some((secret, role)) if Some(secret.as_str()) == field("client_secret") => role.clone(),
            _ => return (401, serde_json::json!({ "error": "invalid_client" })),
        };
        if s.required_audience.is_some() && s.required_audience.as_deref() != field("audience") {
            return (400, serde_json::json!({ "error": "invalid_request" }));
        }
        let exp = jwt::unix_now() + s.lifetime_secs;
        // Distinct tokens: the request count as `jti`.
        let token = jwt::mint_with(
            &s.key,
            &role,
            Some(exp),
            &[("jti", s.token_requests.to_string())],
        );
        let expires_in = s
            .expires_in
            .clone()
            .unwrap_or_else(|| s.lifetime_secs.into());
        (
            200,
            serde_json::json!({ "access_token": token, "token_type": "Bearer", "expires_in": expires_in }),
        )
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        // The last clone stops the TCP listener.
        if Arc::strong_count(&self.tcp) == 1 {
            if let Some(task) = self.tcp.lock().expect("tcp").take() {
                task.abort();
            }
        }
    }
}

/// In-memory connections to an [`Issuer`].
#[derive(Debug, Clone)]
pub struct InMemory(Issuer);

impl Connector for InMemory {
    fn connect(
        &self,
        address: &BrokerAddress,
    ) -> BoxFuture<'static, io::Result<Box<dyn BrokerStream>>> {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let issuer = self.0.clone();
        let tls = {
            let mut s = issuer.state();
            s.connects.push(address.to_string());
            s.tls.clone().filter(|_| address.is_tls())
        };
        tokio::spawn(async move {
            match tls {
                Some(config) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(config);
                    if let Ok(tls) = acceptor.accept(server).await {
                        issuer.serve(tls, IN_MEMORY_TLS_URL).await;
                    }
                }
                None => issuer.serve(server, IN_MEMORY_URL).await,
            }
        });
        Box::pin(async move { Ok(Box::new(client) as Box<dyn BrokerStream>) })
    }
}

/// The head (up to the blank line) and the body (`Content-Length` bytes).
async fn read_request<S: AsyncRead + Unpin>(io: &mut S) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut chunk = [0u8; 4096];
        let n = io.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = io.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

/// An `application/x-www-form-urlencoded` body as a map.
fn form(body: &[u8]) -> HashMap<String, String> {
    let decode = |s: &str| {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match (bytes[i], bytes.get(i + 1..i + 3)) {
                (b'%', Some(hex)) => {
                    let hex = std::str::from_utf8(hex).unwrap_or("zz");
                    match u8::from_str_radix(hex, 16) {
                        Ok(b) => {
                            out.push(b);
                            i += 3;
                            continue;
                        }
                        Err(_) => out.push(b'%'),
                    }
                }
                (b, _) => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}
