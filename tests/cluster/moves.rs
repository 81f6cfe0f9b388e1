//! A topic moved between the brokers while a producer and a Shared consumer
//! run on it: its bundle is unloaded to the other broker again and again
//! (admin REST unload with a destination) and split once. The handles
//! follow by themselves; every confirmed message is consumed, every ack
//! holds, no copy comes but of the members of a batch acked in part, and
//! the subscription holds nothing afterwards.

use super::traffic::LONG;
use super::traffic::{Traffic, client, producer, shared};
use crate::common::acks::Fault;
use crate::common::cluster::Cluster;
use crate::common::{admin, guard, guard_for, unique_topic};

/// A namespace of its own (4 bundles), so the split leaves public/default alone.
pub(crate) async fn fresh_namespace(cluster: &Cluster, prefix: &str) -> String {
    let name = unique_topic(prefix);
    let local = name.rsplit('/').next().expect("a name");
    let namespace = format!("public/{local}");
    admin::create_namespace(cluster.admin(), &namespace, 4).await;
    namespace
}

#[tokio::test]
async fn moving_the_topic_between_brokers_under_load_loses_no_confirmed_message() {
    const TOTAL: u64 = 20_000;
    /// Confirmed counts at which the topic moves; the one marked `true` is a split.
    const MOVES: [(u64, bool); 7] = [
        (1_500, false),
        (4_000, false),
        (6_500, false),
        (9_000, true),
        (11_500, false),
        (14_000, false),
        (16_500, false),
    ];
    let Some(cluster) = Cluster::attach().await else {
        return;
    };
    let namespace = fresh_namespace(&cluster, "moves").await;
    let topic = format!("persistent://{namespace}/moving");
    cluster.place(&topic, 1).await;

    let client = client(&cluster.broker(1).service_url).await;
    let consumer = shared(&client, &topic, "s").await;
    let producer = producer(&client, &topic).await;
    let mut traffic = Traffic::start(&client, &topic, producer, consumer, TOTAL);
    let mut path = vec![1];
    for (at, split) in MOVES {
        traffic.confirmed(at).await;
        traffic.fault(Fault::Move);
        let from = *path.last().expect("an owner");
        let to = if split {
            guard("split", cluster.split(&topic)).await
        } else {
            let to = Cluster::other(from);
            guard("move", cluster.place(&topic, to)).await;
            to
        };
        path.push(to);
    }
    let report = guard_for("the rest consumed", LONG, traffic.finish("moves")).await;
    // Moves only, no kill: `finish` allows no message stored twice, and
    // the consumer drops every copy of what it acked, but for the acked
    // members of a batch acked in part when the broker closed it (the
    // broker closes a consumer for a move as for an operator's reset, and
    // the members of a reset's copy must come again).
    let beyond = &report.beyond_batches_in_part;
    assert!(
        beyond.is_empty(),
        "moves: {} copies over {path:?} beyond batches acked in part (first 10): {:?}",
        beyond.len(),
        &beyond[..beyond.len().min(10)]
    );
    eprintln!(
        "moves: owners {path:?}, {} duplicates over {} confirmed, all of them acked members \
         of batches acked in part",
        report.duplicates, report.confirmed
    );
    assert!(
        path.windows(2).filter(|w| w[0] != w[1]).count() >= 5,
        "the topic moved between brokers: {path:?}"
    );
    client.close().await;
}
