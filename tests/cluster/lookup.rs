//! Lookup on a cluster: a broker that does not own a topic sends the client
//! to the one that does (a real LOOKUP redirect with the authoritative
//! flag), and a partitioned topic whose partitions sit on both brokers is
//! produced and consumed as one handle.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;

use pulsar_wire::connection::{Connection, ConnectionOptions, Response};
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::wire::commands;
use tokio::net::TcpStream;

use super::traffic::{body, client, number, shared};
use crate::common::cluster::{Cluster, namespace_of};
use crate::common::{admin, guard, unique_topic};

/// One LOOKUP sent to `service_url` by hand (`authoritative` as a client
/// following a redirect sets it): the broker's raw answer.
async fn raw_lookup(
    service_url: &str,
    topic: &str,
    authoritative: bool,
) -> pulsar_wire::proto::CommandLookupTopicResponse {
    let addr = service_url.trim_start_matches("pulsar://");
    let io = TcpStream::connect(addr).await.expect("connect");
    let conn = Connection::connect(io, ConnectionOptions::default())
        .await
        .expect("CONNECT");
    let answer = conn
        .request("LOOKUP", |id| commands::lookup(topic, id, authoritative))
        .await;
    conn.close().await;
    match answer {
        Ok(Response::LookupResponse(answer)) => answer,
        other => panic!("LOOKUP {topic} at {service_url}: {other:?}"),
    }
}

#[tokio::test]
async fn a_lookup_at_the_leader_is_redirected_authoritatively_to_the_assigned_owner() {
    let Some(cluster) = Cluster::attach().await else {
        return;
    };
    if cluster.load_manager() != "modular" {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED a_lookup_at_the_leader_is_redirected_authoritatively_to_the_assigned_owner: \
             the {} load manager answers every lookup with the owner, never a redirect",
            cluster.load_manager()
        );
        return;
    }
    guard("redirected lookup", async {
        // The load-manager leader decides where an unowned bundle goes; told
        // (unload with a destination) to give it to the other broker, it
        // answers a lookup with a redirect there, authoritative.
        let leader = cluster.which_admin(&admin::leader_broker(cluster.admin()).await);
        let owner = Cluster::other(leader);
        let topic = unique_topic("redirect");
        let bundle = admin::topic_bundle(cluster.admin(), &topic).await;
        admin::unload_bundle(
            cluster.admin(),
            &namespace_of(&topic),
            &bundle,
            Some(&cluster.broker(owner).id),
        )
        .await;

        let asked = &cluster.broker(leader).service_url;
        let answer = raw_lookup(asked, &topic, false).await;
        assert_eq!(answer.response(), LookupType::Redirect, "{answer:?}");
        assert!(answer.authoritative(), "{answer:?}");
        assert_eq!(
            answer.broker_service_url.as_deref(),
            Some(cluster.broker(owner).service_url.as_str())
        );
        // Followed by hand, the redirect makes the owner take the bundle.
        // (Until then the leader's choice is only a hint it may drop, so a
        // second lookup at the leader could be sent elsewhere.)
        let owner_url = &cluster.broker(owner).service_url;
        let answer = raw_lookup(owner_url, &topic, true).await;
        assert_eq!(answer.response(), LookupType::Connect, "{answer:?}");

        // The client, asking the leader, is sent to the owner and follows.
        let client = client(asked).await;
        let conn = client
            .lookup(&topic.parse().expect("topic"))
            .await
            .expect("lookup");
        let owner_addr = cluster
            .broker(owner)
            .service_url
            .trim_start_matches("pulsar://");
        assert_eq!(conn.peer(), owner_addr);
        assert_eq!(cluster.owner(&topic).await, owner);

        // And produces and consumes there.
        let producer = client.producer(&topic).create().await.expect("producer");
        let mut consumer = shared(&client, &topic, "s").await;
        producer
            .send(body(7))
            .await
            .expect("queued")
            .await
            .expect("stored");
        let m = consumer.receive().await.expect("receive");
        assert_eq!(number(m.payload()), 7);
        consumer.ack(&m).await.expect("ack");
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_partitioned_topic_on_both_brokers_is_one_producer_and_one_consumer() {
    const PARTITIONS: u32 = 4;
    const TOTAL: u64 = 2_000;
    let Some(cluster) = Cluster::attach().await else {
        return;
    };
    guard("partitioned topic on two brokers", async {
        let topic = unique_topic("partitioned");
        admin::create_partitioned_topic(cluster.admin(), &topic, PARTITIONS).await;
        let partition = |i: u32| format!("{topic}-partition-{i}");
        // Partition 0 on broker 1, and one in another bundle on broker 2.
        let first_bundle = cluster.place(&partition(0), 1).await;
        let mut other = None;
        for i in 1..PARTITIONS {
            if admin::topic_bundle(cluster.admin(), &partition(i)).await != first_bundle {
                cluster.place(&partition(i), 2).await;
                other = Some(i);
                break;
            }
        }
        assert!(
            other.is_some(),
            "all {PARTITIONS} partitions hash into one bundle; use another name"
        );
        let mut owners = HashMap::new();
        for i in 0..PARTITIONS {
            owners.insert(partition(i), cluster.owner(&partition(i)).await);
        }
        let brokers: BTreeSet<usize> = owners.values().copied().collect();
        assert_eq!(
            brokers,
            BTreeSet::from([1, 2]),
            "partitions on both brokers"
        );

        let client = client(&cluster.broker(1).service_url).await;
        let producer = client
            .producer(&topic)
            .batching(false)
            .create()
            .await
            .expect("producer");
        assert_eq!(producer.partitions(), PARTITIONS as usize);
        let mut consumer = shared(&client, &topic, "s").await;
        let mut receipts = Vec::new();
        for i in 0..TOTAL {
            receipts.push(producer.send(body(i)).await.expect("queued"));
        }
        for receipt in receipts {
            receipt.await.expect("stored");
        }
        let mut seen = HashSet::new();
        let mut from = BTreeSet::new();
        while (seen.len() as u64) < TOTAL {
            let m = consumer.receive().await.expect("receive");
            seen.insert(number(m.payload()));
            from.insert(owners[m.topic()]);
            consumer.ack(&m).await.expect("ack");
        }
        assert_eq!(from, BTreeSet::from([1, 2]), "messages from both brokers");
        client.close().await;
    })
    .await;
}
