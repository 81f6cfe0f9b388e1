//! The broker that owns a topic is killed with SIGKILL while a producer and
//! a Shared consumer run on it: once its ZooKeeper session expires the
//! survivor takes the topic over, and the handles follow without help from
//! the application; nothing confirmed is lost, and the acks the killed
//! broker had not persisted are the only ones that do not hold. The killed
//! broker is then started again and the topic moved back to it, the handles
//! following once more.

use super::traffic::{LONG, Traffic, client, producer, shared};
use crate::common::acks::Fault;
use crate::common::cluster::Cluster;
use crate::common::{guard_for, unique_topic};

#[tokio::test]
async fn killing_the_owner_moves_the_topic_to_the_survivor_and_nothing_confirmed_is_lost() {
    const TOTAL: u64 = 10_000;
    let Some(mut cluster) = Cluster::attach().await else {
        return;
    };
    // The client's service URL is broker 1, the survivor: broker 2 owns the
    // topic and dies.
    let topic = unique_topic("death");
    cluster.place(&topic, 2).await;
    let client = client(&cluster.broker(1).service_url).await;
    let consumer = shared(&client, &topic, "s").await;
    let producer = producer(&client, &topic).await;
    let mut traffic = Traffic::start(&client, &topic, producer, consumer, TOTAL);

    traffic.confirmed(2_000).await;
    traffic.fault(Fault::Kill);
    cluster.kill_broker(2).await;
    traffic.confirmed(6_000).await;
    assert_eq!(
        cluster.owner(&topic).await,
        1,
        "the survivor owns the topic"
    );

    cluster.start_broker(2).await;
    traffic.fault(Fault::Move);
    cluster.place(&topic, 2).await;
    let report = guard_for("the rest consumed", LONG, traffic.finish("death")).await;
    assert_eq!(
        cluster.owner(&topic).await,
        2,
        "moved back to the restarted broker"
    );
    eprintln!(
        "death: broker 2 killed at 2,000 confirmed, back at 6,000+; {} duplicates \
         ({} ids again, {} stored twice)",
        report.duplicates, report.redelivered, report.stored_twice
    );
    client.close().await;
}
