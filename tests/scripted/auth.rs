//! Authentication against a scripted broker: the token in CONNECT, fresh
//! credentials for AUTH_CHALLENGE (during the handshake and on a live
//! connection), a failing provider, and no token in any log line.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use futures::future::BoxFuture;
use pulsar_wire::auth::{AuthError, Authentication, TokenAuthentication};
use pulsar_wire::connection::{Connection, ConnectionError, ConnectionOptions};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::wire::{Frame, commands};
use pulsar_wire::{Client, TopicName};

use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer, request_id};
use crate::common::{capture_logs, guard, init_tracing};

const FIRST: &str = "first-token-aaaa";
const SECOND: &str = "rotated-token-bbbb";

/// A token file in the temp dir, removed on drop.
struct TokenFile(PathBuf);

impl TokenFile {
    fn new(name: &str, token: &str) -> Self {
        let path = std::env::temp_dir().join(format!("pulsar-wire-{name}-{}", std::process::id()));
        std::fs::write(&path, token).expect("write token");
        Self(path)
    }

    fn rotate(&self, token: &str) {
        std::fs::write(&self.0, token).expect("rotate token");
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn connect_credentials(frame: &Frame) -> (Option<String>, Option<Bytes>) {
    let body = frame.command.connect.as_ref().expect("CONNECT body");
    (body.auth_method_name.clone(), body.auth_data.clone())
}

fn response_credentials(frame: &Frame) -> (Option<String>, Option<Bytes>) {
    let data = frame
        .command
        .auth_response
        .as_ref()
        .and_then(|r| r.response.clone())
        .expect("AUTH_RESPONSE data");
    (data.auth_method_name, data.auth_data)
}

fn token(method: &str, value: &str) -> (Option<String>, Option<Bytes>) {
    (Some(method.into()), Some(Bytes::from(value.to_owned())))
}

#[tokio::test]
async fn token_in_connect_then_a_fresh_one_for_each_challenge() {
    init_tracing();
    let file = TokenFile::new("challenge", &format!("{FIRST}\n"));
    let options =
        ConnectionOptions::default().authentication(TokenAuthentication::from_file(&file.0));
    let (io, mut broker) = FakeBroker::pair();
    let script = async {
        let connect = broker.expect(Type::Connect).await;
        assert_eq!(connect_credentials(&connect), token("token", FIRST));
        // A challenge before CONNECTED is answered within the handshake.
        file.rotate(SECOND);
        broker.send(answer::auth_challenge()).await;
        let response = broker.expect(Type::AuthResponse).await;
        assert_eq!(response_credentials(&response), token("token", SECOND));
        broker.send(answer::connected(None)).await;
        broker
    };
    let (conn, mut broker) = guard("handshake", async {
        tokio::join!(Connection::connect(io, options), script)
    })
    .await;
    let conn = conn.expect("connected");

    // On the live connection: the token rotates, the broker challenges.
    file.rotate("third-token-cccc");
    broker.send(answer::auth_challenge()).await;
    let response = guard("challenge", broker.expect(Type::AuthResponse)).await;
    assert_eq!(
        response_credentials(&response),
        token("token", "third-token-cccc")
    );

    // The connection still works.
    let lookup = tokio::spawn({
        let conn = conn.clone();
        async move {
            conn.request("LOOKUP", |id| {
                commands::lookup("persistent://public/default/t", id, false)
            })
            .await
        }
    });
    let asked = guard("lookup", broker.expect(Type::Lookup)).await;
    broker
        .send(answer::lookup(
            request_id(&asked),
            LookupType::Connect,
            "pulsar://b:6650",
            false,
        ))
        .await;
    guard("answer", lookup)
        .await
        .expect("task")
        .expect("lookup answered");
    assert!(!conn.is_closed());
}

/// Hands out one token, then fails.
#[derive(Debug, Default)]
struct OnceOnly {
    calls: AtomicUsize,
}

impl Authentication for OnceOnly {
    fn method(&self) -> &str {
        "token"
    }

    fn credentials(&self) -> BoxFuture<'_, Result<Bytes, AuthError>> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            match call {
                0 => Ok(Bytes::from_static(FIRST.as_bytes())),
                _ => Err(AuthError::Provider {
                    method: "token".into(),
                    source: Arc::new(std::io::Error::other("token service unreachable")),
                }),
            }
        })
    }
}

#[tokio::test]
async fn a_provider_failing_on_challenge_closes_the_connection_with_a_typed_error() {
    init_tracing();
    let options = ConnectionOptions::default().authentication(OnceOnly::default());
    let (io, mut broker) = FakeBroker::pair();
    let (conn, ()) = tokio::join!(Connection::connect(io, options), broker.handshake());
    let conn = conn.expect("connected");
    broker.send(answer::auth_challenge()).await;
    let err = guard("closed", conn.closed()).await;
    assert!(
        matches!(err, ConnectionError::Auth(AuthError::Provider { .. })),
        "{err:?}"
    );
    assert!(!err.to_string().contains(FIRST));
    guard("socket closed", broker.until_closed()).await;
}

#[tokio::test]
async fn no_token_in_any_log_line_or_debug_output() {
    let net = FakeNetwork::new();
    let mut svc = net.listen("svc:6650");
    let run = async {
        let build = Client::builder()
            .service_url("pulsar://svc:6650")
            .connector(net.clone())
            .authentication(TokenAuthentication::from_token(FIRST))
            .build();
        let script = async {
            let mut broker = svc.accept().await;
            let connect = broker.expect(Type::Connect).await;
            assert_eq!(connect_credentials(&connect), token("token", FIRST));
            broker.send(answer::connected(None)).await;
            broker
        };
        let (client, mut broker) = tokio::join!(build, script);
        let client = client.expect("client");
        broker.send(answer::auth_challenge()).await;
        let response = broker.expect(Type::AuthResponse).await;
        assert_eq!(response_credentials(&response), token("token", FIRST));
        let topic: TopicName = "orders".parse().expect("topic");
        let lookup = tokio::spawn({
            let client = client.clone();
            async move { client.lookup(&topic).await }
        });
        let asked = broker.expect(Type::Lookup).await;
        broker
            .send(answer::lookup(
                request_id(&asked),
                LookupType::Connect,
                "pulsar://svc:6650",
                false,
            ))
            .await;
        let conn = lookup.await.expect("task").expect("lookup");
        format!("{client:?} {conn:?}")
    };
    let (debug, logs) = capture_logs(guard("run", run)).await;
    assert!(
        logs.contains("AUTH_CHALLENGE"),
        "TRACE logs were captured: {logs}"
    );
    assert!(
        !logs.contains(FIRST),
        "the token leaked into the logs:\n{logs}"
    );
    assert!(
        !debug.contains(FIRST),
        "the token leaked into Debug: {debug}"
    );
}

#[tokio::test]
async fn no_credentials_for_connect_fails_the_connect_typed_without_sending_it() {
    init_tracing();
    let net = FakeNetwork::new();
    let mut svc = net.listen("svc:6650");
    let build = Client::builder()
        .service_url("pulsar://svc:6650")
        .connector(net.clone())
        .authentication(TokenAuthentication::from_file("/nonexistent/pulsar-token"))
        .build();
    let script = async {
        let mut broker = svc.accept().await;
        // The client hangs up without a CONNECT.
        assert!(broker.recv().await.is_none());
    };
    let (built, ()) = guard("connect", async { tokio::join!(build, script) }).await;
    match built {
        Err(pulsar_wire::Error::Client(pulsar_wire::ClientError::Connect {
            source: ConnectionError::Auth(AuthError::TokenFile { path, .. }),
            ..
        })) => assert_eq!(path, PathBuf::from("/nonexistent/pulsar-token")),
        other => panic!("{other:?}"),
    }
}
