//! Token authentication and authorization on a broker that checks them:
//! the Apache Pulsar standalone of `scripts/apache-pulsar-auth` (pulsar-lite
//! accepts any token). A valid token works; an expired, a foreign and a
//! missing one are refused, each with the [`AuthFailure`] that says which;
//! a role without permission is refused as unauthorised at LOOKUP or
//! PRODUCER; and a consumer outlives its token by answering the broker's
//! AUTH_CHALLENGE with a fresh one, on the same connection.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use pulsar_wire::auth::{AuthError, AuthFailure, Authentication, TokenAuthentication};
use pulsar_wire::connection::Connection;
use pulsar_wire::consumer::{Consumer, InitialPosition, SubscriptionType};
use pulsar_wire::producer::Producer;
use pulsar_wire::{Client, TopicName};
use tokio::sync::watch;

use crate::common::guard;
use crate::common::jwt;
use crate::common::secured::{APP_ROLE, READER_ROLE, SecuredBroker};

async fn client_with(
    broker: &SecuredBroker,
    auth: impl Authentication,
) -> Result<Client, pulsar_wire::Error> {
    Client::builder()
        .service_url(&broker.service_url)
        .authentication(auth)
        .build()
        .await
}

async fn pair(client: &Client, topic: &str) -> (Producer, Consumer) {
    let consumer = client
        .consumer(topic, "secured")
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe");
    let producer = client.producer(topic).create().await.expect("producer");
    (producer, consumer)
}

/// Sends `text` and receives it back (acking it).
async fn round_trip(producer: &Producer, consumer: &mut Consumer, text: &str) {
    let id = producer
        .send(text.to_owned())
        .await
        .expect("send")
        .await
        .expect("receipt");
    let msg = consumer.receive().await.expect("receive");
    assert_eq!(
        (msg.id(), msg.payload()),
        (id, &Bytes::from(text.to_owned()))
    );
    consumer.ack(&msg).await.expect("ack");
}

#[tokio::test]
async fn a_valid_token_produces_and_consumes() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    guard("valid token", async {
        let auth = TokenAuthentication::from_token(broker.token(APP_ROLE));
        let client = client_with(&broker, auth).await.expect("client");
        let (producer, mut consumer) = pair(&client, &broker.topic("valid")).await;
        round_trip(&producer, &mut consumer, "hello").await;
        client.close().await;
    })
    .await;
}

/// What building a client with `token` fails with.
async fn refused(broker: &SecuredBroker, token: Option<String>) -> pulsar_wire::Error {
    let builder = Client::builder().service_url(&broker.service_url);
    let builder = match token {
        Some(token) => builder.authentication(TokenAuthentication::from_token(token)),
        None => builder,
    };
    match guard("refused CONNECT", builder.build()).await {
        Ok(_) => panic!("the broker accepted the connection"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn an_expired_token_is_refused_as_expired() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let token = broker.token_expiring_in(APP_ROLE, -60);
    let err = refused(&broker, Some(token.clone())).await;
    assert_eq!(err.auth_failure(), Some(AuthFailure::Expired), "{err}");
    let text = err.to_string();
    assert!(text.contains("expired"), "{text}");
    assert!(
        !text.contains(&token),
        "the token leaked into the error: {text}"
    );
}

#[tokio::test]
async fn a_token_signed_with_another_key_or_none_is_refused_as_rejected() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let foreign = jwt::mint(&[7u8; 32], APP_ROLE, None);
    let err = refused(&broker, Some(foreign)).await;
    assert_eq!(err.auth_failure(), Some(AuthFailure::Rejected), "{err}");
    // Not expired: a foreign signature and a far-future `exp`.
    let foreign = jwt::mint(&[7u8; 32], APP_ROLE, Some(jwt::unix_now() + 3600));
    let err = refused(&broker, Some(foreign)).await;
    assert_eq!(err.auth_failure(), Some(AuthFailure::Rejected), "{err}");
    let err = refused(&broker, None).await;
    assert_eq!(err.auth_failure(), Some(AuthFailure::Rejected), "{err}");
    assert!(err.to_string().contains("\"none\""), "{err}");
}

#[tokio::test]
async fn a_role_without_permission_is_unauthorized() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    guard("unauthorised", async {
        // `app` has no permission at all on public/default: LOOKUP refused.
        let app = client_with(
            &broker,
            TokenAuthentication::from_token(broker.token(APP_ROLE)),
        )
        .await
        .expect("app client");
        let elsewhere = crate::common::unique_topic("unauthorized");
        let err = app
            .producer(elsewhere.as_str())
            .create()
            .await
            .expect_err("produce");
        assert_eq!(err.auth_failure(), Some(AuthFailure::Unauthorized), "{err}");
        let err = app
            .consumer(elsewhere.as_str(), "s")
            .subscribe()
            .await
            .expect_err("subscribe");
        assert_eq!(err.auth_failure(), Some(AuthFailure::Unauthorized), "{err}");
        let topic: TopicName = elsewhere.parse().expect("topic");
        let err = app.lookup(&topic).await.expect_err("lookup");
        assert_eq!(err.auth_failure(), Some(AuthFailure::Unauthorized), "{err}");

        // `reader` may consume in the namespace, not produce: PRODUCER refused.
        let reader = client_with(
            &broker,
            TokenAuthentication::from_token(broker.token(READER_ROLE)),
        )
        .await
        .expect("reader client");
        let topic = broker.topic("read-only");
        let consumer = reader
            .consumer(topic.as_str(), "s")
            .subscribe()
            .await
            .expect("the reader may subscribe");
        let err = reader
            .producer(topic.as_str())
            .create()
            .await
            .expect_err("produce");
        assert_eq!(err.auth_failure(), Some(AuthFailure::Unauthorized), "{err}");
        consumer.close().await.expect("close");
        app.close().await;
        reader.close().await;
    })
    .await;
}

/// Hands out `first` for CONNECT and `later` for every call after it (the
/// answers to AUTH_CHALLENGE), counting the calls.
#[derive(Debug)]
struct Rotating {
    first: String,
    later: String,
    calls: watch::Sender<usize>,
}

impl Rotating {
    fn new(first: String, later: String) -> (Self, watch::Receiver<usize>) {
        let (calls, seen) = watch::channel(0);
        (
            Self {
                first,
                later,
                calls,
            },
            seen,
        )
    }
}

impl Authentication for Rotating {
    fn method(&self) -> &str {
        "token"
    }

    fn credentials(&self) -> BoxFuture<'_, Result<Bytes, AuthError>> {
        let mut call = 0;
        self.calls.send_modify(|n| {
            call = *n;
            *n += 1;
        });
        let token = if call == 0 { &self.first } else { &self.later };
        let token = Bytes::from(token.clone());
        Box::pin(async move { Ok(token) })
    }
}

/// The pooled connection `client` uses for `topic` (one per broker: the
/// same one its producers and consumers use).
async fn connection(client: &Client, topic: &str) -> Connection {
    let topic: TopicName = topic.parse().expect("topic");
    client.lookup(&topic).await.expect("lookup")
}

#[tokio::test]
async fn a_consumer_outlives_its_token_by_answering_the_challenge() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    // The broker checks every 2 s (authenticationRefreshCheckSeconds) and
    // challenges once the CONNECT token has expired.
    let (auth, mut calls) = Rotating::new(
        broker.token_expiring_in(APP_ROLE, 3),
        broker.token(APP_ROLE),
    );
    guard("refresh", async {
        let client = client_with(&broker, auth).await.expect("client");
        let topic = broker.topic("refresh");
        let (producer, mut consumer) = pair(&client, &topic).await;
        let conn = connection(&client, &topic).await;
        round_trip(&producer, &mut consumer, "before the refresh").await;

        // The one credentials call after CONNECT is the challenge's answer.
        calls.wait_for(|&n| n >= 2).await.expect("provider alive");
        round_trip(&producer, &mut consumer, "after the refresh").await;
        let again = connection(&client, &topic).await;
        assert_eq!(again.id(), conn.id(), "the same connection throughout");
        assert!(!conn.is_closed());
        assert_eq!(
            *calls.borrow(),
            2,
            "no reconnect: CONNECT and one challenge"
        );
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_challenge_answered_with_the_expired_token_loses_the_connection() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    // The counterpart of the test above: the broker does enforce expiry.
    let short = broker.token_expiring_in(APP_ROLE, 3);
    let (auth, mut calls) = Rotating::new(short.clone(), short);
    guard("stale answer", async {
        let client = Arc::new(client_with(&broker, auth).await.expect("client"));
        let conn = connection(&client, &broker.topic("stale")).await;
        calls.wait_for(|&n| n >= 2).await.expect("provider alive");
        let err = conn.closed().await;
        assert!(err.is_connection_lost(), "{err:?}");
        client.close().await;
    })
    .await;
}

/// An issuer on loopback TCP that signs with the broker's key, and client
/// credentials for it (role `app`).
#[cfg(feature = "oauth2")]
async fn oauth2(
    broker: &SecuredBroker,
    lifetime_secs: u64,
) -> (
    crate::common::oauth2_issuer::Issuer,
    pulsar_wire::auth::OAuth2ClientCredentials,
) {
    let issuer = crate::common::oauth2_issuer::Issuer::new(broker.key(), lifetime_secs);
    issuer
        .client("app-client", "app-secret", APP_ROLE)
        .require_audience("urn:pulsar:secured");
    let url = issuer.serve_tcp().await;
    let auth = pulsar_wire::auth::OAuth2ClientCredentials::new(url, "app-client", "app-secret")
        .audience("urn:pulsar:secured");
    (issuer, auth)
}

#[cfg(feature = "oauth2")]
#[tokio::test]
async fn oauth2_client_credentials_produce_and_consume() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let (issuer, auth) = oauth2(&broker, 3600).await;
    guard("oauth2", async {
        let client = client_with(&broker, auth).await.expect("client");
        let (producer, mut consumer) = pair(&client, &broker.topic("oauth2")).await;
        round_trip(&producer, &mut consumer, "with an OAuth2 token").await;
        client.close().await;
    })
    .await;
    assert_eq!(issuer.requests(), (1, 1), "one discovery, one token");
}

#[cfg(feature = "oauth2")]
#[tokio::test]
async fn an_oauth2_token_is_refreshed_when_the_broker_challenges() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    // A 3 s token: the broker challenges once it has expired, and by then
    // 90% of its lifetime has passed, so the answer is a fresh token.
    let (issuer, auth) = oauth2(&broker, 3).await;
    guard("oauth2 refresh", async {
        let client = client_with(&broker, auth).await.expect("client");
        let topic = broker.topic("oauth2-refresh");
        let (producer, mut consumer) = pair(&client, &topic).await;
        let conn = connection(&client, &topic).await;
        round_trip(&producer, &mut consumer, "first token").await;
        // The broker's challenge makes the client fetch a second token.
        issuer.token_requests_reach(2).await;
        round_trip(&producer, &mut consumer, "second token").await;
        let again = connection(&client, &topic).await;
        assert_eq!(again.id(), conn.id(), "the same connection throughout");
        client.close().await;
    })
    .await;
}
