//! OAuth2 client credentials against the in-memory test issuer, on tokio's
//! paused clock: discovery once, a token reused until 90% of its lifetime
//! and then replaced before it expires, the request's form fields, a
//! refused client as a typed error, and the access token in CONNECT and in
//! the answer to an AUTH_CHALLENGE.

use std::time::Duration;

use bytes::Bytes;
use pulsar_wire::auth::{AuthError, Authentication, OAuth2ClientCredentials, OAuth2Error};
use pulsar_wire::connection::{Connection, ConnectionOptions};
use pulsar_wire::proto::base_command::Type;

use crate::common::fake_broker::{FakeBroker, answer};
use crate::common::oauth2_issuer::{IN_MEMORY_URL, Issuer};
use crate::common::{TempDir, guard, init_tracing};

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
