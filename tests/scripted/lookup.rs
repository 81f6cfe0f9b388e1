//! The client against scripted brokers on made-up addresses: redirects, the
//! redirect limit, proxying, error answers, the pool's shared connects.

use pulsar_wire::client::{ClientError, TopicName};
use pulsar_wire::connection::ConnectionError;
use pulsar_wire::proto::ServerError;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::{Client, Connection};
use tokio::task::JoinHandle;

use crate::common::fake_broker::{FakeBroker, FakeListener, FakeNetwork, answer, request_id};
use crate::common::{guard, init_tracing};

const SERVICE: &str = "svc:6650";

/// A client on `pulsar://svc:6650`, with the service broker's end of its first connection.
async fn client(net: &FakeNetwork, svc: &mut FakeListener) -> (Client, FakeBroker) {
    init_tracing();
    let build = Client::builder()
        .service_url(format!("pulsar://{SERVICE}"))
        .connector(net.clone())
        .build();
    let accept = async {
        let mut broker = svc.accept().await;
        broker.handshake().await;
        broker
    };
    let (client, broker) = tokio::join!(build, accept);
    (client.expect("client"), broker)
}

fn topic(name: &str) -> TopicName {
    name.parse().expect("valid topic")
}

fn spawn_lookup(client: &Client, name: &str) -> JoinHandle<Result<Connection, ClientError>> {
    let (client, topic) = (client.clone(), topic(name));
    tokio::spawn(async move { client.lookup(&topic).await })
}

#[tokio::test(start_paused = true)]
async fn a_redirect_leads_to_the_second_broker_with_the_authoritative_flag() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let mut owner = net.listen("owner:6650");
    let (client, mut svc_broker) = client(&net, &mut svc).await;

    let lookup = spawn_lookup(&client, "orders");
    let first = svc_broker.expect(Type::Lookup).await;
    assert_eq!(
        first
            .command
            .lookup_topic
            .as_ref()
            .and_then(|l| l.authoritative),
        Some(false)
    );
    let redirect = answer::lookup(
        request_id(&first),
        LookupType::Redirect,
        "pulsar://owner:6650",
        true,
    );
    svc_broker.send(redirect).await;

    let mut owner_broker = owner.accept().await;
    owner_broker.handshake().await;
    let second = owner_broker.expect(Type::Lookup).await;
    let asked = second.command.lookup_topic.as_ref().expect("body");
    assert_eq!(asked.topic, "persistent://public/default/orders");
    assert_eq!(
        asked.authoritative,
        Some(true),
        "the redirect's flag is passed on"
    );
    let connect = answer::lookup(
        request_id(&second),
        LookupType::Connect,
        "pulsar://owner:6650",
        true,
    );
    owner_broker.send(connect).await;

    let conn = guard("lookup", lookup)
        .await
        .expect("task")
        .expect("lookup");
    assert_eq!(conn.peer(), "owner:6650");
    assert_eq!(
        net.connects("owner:6650"),
        1,
        "the lookup connection is reused"
    );
}

#[tokio::test(start_paused = true)]
async fn a_redirect_loop_ends_with_a_clear_error_after_twenty_redirects() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut broker) = client(&net, &mut svc).await;
    // The service broker sends every lookup back to itself.
    let script = tokio::spawn(async move {
        let mut lookups = 0;
        while let Some(frame) = broker.recv().await {
            lookups += 1;
            let again = answer::lookup(
                request_id(&frame),
                LookupType::Redirect,
                "pulsar://svc:6650",
                false,
            );
            broker.send(again).await;
        }
        lookups
    });

    let err = client
        .lookup(&topic("loop"))
        .await
        .expect_err("a loop cannot succeed");
    match &err {
        ClientError::TooManyRedirects {
            topic,
            redirects,
            last,
        } => {
            assert_eq!(topic, "persistent://public/default/loop");
            assert_eq!((*redirects, last.as_str()), (20, SERVICE));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("20 redirects"), "{err}");
    client.close().await;
    assert_eq!(
        guard("script", script).await.expect("task"),
        21,
        "the first lookup plus 20 redirects"
    );
}

#[tokio::test(start_paused = true)]
async fn concurrent_lookups_share_one_connect_and_a_dead_connection_is_forgotten() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let mut owner = net.listen("owner:6650");
    let (client, mut svc_broker) = client(&net, &mut svc).await;

    let lookups: Vec<_> = (0..10)
        .map(|i| spawn_lookup(&client, &format!("t{i}")))
        .collect();
    for _ in 0..10 {
        let frame = svc_broker.expect(Type::Lookup).await;
        let url = "pulsar://owner:6650";
        svc_broker
            .send(answer::lookup(
                request_id(&frame),
                LookupType::Connect,
                url,
                false,
            ))
            .await;
    }
    let mut owner_broker = owner.accept().await;
    owner_broker.handshake().await;
    let mut ids = Vec::new();
    for l in lookups {
        ids.push(
            guard("lookup", l)
                .await
                .expect("task")
                .expect("lookup")
                .id(),
        );
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "one shared connection");
    assert_eq!(
        net.connects("owner:6650"),
        1,
        "one connect attempt for ten lookups"
    );
    assert_eq!(net.connects(SERVICE), 1);

    // The owner's connection dies; the next lookup connects afresh.
    let again = topic("again");
    let first = client.lookup(&again);
    let answer_it = async {
        let frame = svc_broker.expect(Type::Lookup).await;
        drop(owner_broker);
        let url = "pulsar://owner:6650";
        svc_broker
            .send(answer::lookup(
                request_id(&frame),
                LookupType::Connect,
                url,
                false,
            ))
            .await;
        let mut fresh = owner.accept().await;
        fresh.handshake().await;
        fresh
    };
    let (conn, _fresh) = tokio::join!(first, answer_it);
    let conn = conn.expect("lookup");
    assert_ne!(conn.id(), ids[0]);
    assert_eq!(net.connects("owner:6650"), 2);
}

#[tokio::test(start_paused = true)]
async fn proxy_through_service_url_connects_via_the_asked_address() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut proxy) = client(&net, &mut svc).await;

    let lookup = spawn_lookup(&client, "t");
    let frame = proxy.expect(Type::Lookup).await;
    let url = "pulsar://hidden:6650";
    proxy
        .send(answer::lookup_via_proxy(request_id(&frame), url))
        .await;

    let mut proxied = svc.accept().await;
    proxied.handshake_via_proxy("hidden:6650").await;
    let conn = guard("lookup", lookup)
        .await
        .expect("task")
        .expect("lookup");
    assert_eq!(conn.peer(), "hidden:6650 via svc:6650");
    assert_eq!(net.connects("hidden:6650"), 0, "never dialled directly");
}

#[tokio::test(start_paused = true)]
async fn lookup_and_metadata_errors_carry_the_op_topic_and_broker_code() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut broker) = client(&net, &mut svc).await;

    let metadata = {
        let client = client.clone();
        tokio::spawn(async move { client.partitioned_topic_metadata(&topic("m")).await })
    };
    let frame = broker.expect(Type::PartitionedMetadata).await;
    broker.send(answer::partitions(request_id(&frame), 7)).await;
    assert_eq!(
        guard("metadata", metadata)
            .await
            .expect("task")
            .expect("metadata"),
        7
    );

    let lookup = spawn_lookup(&client, "missing");
    let frame = broker.expect(Type::Lookup).await;
    broker
        .send(answer::error(
            request_id(&frame),
            ServerError::TopicNotFound,
            "gone",
        ))
        .await;
    match guard("lookup", lookup).await.expect("task") {
        Err(ClientError::Request {
            op,
            topic,
            source: ConnectionError::Server { code, message, .. },
        }) => {
            assert_eq!(
                (op, topic.as_str()),
                ("LOOKUP", "persistent://public/default/missing")
            );
            assert_eq!(
                (code, message.as_str()),
                (ServerError::TopicNotFound, "gone")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn closing_the_client_fails_waiters_and_later_calls() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut broker) = client(&net, &mut svc).await;
    let lookup = spawn_lookup(&client, "t");
    broker.expect(Type::Lookup).await;
    client.close().await;
    match guard("lookup", lookup).await.expect("task") {
        Err(ClientError::Request {
            source: ConnectionError::Closed,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        client.lookup(&topic("t")).await,
        Err(ClientError::Closed)
    ));
    assert!(broker.recv().await.is_none(), "the socket was closed");
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_service_url_fails_build_with_the_address() {
    init_tracing();
    let net = FakeNetwork::new();
    let built = Client::builder()
        .service_url("pulsar://nowhere:6650")
        .connector(net)
        .build()
        .await;
    match built {
        Err(pulsar_wire::Error::Client(ClientError::Connect {
            address,
            source: ConnectionError::Io(_),
        })) => {
            assert_eq!(address, "nowhere:6650");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn partitioned_metadata_cut_off_by_a_lost_connection_is_asked_again() {
    // As the Java client does: a passing failure (here the connection
    // dropped with the request pending) is retried with backoff; only the
    // operation timeout ends the attempts.
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut first) = client(&net, &mut svc).await;
    let asked = {
        let client = client.clone();
        tokio::spawn(async move { client.partitioned_topic_metadata(&topic("t")).await })
    };
    first.expect(Type::PartitionedMetadata).await;
    drop(first);
    let mut fresh = svc.accept().await;
    fresh.handshake().await;
    let frame = fresh.expect(Type::PartitionedMetadata).await;
    fresh.send(answer::partitions(request_id(&frame), 3)).await;
    let got = guard("asked again", asked).await.expect("task");
    assert_eq!(got.expect("partitions"), 3);
}
