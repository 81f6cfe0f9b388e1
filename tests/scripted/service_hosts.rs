//! A service URL with several hosts, against scripted brokers on made-up
//! addresses: a host that refuses connections is skipped, and requests to
//! the service take the hosts in turn.

use pulsar_wire::client::{ClientError, TopicName};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::{Client, Error};

use crate::common::fake_broker::{FakeBroker, FakeListener, FakeNetwork, answer, request_id};
use crate::common::{guard, init_tracing};

fn builder(net: &FakeNetwork, url: &str) -> pulsar_wire::ClientBuilder {
    init_tracing();
    Client::builder().service_url(url).connector(net.clone())
}

async fn accept(listener: &mut FakeListener) -> FakeBroker {
    let mut broker = listener.accept().await;
    broker.handshake().await;
    broker
}

/// Answers the next LOOKUP on `broker` with "it is you".
async fn answer_lookup(broker: &mut FakeBroker, me: &str) {
    let asked = broker.expect(Type::Lookup).await;
    let url = format!("pulsar://{me}");
    broker
        .send(answer::lookup(
            request_id(&asked),
            LookupType::Connect,
            &url,
            false,
        ))
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_first_host_that_refuses_connections_is_skipped() {
    let net = FakeNetwork::new();
    let mut b = net.listen("b:6650");
    let build = builder(&net, "pulsar://a:6650,b:6650").build();
    let (client, mut broker) = guard("build", async { tokio::join!(build, accept(&mut b)) }).await;
    let client = client.expect("the second host answers");
    assert_eq!((net.connects("a:6650"), net.connects("b:6650")), (1, 1));

    let topic: TopicName = "orders".parse().expect("topic");
    let lookup = tokio::spawn({
        let client = client.clone();
        async move { client.lookup(&topic).await }
    });
    guard("lookup", answer_lookup(&mut broker, "b:6650")).await;
    let conn = guard("answer", lookup)
        .await
        .expect("task")
        .expect("lookup");
    assert_eq!(conn.peer(), "b:6650");
}

#[tokio::test(start_paused = true)]
async fn no_host_answering_is_the_last_hosts_connect_error() {
    let net = FakeNetwork::new();
    let built = guard("build", builder(&net, "pulsar://a:6650,b:6650").build()).await;
    match built {
        Err(Error::Client(ClientError::Connect { address, .. })) => assert_eq!(address, "b:6650"),
        other => panic!("{other:?}"),
    }
    assert_eq!((net.connects("a:6650"), net.connects("b:6650")), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn requests_to_the_service_take_the_hosts_in_turn() {
    let net = FakeNetwork::new();
    let (mut a, mut b) = (net.listen("a:6650"), net.listen("b:6650"));
    let build = builder(&net, "pulsar://a:6650,b:6650").build();
    let (client, mut at_a) = guard("build", async { tokio::join!(build, accept(&mut a)) }).await;
    let client = client.expect("client");

    // The build went to a; the next lookup starts at b, the one after at a.
    let topic: TopicName = "orders".parse().expect("topic");
    let lookup = |client: &Client| {
        let (client, topic) = (client.clone(), topic.clone());
        tokio::spawn(async move { client.lookup(&topic).await })
    };
    let first = lookup(&client);
    let mut at_b = guard("b", accept(&mut b)).await;
    guard("lookup at b", answer_lookup(&mut at_b, "b:6650")).await;
    assert_eq!(first.await.expect("task").expect("lookup").peer(), "b:6650");
    let second = lookup(&client);
    guard("lookup at a", answer_lookup(&mut at_a, "a:6650")).await;
    assert_eq!(
        second.await.expect("task").expect("lookup").peer(),
        "a:6650"
    );
    assert_eq!(
        (net.connects("a:6650"), net.connects("b:6650")),
        (1, 1),
        "pooled"
    );
}
