//! OAuth2 client credentials against the in-memory test issuer, on tokio's
//! paused clock: discovery once, a token reused until 90% of its lifetime
//! and then replaced before it expires, the request's form fields, a
//! refused client as a typed error, the access token in CONNECT and in
//! the answer to an AUTH_CHALLENGE, and the client secret never sent over
//! plain http off loopback or to a token endpoint weaker than its issuer;
//! an absurd `expires_in` that breaks nothing, and the issuer's TLS
//! settings read once.

use std::time::Duration;

use bytes::Bytes;
use pulsar_wire::auth::{AuthError, Authentication, OAuth2ClientCredentials, OAuth2Error};
use pulsar_wire::connection::{Connection, ConnectionOptions};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::wire::Frame;
use pulsar_wire::{Client, TopicName};

use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer, request_id};
use crate::common::oauth2_issuer::{IN_MEMORY_TLS_URL, IN_MEMORY_URL, Issuer};
use crate::common::tls::{Ca, server_config};
use crate::common::{TempDir, capture_logs, guard, init_tracing};

const LIFETIME: u64 = 100;

fn issuer() -> Issuer {
    init_tracing();
    let issuer = Issuer::new(b"test key".to_vec(), LIFETIME);
    issuer.client("app-client", "app secret&=", "app");
    issuer
}

/// Client credentials from a key file as the Java client writes it.
fn auth(issuer: &Issuer, dir: &TempDir) -> OAuth2ClientCredentials {
    let key = dir.file(
        "key.json",
        r#"{"type":"client_credentials","client_id":"app-client","client_secret":"app secret&=","client_email":"app@example.com","issuer_url":"http://issuer.test"}"#,
    );
    OAuth2ClientCredentials::from_key_file(IN_MEMORY_URL, key)
        .audience("urn:pulsar:test")
        .scope("produce consume")
        .connector(issuer.connector())
}

async fn token(auth: &OAuth2ClientCredentials) -> Bytes {
    guard("credentials", auth.credentials())
        .await
        .expect("token")
}

#[tokio::test(start_paused = true)]
async fn a_token_is_reused_then_refreshed_before_it_expires() {
    let (issuer, dir) = (issuer(), TempDir::new("oauth2-key"));
    let auth = auth(&issuer, &dir);
    assert_eq!(auth.method(), "token");

    let first = token(&auth).await;
    assert_eq!(issuer.requests(), (1, 1), "discovery, then one token");
    assert_eq!(
        issuer.last_form("grant_type").as_deref(),
        Some("client_credentials")
    );
    assert_eq!(
        issuer.last_form("client_secret").as_deref(),
        Some("app secret&=")
    );
    assert_eq!(
        issuer.last_form("audience").as_deref(),
        Some("urn:pulsar:test")
    );
    assert_eq!(
        issuer.last_form("scope").as_deref(),
        Some("produce consume")
    );

    tokio::time::advance(Duration::from_secs(89)).await;
    assert_eq!(
        token(&auth).await,
        first,
        "reused within 90% of its lifetime"
    );
    assert_eq!(issuer.requests(), (1, 1));

    tokio::time::advance(Duration::from_secs(2)).await; // 91 s: due, not yet expired
    let second = token(&auth).await;
    assert_ne!(second, first);
    assert_eq!(issuer.requests(), (1, 2), "no second discovery");
}

#[tokio::test(start_paused = true)]
async fn a_refused_client_is_a_typed_error_without_the_secret() {
    let issuer = issuer();
    let auth = OAuth2ClientCredentials::new(IN_MEMORY_URL, "app-client", "wrong-secret")
        .connector(issuer.connector());
    let err = guard("refused", auth.credentials())
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err,
            AuthError::OAuth2(ref e) if matches!(**e,
                OAuth2Error::Refused { status: 401, ref code, .. } if code.as_deref() == Some("invalid_client"))
        ),
        "{err:?}"
    );
    assert!(!err.to_string().contains("wrong-secret"), "{err}");
    assert!(!format!("{auth:?}").contains("wrong-secret"));

    let dir = TempDir::new("oauth2-bad-key");
    let bad = dir.file("key.json", r#"{"client_id":"app-client"}"#);
    let auth =
        OAuth2ClientCredentials::from_key_file(IN_MEMORY_URL, bad).connector(issuer.connector());
    let err = guard("bad key file", auth.credentials())
        .await
        .expect_err("bad key");
    assert!(
        matches!(err, AuthError::OAuth2(ref e) if matches!(**e, OAuth2Error::KeyFileFormat { .. })),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_access_token_goes_in_connect_and_a_fresh_one_answers_the_challenge() {
    let (issuer, dir) = (issuer(), TempDir::new("oauth2-broker"));
    let options = ConnectionOptions::default().authentication(auth(&issuer, &dir));
    let (io, mut broker) = FakeBroker::pair();
    let script = async {
        let connect = broker.expect(Type::Connect).await;
        let body = connect.command.connect.as_ref().expect("CONNECT body");
        let sent = (body.auth_method_name.clone(), body.auth_data.clone());
        broker.send(answer::connected(None)).await;
        sent
    };
    let (conn, (method, first)) = guard("handshake", async {
        tokio::join!(Connection::connect(io, options), script)
    })
    .await;
    let conn = conn.expect("connected");
    assert_eq!(method.as_deref(), Some("token"));
    assert_eq!(issuer.requests(), (1, 1));

    // Past the refresh point, the broker challenges: a fresh token answers.
    tokio::time::advance(Duration::from_secs(95)).await;
    broker.send(answer::auth_challenge()).await;
    let response = guard("challenge", broker.expect(Type::AuthResponse)).await;
    let data = response
        .command
        .auth_response
        .as_ref()
        .and_then(|r| r.response.clone())
        .expect("AUTH_RESPONSE data");
    assert_eq!(data.auth_method_name.as_deref(), Some("token"));
    assert!(
        data.auth_data.is_some() && data.auth_data != first,
        "a fresh token"
    );
    assert_eq!(issuer.requests(), (1, 2));
    assert!(!conn.is_closed());
}

/// The OAuth2 error inside `err`, if it is one.
fn oauth2_error(err: &AuthError) -> Option<&OAuth2Error> {
    match err {
        AuthError::OAuth2(e) => Some(e),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn an_https_issuer_naming_a_plain_http_token_endpoint_never_gets_the_secret() {
    let (issuer, dir) = (issuer(), TempDir::new("oauth2-downgrade"));
    let ca = Ca::new("issuer CA");
    issuer
        .tls(server_config(&ca.issue(&["issuer.test"]), None))
        .token_endpoint("http://127.0.0.2/token");
    let auth = OAuth2ClientCredentials::new(IN_MEMORY_TLS_URL, "app-client", "app secret&=")
        .tls_trust_certs_file(dir.file("ca.pem", ca.pem()))
        .connector(issuer.connector());

    let outcome = guard("credentials", auth.credentials()).await;
    assert_eq!(
        issuer.requests(),
        (1, 0),
        "discovery over https, and no token request: the form with the secret is never sent"
    );
    assert_eq!(
        issuer.connects(),
        ["issuer.test:443"],
        "nothing opened to 127.0.0.2"
    );
    let err = outcome.expect_err("refused");
    assert!(
        matches!(oauth2_error(&err), Some(OAuth2Error::DowngradeRefused { issuer, token_endpoint })
            if issuer == IN_MEMORY_TLS_URL && token_endpoint == "http://127.0.0.2/token"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("allow_insecure_http"), "{message}");
    assert!(!message.contains("app secret"), "{message}");

    // Asked again, it is refused again, still without sending the form.
    let again = guard("credentials again", auth.credentials()).await;
    assert!(again.is_err(), "{again:?}");
    assert_eq!(issuer.requests().1, 0);
}

#[tokio::test(start_paused = true)]
async fn a_plain_http_issuer_off_loopback_is_refused_unless_allowed() {
    let issuer = issuer();
    let refused = OAuth2ClientCredentials::new("http://issuer.test", "app-client", "app secret&=")
        .connector(issuer.connector());
    let err = guard("refused", refused.credentials())
        .await
        .expect_err("plain http off loopback");
    assert!(
        matches!(oauth2_error(&err), Some(OAuth2Error::PlaintextRefused { url })
            if url == "http://issuer.test/.well-known/openid-configuration"),
        "{err:?}"
    );
    assert!(err.to_string().contains("allow_insecure_http"), "{err}");
    assert_eq!(issuer.requests(), (0, 0), "refused before connecting");
    assert!(issuer.connects().is_empty());

    // Opted in, it works, and every plain http request is warned about.
    issuer.token_endpoint("http://issuer.test/oauth/token");
    let allowed = OAuth2ClientCredentials::new("http://issuer.test", "app-client", "app secret&=")
        .allow_insecure_http()
        .connector(issuer.connector());
    let (token, logs) = capture_logs(guard("allowed", allowed.credentials())).await;
    token.expect("token once allowed");
    assert_eq!(issuer.requests(), (1, 1));
    let warnings: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("plain http"))
        .collect();
    assert_eq!(warnings.len(), 2, "discovery and token request: {logs}");
    assert!(!logs.contains("app secret"), "{logs}");
}

#[tokio::test(start_paused = true)]
async fn a_loopback_issuer_may_not_name_a_plain_http_token_endpoint_off_loopback() {
    let issuer = issuer();
    issuer.token_endpoint("http://auth.internal/token");
    let auth = OAuth2ClientCredentials::new(IN_MEMORY_URL, "app-client", "app secret&=")
        .connector(issuer.connector());
    let (outcome, logs) = capture_logs(guard("credentials", auth.credentials())).await;
    let err = outcome.expect_err("refused");
    assert!(
        matches!(oauth2_error(&err), Some(OAuth2Error::PlaintextRefused { url })
            if url == "http://auth.internal/token"),
        "{err:?}"
    );
    assert_eq!(issuer.requests(), (1, 0), "the form is never sent");
    assert_eq!(issuer.connects(), ["localhost:80"]);
    assert!(
        logs.lines()
            .any(|l| l.contains(" WARN ") && l.contains("plain http")),
        "plain http on loopback is still warned about: {logs}"
    );
}

/// The auth data of a CONNECT.
fn connect_token(frame: &Frame) -> Option<Bytes> {
    let body = frame.command.connect.as_ref().expect("CONNECT body");
    body.auth_data.clone()
}

#[tokio::test(start_paused = true)]
async fn an_absurd_expires_in_neither_panics_nor_breaks_later_connects() {
    let issuer = issuer();
    issuer.expires_in(serde_json::json!(1e20));
    let auth = OAuth2ClientCredentials::new(IN_MEMORY_URL, "app-client", "app secret&=")
        .connector(issuer.connector());
    let net = FakeNetwork::new();
    let (mut svc, mut owner) = (net.listen("svc:6650"), net.listen("owner:6650"));

    // The first connection: the token comes from the pool's connect task.
    let build = Client::builder()
        .service_url("pulsar://svc:6650")
        .connector(net.clone())
        .authentication(auth)
        .build();
    let script = async {
        let mut broker = svc.accept().await;
        let connect = broker.recv().await?;
        broker.send(answer::connected(None)).await;
        Some((broker, connect_token(&connect)))
    };
    let (client, served) = guard("first connect", async { tokio::join!(build, script) }).await;
    let client = client.expect("the client connects despite expires_in 1e20");
    let (mut broker, first) = served.expect("CONNECT sent");
    assert!(first.is_some(), "CONNECT carries the token");

    // A later connection, to the broker a lookup names.
    let topic: TopicName = "orders".parse().expect("topic");
    let lookup = tokio::spawn({
        let client = client.clone();
        async move { client.lookup(&topic).await }
    });
    let script = async {
        let asked = broker.expect(Type::Lookup).await;
        broker
            .send(answer::lookup(
                request_id(&asked),
                LookupType::Connect,
                "pulsar://owner:6650",
                true,
            ))
            .await;
        let mut second = owner.accept().await;
        let connect = second.expect(Type::Connect).await;
        second.send(answer::connected(None)).await;
        (second, connect_token(&connect))
    };
    let (conn, (_second, token)) =
        guard("later connect", async { tokio::join!(lookup, script) }).await;
    let conn = conn.expect("task").expect("a later connect works");
    assert!(!conn.is_closed());
    assert_eq!(
        token, first,
        "the token is reused: its lifetime is long, not absurd"
    );
    assert_eq!(issuer.requests(), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn the_issuers_tls_settings_are_read_once() {
    let (issuer, dir) = (issuer(), TempDir::new("oauth2-tls-once"));
    let ca = Ca::new("issuer CA");
    issuer.tls(server_config(&ca.issue(&["issuer.test"]), None));
    let ca_file = dir.file("ca.pem", ca.pem());
    let auth = OAuth2ClientCredentials::new(IN_MEMORY_TLS_URL, "app-client", "app secret&=")
        .tls_trust_certs_file(&ca_file)
        .connector(issuer.connector());
    let first = token(&auth).await;
    assert_eq!(issuer.requests(), (1, 1));

    // Gone from disk: the settings built for the first request serve the next.
    std::fs::remove_file(&ca_file).expect("remove the CA file");
    tokio::time::advance(Duration::from_secs(95)).await;
    let second = guard("credentials", auth.credentials()).await;
    let second = second.expect("a fresh token over the TLS settings already built");
    assert_ne!(second, first);
    assert_eq!(issuer.requests(), (1, 2));
}
