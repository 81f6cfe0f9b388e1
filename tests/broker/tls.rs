//! `pulsar+ssl://` through a TLS-terminating proxy in front of the real
//! test broker (see `common::tls`): success with the right CA, failures
//! that are typed and leave nothing open, mutual TLS, and no plaintext
//! fallback. Real time only.

use pulsar_wire::client::ClientError;
use pulsar_wire::connection::{ConnectionError, TlsProblem};
use pulsar_wire::{Client, Error, TopicName};

use crate::common::broker::TestBroker;
use crate::common::tls::{Ca, Identity, TlsProxy, server_config};
use crate::common::{capture_logs, guard, init_tracing, unique_topic};

const HOST: &str = "127.0.0.1";

/// A proxy presenting `identity` (requiring client certificates from
/// `client_ca` if given) in front of `broker`.
async fn proxy(broker: &TestBroker, identity: &Identity, client_ca: Option<&Ca>) -> TlsProxy {
    init_tracing();
    TlsProxy::start(server_config(identity, client_ca), broker.addr()).await
}

/// The TLS problem that made building a client fail.
fn tls_problem(built: Result<Client, Error>) -> TlsProblem {
    match built {
        Err(Error::Client(ClientError::Connect {
            source: ConnectionError::Tls { problem, .. },
            ..
        })) => problem,
        other => panic!("expected a TLS connect error, got {other:?}"),
    }
}

#[tokio::test]
async fn connects_and_looks_up_over_tls_with_the_right_ca() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let ca = Ca::new("test CA");
    let mut proxy = proxy(&broker, &ca.issue(&[HOST]), None).await;
    guard("tls client", async {
        let client = Client::builder()
            .service_url(proxy.url())
            .tls_trust_certs_pem(ca.pem())
            .build()
            .await
            .expect("client over TLS");
        assert_eq!(proxy.next_accept().await, Ok(()));
        let topic: TopicName = unique_topic("tls").parse().expect("topic");
        assert_eq!(
            client
                .partitioned_topic_metadata(&topic)
                .await
                .expect("metadata"),
            0
        );
        let conn = client.lookup(&topic).await.expect("lookup over TLS");
        // The broker's TLS URL (the proxy) was followed, not its plaintext one.
        assert_eq!(conn.peer(), proxy.addr().to_string());
        assert!(!conn.is_closed());
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_certificate_for_another_host_is_refused() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let ca = Ca::new("test CA");
    let mut proxy = proxy(&broker, &ca.issue(&["broker.example.com"]), None).await;
    let built = guard(
        "connect",
        Client::builder()
            .service_url(proxy.url())
            .tls_trust_certs_pem(ca.pem())
            .build(),
    )
    .await;
    assert_eq!(tls_problem(built), TlsProblem::HostnameMismatch);
    assert!(
        guard("server side", proxy.next_accept()).await.is_err(),
        "the server saw the handshake fail"
    );
}

#[tokio::test]
async fn a_certificate_from_an_unknown_ca_is_refused() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let (ca, stranger) = (Ca::new("test CA"), Ca::new("someone else"));
    let mut proxy = proxy(&broker, &stranger.issue(&[HOST]), None).await;
    let built = guard(
        "connect",
        Client::builder()
            .service_url(proxy.url())
            .tls_trust_certs_pem(ca.pem())
            .build(),
    )
    .await;
    assert_eq!(tls_problem(built), TlsProblem::UnknownIssuer);
    assert!(guard("server side", proxy.next_accept()).await.is_err());
}

#[tokio::test]
async fn an_expired_certificate_is_refused() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let ca = Ca::new("test CA");
    let mut proxy = proxy(&broker, &ca.issue_expired(&[HOST]), None).await;
    let built = guard(
        "connect",
        Client::builder()
            .service_url(proxy.url())
            .tls_trust_certs_pem(ca.pem())
            .build(),
    )
    .await;
    assert_eq!(tls_problem(built), TlsProblem::Expired);
    assert!(guard("server side", proxy.next_accept()).await.is_err());
}

#[tokio::test]
async fn a_plaintext_broker_behind_pulsar_ssl_is_refused_never_used_in_the_clear() {
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let ca = Ca::new("test CA");
    let url = broker.service_url().replace("pulsar://", "pulsar+ssl://");
    let built = guard(
        "connect",
        Client::builder()
            .service_url(url)
            .tls_trust_certs_pem(ca.pem())
            .build(),
    )
    .await;
    // pulsar-lite reads the ClientHello as an oversized frame and hangs up.
    assert_eq!(tls_problem(built), TlsProblem::ClosedDuringHandshake);
}

#[tokio::test]
async fn a_plaintext_server_that_answers_in_the_clear_is_not_tls() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    init_tracing();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        // A plaintext Pulsar frame (PING) instead of a ServerHello.
        let mut frame = bytes::BytesMut::new();
        pulsar_wire::wire::encode_command(&pulsar_wire::wire::commands::ping(), &mut frame)
            .expect("encode");
        socket.write_all(&frame).await.expect("write");
        // Until the client hangs up.
        let mut sink = Vec::new();
        let _ = socket.read_to_end(&mut sink).await;
    });
    let ca = Ca::new("test CA");
    let built = guard(
        "connect",
        Client::builder()
            .service_url(format!("pulsar+ssl://{addr}"))
            .tls_trust_certs_pem(ca.pem())
            .build(),
    )
    .await;
    assert_eq!(tls_problem(built), TlsProblem::NotTls);
    guard("client hung up", server).await.expect("server task");
}

#[tokio::test]
async fn mutual_tls_accepts_a_client_certificate_from_the_trusted_ca() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let ca = Ca::new("test CA");
    let mut proxy = proxy(&broker, &ca.issue(&[HOST]), Some(&ca)).await;
    let me = ca.issue(&["client.example.com"]);
    guard("mtls client", async {
        let client = Client::builder()
            .service_url(proxy.url())
            .tls_trust_certs_pem(ca.pem())
            .tls_client_auth_pem(me.cert_pem.clone(), me.key_pem.clone())
            .build()
            .await
            .expect("mutual TLS accepted");
        assert_eq!(proxy.next_accept().await, Ok(()));
        let topic: TopicName = unique_topic("mtls").parse().expect("topic");
        let conn = client.lookup(&topic).await.expect("lookup over mutual TLS");
        assert_eq!(conn.peer(), proxy.addr().to_string());
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn mutual_tls_refuses_a_missing_or_untrusted_client_certificate() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let (ca, stranger) = (Ca::new("test CA"), Ca::new("someone else"));
    let mut proxy = proxy(&broker, &ca.issue(&[HOST]), Some(&ca)).await;

    let without = guard(
        "no client cert",
        Client::builder()
            .service_url(proxy.url())
            .tls_trust_certs_pem(ca.pem())
            .build(),
    )
    .await;
    assert_eq!(tls_problem(without), TlsProblem::RejectedByServer);
    assert!(guard("server side", proxy.next_accept()).await.is_err());

    let forged = stranger.issue(&["client.example.com"]);
    let untrusted = guard(
        "untrusted client cert",
        Client::builder()
            .service_url(proxy.url())
            .tls_trust_certs_pem(ca.pem())
            .tls_client_auth_pem(forged.cert_pem, forged.key_pem)
            .build(),
    )
    .await;
    assert_eq!(tls_problem(untrusted), TlsProblem::RejectedByServer);
    assert!(guard("server side", proxy.next_accept()).await.is_err());
}

#[tokio::test]
async fn danger_accept_invalid_certs_connects_anyway_and_warns_once() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let stranger = Ca::new("someone else");
    let mut proxy = proxy(
        &broker,
        &stranger.issue_expired(&["elsewhere.example.com"]),
        None,
    )
    .await;
    let url = proxy.url();
    let (built, logs) = capture_logs(guard(
        "insecure client",
        Client::builder()
            .service_url(url)
            .danger_accept_invalid_certs()
            .build(),
    ))
    .await;
    let client = built.expect("verification was off");
    assert_eq!(guard("server side", proxy.next_accept()).await, Ok(()));
    assert_eq!(logs.matches("verification is OFF").count(), 1, "{logs}");
    client.close().await;
}
