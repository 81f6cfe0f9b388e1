//! Dead-letter redrive on the test kit (`pulsar_wire::testing`): a
//! message goes back only to the topic its dead-letter topic is for,
//! whatever `REAL_TOPIC` a producer wrote into it.

use pulsar_wire::consumer::dead_letter::REAL_TOPIC;
use pulsar_wire::consumer::{
    DEFAULT_REDRIVE_SUBSCRIPTION, DeadLetterPolicy, Outcome, RunOptions, SkipReason,
    SubscriptionType,
};
use pulsar_wire::producer::ProducerMessage;
use pulsar_wire::testing::TestBroker;
use pulsar_wire::{Client, Message, MessageId};

use crate::common::guard;

const TOPIC: &str = "persistent://public/default/orders";
const DLQ: &str = "persistent://public/default/orders-billing-DLQ";
/// A topic the producer of `TOPIC` may not write to.
const FOREIGN: &str = "persistent://ops/secure/commands";

async fn publish(client: &Client, topic: &str, msg: ProducerMessage) -> MessageId {
    let producer = client.producer(topic).create().await.expect("producer");
    let id = producer
        .send(msg)
        .await
        .expect("queued")
        .await
        .expect("stored");
    producer.close().await.expect("close");
    id
}

/// A message whose producer wrote `REAL_TOPIC` = [`FOREIGN`] fails
/// processing and is dead-lettered: its copy names the topic it was
/// consumed from, and a redrive puts it back there.
#[tokio::test(start_paused = true)]
async fn a_real_topic_set_by_the_producer_never_becomes_the_redrive_target() {
    let broker = TestBroker::start();
    let client = broker.client().await.expect("client");
    let consumer = client
        .consumer(TOPIC, "billing")
        .subscription_type(SubscriptionType::Shared)
        .dead_letter_policy(DeadLetterPolicy::after_redeliveries(1))
        .subscribe()
        .await
        .expect("subscribe");
    let forged = ProducerMessage::new("poison").property(REAL_TOPIC, FOREIGN);
    publish(&client, TOPIC, forged).await;
    let runner = consumer.clone();
    let run = tokio::spawn(async move {
        let handler = |_msg: Message| async { Err::<Outcome, _>("cannot parse") };
        runner.run(handler, RunOptions::default()).await
    });
    guard(
        "the dead letter",
        broker.wait_until(|b| !b.dead_letters(TOPIC, "billing").is_empty()),
    )
    .await;
    consumer.close().await.expect("close");
    run.await.expect("join").expect("run");
    let dead = broker.dead_letters(TOPIC, "billing");
    assert_eq!(dead[0].property(REAL_TOPIC), Some(TOPIC));

    let report = client.redrive(DLQ).run().await.expect("redrive");
    assert!(
        broker.messages(FOREIGN).is_empty(),
        "nothing goes to {FOREIGN}"
    );
    assert_eq!(report.moved.len(), 1);
    assert_eq!(report.moved[0].target, TOPIC);
    let back = broker.messages(TOPIC);
    assert_eq!(back.len(), 2, "the original, and its copy moved back");
    assert_eq!(back[1].text(), "poison");
}

/// A dead-letter topic holding a copy that names a topic it is not for
/// (written there by another client, or by anyone who may write to it):
/// the redrive leaves that copy where it is and moves the others.
#[tokio::test(start_paused = true)]
async fn a_redrive_leaves_a_copy_whose_real_topic_is_another_topic() {
    let broker = TestBroker::start();
    let client = broker.client().await.expect("client");
    let forged = ProducerMessage::new("forged").property(REAL_TOPIC, FOREIGN);
    let forged_id = publish(&client, DLQ, forged).await;
    let partition = format!("{TOPIC}-partition-1");
    let honest = ProducerMessage::new("honest").property(REAL_TOPIC, partition.as_str());
    publish(&client, DLQ, honest).await;

    let report = client.redrive(DLQ).run().await.expect("redrive");
    assert!(
        broker.messages(FOREIGN).is_empty(),
        "nothing goes to {FOREIGN}"
    );
    assert_eq!(report.moved.len(), 1);
    let back = broker.messages(&partition);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].text(), "honest");
    let [skipped] = &report.skipped[..] else {
        panic!("one left: {report:?}");
    };
    assert_eq!(skipped.id, forged_id);
    let foreign = SkipReason::ForeignTarget {
        real_topic: FOREIGN.to_owned(),
    };
    assert_eq!(skipped.reason, foreign);
    assert_eq!(broker.backlog(DLQ, DEFAULT_REDRIVE_SUBSCRIPTION), Some(1));

    // Named as a target, it moves.
    let allowed = client.redrive(DLQ).allow_target(FOREIGN).run().await;
    let report = allowed.expect("redrive");
    assert_eq!(report.moved.len(), 1);
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(broker.messages(FOREIGN)[0].text(), "forged");
}
