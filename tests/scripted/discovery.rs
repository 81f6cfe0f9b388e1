//! Topics that change, against the scripted broker (paused clock): the
//! partition check (PARTITIONED_METADATA on a timer, none while nothing is
//! partitioned; a shrink or an error ignored) for consumers and producers,
//! and a pattern consumer polling GET_TOPICS_OF_NAMESPACE with the topics
//! hash on a broker without topic-list watchers: a new topic joined from
//! its first message, a deleted one left; and on a broker with them, a
//! WATCH_TOPIC_LIST set up at once, whose updates are acted on as they
//! come, closed with the consumer. `discovery_churn.rs`: what a pattern
//! consumer keeps of topics that came and went.

use std::collections::BTreeMap;
use std::time::Duration;

use pulsar_wire::Message;
use pulsar_wire::consumer::{Consumer, ConsumerBuilder, SubscriptionType};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_get_topics_of_namespace::Mode;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::proto::command_subscribe::InitialPosition;
use pulsar_wire::proto::{self, BaseCommand, ServerError};
use pulsar_wire::wire::Checksum;

use crate::common::fake_broker::{
    FakeBroker, FakeListener, FakeNetwork, answer, request_id, topic_of,
};
use crate::common::{assert_listing_timed_out, guard, guard_for, init_tracing};
use crate::consume::{message, scripted_client as client};
use crate::produce::producer_success;

#[path = "discovery_churn.rs"]
mod churn;

const SERVICE: &str = "svc:6650";
const TOPIC: &str = "persistent://public/default/growing";
const EVERY: Duration = Duration::from_secs(10);

/// Expects PARTITIONED_METADATA for `topic` and answers `partitions`.
async fn metadata(broker: &mut FakeBroker, topic: &str, partitions: u32) {
    let meta = broker.expect(Type::PartitionedMetadata).await;
    assert_eq!(topic_of(&meta), topic);
    broker
        .send(answer::partitions(request_id(&meta), partitions))
        .await;
}

/// Answers LOOKUP request `request`: the topic is here.
async fn answer_lookup(broker: &mut FakeBroker, request: u64) {
    let here = format!("pulsar://{SERVICE}");
    let reply = answer::lookup(request, LookupType::Connect, &here, true);
    broker.send(reply).await;
}

/// Answers LOOKUPs and SUBSCRIBEs until `flows` FLOWs came; returns, per
/// topic subscribed, its consumer id and initial position.
async fn attach_all(broker: &mut FakeBroker, flows: usize) -> BTreeMap<String, (u64, i32)> {
    let mut subscribed = BTreeMap::new();
    let mut seen = 0;
    while seen < flows {
        let frame = broker.recv().await.expect("open");
        match frame.command.r#type() {
            Type::Lookup => answer_lookup(broker, request_id(&frame)).await,
            Type::Subscribe => {
                let body = frame.command.subscribe.as_ref().expect("body");
                let position = body.initial_position.unwrap_or_default();
                subscribed.insert(body.topic.clone(), (body.consumer_id, position));
                broker.send(answer::success(body.request_id)).await;
            }
            Type::Flow => seen += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    subscribed
}

/// Subscribes to `topic` (`partitions` partitions) with `setup`, playing
/// the broker; returns the consumer, the broker and the consumer ids.
async fn consumer_of(
    net: &FakeNetwork,
    partitions: u32,
    setup: impl FnOnce(ConsumerBuilder) -> ConsumerBuilder + Send + 'static,
) -> (Consumer, FakeBroker, BTreeMap<String, (u64, i32)>) {
    init_tracing();
    let mut svc = net.listen(SERVICE);
    let net = net.clone();
    let subscribing = tokio::spawn(async move {
        let client = client(&net).await;
        setup(client.consumer(TOPIC, "sub")).subscribe().await
    });
    let mut broker = svc.accept().await;
    broker.handshake().await;
    metadata(&mut broker, TOPIC, partitions).await;
    let ids = attach_all(&mut broker, partitions.max(1) as usize).await;
    let consumer = subscribing.await.expect("task").expect("subscribe");
    (consumer, broker, ids)
}

#[tokio::test(start_paused = true)]
async fn a_consumer_joins_partitions_added_later_and_ignores_a_shrink_or_an_error() {
    let net = FakeNetwork::new();
    guard("partitions added", async {
        let (mut consumer, mut broker, first) = consumer_of(&net, 2, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .auto_update_partitions_interval(EVERY)
        })
        .await;
        assert_eq!(first.len(), 2);
        // The check: a third partition, subscribed from its first message.
        metadata(&mut broker, TOPIC, 3).await;
        let added = attach_all(&mut broker, 1).await;
        let new = format!("{TOPIC}-partition-2");
        let (id, position) = added[&new];
        assert_eq!(position, InitialPosition::Earliest as i32);
        // A shrink and an error are ignored; the checks go on.
        metadata(&mut broker, TOPIC, 1).await;
        let meta = broker.expect(Type::PartitionedMetadata).await;
        let refused = answer::error(request_id(&meta), ServerError::ServiceNotReady, "busy");
        broker.send(refused).await;
        metadata(&mut broker, TOPIC, 3).await;
        assert_eq!(consumer.topics().len(), 3, "{:?}", consumer.topics());
        assert!(consumer.topics().contains(&new));
        // Messages of the new partition reach the application.
        let msg = delivered(&mut broker, &mut consumer, id, "new", &new).await;
        assert_eq!(msg.payload().as_ref(), b"new");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn nothing_partitioned_means_no_partition_check() {
    let net = FakeNetwork::new();
    guard_for("no check", EVERY * 100, async {
        let (mut consumer, mut broker, ids) =
            consumer_of(&net, 0, |b| b.auto_update_partitions_interval(EVERY)).await;
        let (id, _) = ids[TOPIC];
        tokio::time::advance(EVERY * 30).await;
        broker
            .send_frame(message(id, 0, "one", Checksum::Absent))
            .await;
        consumer.receive().await.expect("message");
        let close = consumer.close();
        let script = async {
            // The next frame is the close: no PARTITIONED_METADATA came.
            let frame = broker.expect(Type::CloseConsumer).await;
            let body = frame.command.close_consumer.as_ref().expect("body");
            broker.send(answer::success(body.request_id)).await;
        };
        let (closed, ()) = tokio::join!(close, script);
        closed.expect("close");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_producer_sends_to_partitions_added_later() {
    let net = FakeNetwork::new();
    init_tracing();
    let mut svc = net.listen(SERVICE);
    guard("producer partitions added", async {
        let net = net.clone();
        let creating = tokio::spawn(async move {
            client(&net)
                .await
                .producer(TOPIC)
                .batching(false)
                .auto_update_partitions_interval(EVERY)
                .create()
                .await
        });
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, TOPIC, 2).await;
        let mut producers = create_producers(&mut broker, 2).await;
        let producer = creating.await.expect("task").expect("create");
        metadata(&mut broker, TOPIC, 3).await;
        producers.extend(create_producers(&mut broker, 1).await);
        let new = format!("{TOPIC}-partition-2");
        assert!(producers.contains_key(&new), "{producers:?}");
        // The next check (answered as it stands) comes after the new
        // producer joined the router.
        metadata(&mut broker, TOPIC, 3).await;
        assert_eq!(producer.partitions(), 3);
        // Round-robin: three sends reach three partitions, the new one too.
        let mut sent_to = Vec::new();
        for i in 0..3 {
            let receipt = producer.send(format!("m{i}")).await.expect("queued");
            let send = broker.expect(Type::Send).await;
            let body = send.command.send.as_ref().expect("body");
            sent_to.push(body.producer_id);
            let r = answer::receipt(body.producer_id, body.sequence_id);
            broker.send(r).await;
            receipt.await.expect("stored");
        }
        assert!(
            sent_to.contains(&producers[&new]),
            "{sent_to:?} {producers:?}"
        );
    })
    .await;
}

/// Answers LOOKUPs and PRODUCERs until `n` producers exist; returns their
/// ids by topic.
async fn create_producers(broker: &mut FakeBroker, n: usize) -> BTreeMap<String, u64> {
    let mut made = BTreeMap::new();
    while made.len() < n {
        let frame = broker.recv().await.expect("open");
        match frame.command.r#type() {
            Type::Lookup => answer_lookup(broker, request_id(&frame)).await,
            Type::Producer => {
                let body = frame.command.producer.as_ref().expect("body");
                made.insert(body.topic.clone(), body.producer_id);
                let name = format!("p-{}", body.producer_id);
                broker
                    .send(producer_success(body.request_id, &name, -1))
                    .await;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    made
}

const PATTERN: &str = "persistent://public/default/pat-.*";

fn topics_answer(request: u64, topics: &[&str], hash: &str, changed: bool) -> BaseCommand {
    BaseCommand {
        r#type: Type::GetTopicsOfNamespaceResponse as i32,
        get_topics_of_namespace_response: Some(Box::new(
            proto::CommandGetTopicsOfNamespaceResponse {
                request_id: request,
                topics: topics.iter().map(|t| (*t).to_owned()).collect(),
                filtered: Some(false),
                topics_hash: Some(hash.to_owned()),
                changed: Some(changed),
            },
        )),
        ..BaseCommand::default()
    }
}

/// Expects GET_TOPICS_OF_NAMESPACE asked with `hash`; returns its request id.
async fn expect_listing(broker: &mut FakeBroker, hash: Option<&str>) -> u64 {
    let frame = broker.expect(Type::GetTopicsOfNamespace).await;
    let body = frame
        .command
        .get_topics_of_namespace
        .as_ref()
        .expect("body");
    assert_eq!(body.namespace, "public/default");
    assert_eq!(body.mode, Some(Mode::Persistent as i32));
    assert_eq!(body.topics_pattern.as_deref(), Some(PATTERN));
    assert_eq!(body.topics_hash.as_deref(), hash);
    body.request_id
}

/// Subscribes a Shared pattern consumer of [`PATTERN`], listing every
/// [`EVERY`], in the background.
fn subscribe_pattern(
    net: &FakeNetwork,
) -> tokio::task::JoinHandle<Result<Consumer, pulsar_wire::ConsumerError>> {
    subscribe_pattern_with(net, |b| b)
}

/// As [`subscribe_pattern`], the builder set up further by `setup`.
fn subscribe_pattern_with(
    net: &FakeNetwork,
    setup: impl FnOnce(ConsumerBuilder) -> ConsumerBuilder + Send + 'static,
) -> tokio::task::JoinHandle<Result<Consumer, pulsar_wire::ConsumerError>> {
    let net = net.clone();
    tokio::spawn(async move {
        let builder = client(&net)
            .await
            .consumer_pattern(PATTERN, "sub")
            .subscription_type(SubscriptionType::Shared)
            .pattern_auto_discovery_period(EVERY)
            .auto_update_partitions(false);
        setup(builder).subscribe().await
    })
}

fn full(local: &str) -> String {
    format!("persistent://public/default/{local}")
}

/// The broker sends one message to consumer `id`; the application gets it,
/// from `topic`.
async fn delivered(
    broker: &mut FakeBroker,
    consumer: &mut Consumer,
    id: u64,
    payload: &'static str,
    topic: &str,
) -> Message {
    broker
        .send_frame(message(id, 0, payload, Checksum::Absent))
        .await;
    let msg = consumer.receive().await.expect("message");
    assert_eq!(msg.topic(), topic);
    msg
}

#[tokio::test(start_paused = true)]
async fn a_pattern_consumer_polls_joins_new_topics_and_leaves_deleted_ones() {
    let net = FakeNetwork::new();
    init_tracing();
    let mut svc = net.listen(SERVICE);
    guard("pattern polling", async {
        let subscribing = subscribe_pattern(&net);
        let mut broker = svc.accept().await;
        // No feature flags: no topic-list watchers, so the consumer polls.
        broker.handshake().await;
        let request = expect_listing(&mut broker, None).await;
        let (a, other) = (full("pat-a"), full("other"));
        let listing = topics_answer(request, &[&a, &other], "h1", true);
        broker.send(listing).await;
        metadata(&mut broker, &a, 0).await;
        let first = attach_all(&mut broker, 1).await;
        let (a_id, _) = first[&a];
        let mut consumer = subscribing.await.expect("task").expect("subscribe");
        assert_eq!(consumer.topics(), std::slice::from_ref(&a));

        // A partitioned topic appears: both partitions joined, from their
        // first message.
        let request = expect_listing(&mut broker, Some("h1")).await;
        let (b0, b1) = (full("pat-b-partition-0"), full("pat-b-partition-1"));
        let listing = topics_answer(request, &[&a, &b0, &b1, &other], "h2", true);
        broker.send(listing).await;
        metadata(&mut broker, &full("pat-b"), 2).await;
        let added = attach_all(&mut broker, 2).await;
        assert_eq!(added.keys().collect::<Vec<_>>(), [&b0, &b1]);
        assert!(
            added
                .values()
                .all(|(_, p)| *p == InitialPosition::Earliest as i32)
        );

        // pat-a is deleted: its subscription is closed.
        let request = expect_listing(&mut broker, Some("h2")).await;
        let listing = topics_answer(request, &[&b0, &b1, &other], "h3", true);
        broker.send(listing).await;
        let close = broker.expect(Type::CloseConsumer).await;
        let body = close.command.close_consumer.as_ref().expect("body");
        assert_eq!(body.consumer_id, a_id);
        broker.send(answer::success(body.request_id)).await;

        // Unchanged: the broker lists nothing, and nothing changes.
        let request = expect_listing(&mut broker, Some("h3")).await;
        broker.send(topics_answer(request, &[], "h3", false)).await;
        let request = expect_listing(&mut broker, Some("h3")).await;
        broker.send(topics_answer(request, &[], "h3", false)).await;
        assert_eq!(consumer.topics(), [b0.clone(), b1.clone()]);

        let (b1_id, _) = added[&b1];
        delivered(&mut broker, &mut consumer, b1_id, "from b", &b1).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_pattern_the_broker_never_lists_fails_with_a_timeout_naming_the_request() {
    let net = FakeNetwork::new();
    init_tracing();
    let mut svc = net.listen(SERVICE);
    guard("pattern unanswered", async {
        let net = net.clone();
        let subscribing = tokio::spawn(async move {
            let client = client(&net).await;
            client.consumer_pattern(PATTERN, "sub").subscribe().await
        });
        let mut broker = svc.accept().await;
        broker.handshake().await;
        expect_listing(&mut broker, None).await;
        // As pulsar-lite: no answer at all.
        let result = subscribing.await.expect("task");
        assert_listing_timed_out(result, PATTERN);
    })
    .await;
}

/// CONNECTED from a broker with topic-list watchers (Apache Pulsar 2.11+).
fn connected_with_watchers() -> BaseCommand {
    BaseCommand {
        r#type: Type::Connected as i32,
        connected: Some(Box::new(proto::CommandConnected {
            server_version: "fake-broker".into(),
            protocol_version: Some(21),
            max_message_size: None,
            feature_flags: Some(proto::FeatureFlags {
                supports_topic_watchers: Some(true),
                ..proto::FeatureFlags::default()
            }),
        })),
        ..BaseCommand::default()
    }
}

fn watch_update(watcher: u64, new: &[&str], deleted: &[&str], hash: &str) -> BaseCommand {
    let owned = |names: &[&str]| names.iter().map(|t| (*t).to_owned()).collect();
    BaseCommand {
        r#type: Type::WatchTopicUpdate as i32,
        watch_topic_update: Some(Box::new(proto::CommandWatchTopicUpdate {
            watcher_id: watcher,
            new_topics: owned(new),
            deleted_topics: owned(deleted),
            topics_hash: hash.to_owned(),
        })),
        ..BaseCommand::default()
    }
}

/// WATCH_TOPIC_LIST_SUCCESS for watch request `watch`: `topics`, `hash`.
fn watching(watch: &proto::CommandWatchTopicList, topics: &[&str], hash: &str) -> BaseCommand {
    BaseCommand {
        r#type: Type::WatchTopicListSuccess as i32,
        watch_topic_list_success: Some(Box::new(proto::CommandWatchTopicListSuccess {
            request_id: watch.request_id,
            watcher_id: watch.watcher_id,
            topic: topics.iter().map(|t| (*t).to_owned()).collect(),
            topics_hash: hash.to_owned(),
        })),
        ..BaseCommand::default()
    }
}

/// A pattern consumer reading `pat-a` on a broker with topic-list
/// watchers, its watcher set; returns the consumer, the broker, `pat-a`'s
/// consumer id and the watcher id.
async fn watched(net: &FakeNetwork, svc: &mut FakeListener) -> (Consumer, FakeBroker, u64, u64) {
    watched_with(net, svc, |b| b).await
}

/// As [`watched`], the builder set up further by `setup`.
async fn watched_with(
    net: &FakeNetwork,
    svc: &mut FakeListener,
    setup: impl FnOnce(ConsumerBuilder) -> ConsumerBuilder + Send + 'static,
) -> (Consumer, FakeBroker, u64, u64) {
    let subscribing = subscribe_pattern_with(net, setup);
    let mut broker = svc.accept().await;
    let connect = broker.expect(Type::Connect).await;
    let flags = connect.command.connect.as_ref().expect("body");
    let flags = flags.feature_flags.as_ref().expect("flags");
    assert_eq!(flags.supports_topic_watchers, Some(true));
    broker.send(connected_with_watchers()).await;
    let request = expect_listing(&mut broker, None).await;
    let a = full("pat-a");
    broker.send(topics_answer(request, &[&a], "h1", true)).await;
    metadata(&mut broker, &a, 0).await;
    let first = attach_all(&mut broker, 1).await;
    let (a_id, _) = first[&a];
    let consumer = subscribing.await.expect("task").expect("subscribe");

    // At once, a watcher for the pattern, with what the consumer knows.
    let watch = broker.expect(Type::WatchTopicList).await;
    let body = watch.command.watch_topic_list.as_ref().expect("body");
    assert_eq!(body.namespace, "public/default");
    assert_eq!(body.topics_pattern, PATTERN);
    assert_eq!(body.topics_hash.as_deref(), Some("h1"));
    broker.send(watching(body, &[&a], "h1")).await;
    (consumer, broker, a_id, body.watcher_id)
}

#[tokio::test(start_paused = true)]
async fn a_pattern_consumer_follows_the_brokers_topic_list_watcher() {
    let net = FakeNetwork::new();
    init_tracing();
    let mut svc = net.listen(SERVICE);
    guard("pattern watcher", async {
        let (mut consumer, mut broker, a_id, watcher) = watched(&net, &mut svc).await;
        let a = full("pat-a");

        // Created: joined from its first message, before any listing is due.
        let c = full("pat-c");
        let other = full("other");
        broker
            .send(watch_update(watcher, &[&c, &other], &[], "h2"))
            .await;
        metadata(&mut broker, &c, 0).await;
        let added = attach_all(&mut broker, 1).await;
        assert_eq!(added.keys().collect::<Vec<_>>(), [&c]);
        let (c_id, position) = added[&c];
        assert_eq!(position, InitialPosition::Earliest as i32);

        // Deleted: its subscription is closed.
        broker.send(watch_update(watcher, &[], &[&a], "h3")).await;
        let close = broker.expect(Type::CloseConsumer).await;
        let body = close.command.close_consumer.as_ref().expect("body");
        assert_eq!(body.consumer_id, a_id);
        broker.send(answer::success(body.request_id)).await;

        // The listing goes on beside the watcher, with the watcher's hash.
        let request = expect_listing(&mut broker, Some("h3")).await;
        broker.send(topics_answer(request, &[], "h3", false)).await;
        assert_eq!(consumer.topics(), std::slice::from_ref(&c));

        delivered(&mut broker, &mut consumer, c_id, "from c", &c).await;

        // Closing the consumer closes the watcher too.
        let close = consumer.close();
        let script = async {
            let mut watcher_closed = false;
            let mut consumer_closed = false;
            while !(watcher_closed && consumer_closed) {
                let frame = broker.recv().await.expect("open");
                match frame.command.r#type() {
                    Type::CloseConsumer => {
                        let body = frame.command.close_consumer.as_ref().expect("body");
                        assert_eq!(body.consumer_id, c_id);
                        consumer_closed = true;
                        broker.send(answer::success(body.request_id)).await;
                    }
                    Type::WatchTopicListClose => {
                        let body = frame.command.watch_topic_list_close.as_ref().expect("body");
                        assert_eq!(body.watcher_id, watcher);
                        watcher_closed = true;
                        broker.send(answer::success(body.request_id)).await;
                    }
                    Type::Ack | Type::Flow => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
        };
        let (closed, ()) = tokio::join!(close, script);
        closed.expect("close");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_lost_watcher_is_set_again_at_once_and_catches_up_with_its_hash() {
    let net = FakeNetwork::new();
    init_tracing();
    let mut svc = net.listen(SERVICE);
    guard("watcher lost", async {
        let (mut consumer, broker, _, _) = watched(&net, &mut svc).await;
        let (a, c) = (full("pat-a"), full("pat-c"));
        // The connection dies; pat-c is created while no watcher runs.
        drop(broker);
        let lost_at = tokio::time::Instant::now();
        let mut broker = svc.accept().await;
        broker.expect(Type::Connect).await;
        broker.send(connected_with_watchers()).await;
        // In any order: pat-a subscribed again, the watcher set again with
        // the last hash (its answer lists pat-c), pat-c joined.
        let mut watched_again = false;
        let mut subscribed = BTreeMap::new();
        let mut flows = 0;
        while !(watched_again && flows == 2) {
            let frame = broker.recv().await.expect("open");
            match frame.command.r#type() {
                Type::Lookup => answer_lookup(&mut broker, request_id(&frame)).await,
                Type::WatchTopicList => {
                    let body = frame.command.watch_topic_list.as_ref().expect("body");
                    assert_eq!(body.topics_hash.as_deref(), Some("h1"));
                    // Not at the next check (paused clock): at once.
                    assert!(lost_at.elapsed() < EVERY, "{:?}", lost_at.elapsed());
                    broker.send(watching(body, &[&a, &c], "h2")).await;
                    watched_again = true;
                }
                Type::PartitionedMetadata => {
                    assert_eq!(topic_of(&frame), c);
                    broker.send(answer::partitions(request_id(&frame), 0)).await;
                }
                Type::Subscribe => {
                    let body = frame.command.subscribe.as_ref().expect("body");
                    subscribed.insert(body.topic.clone(), body.consumer_id);
                    broker.send(answer::success(body.request_id)).await;
                }
                Type::Flow => flows += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(subscribed.keys().collect::<Vec<_>>(), [&a, &c]);
        delivered(
            &mut broker,
            &mut consumer,
            subscribed[&c],
            "made meanwhile",
            &c,
        )
        .await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_listing_overtaken_by_a_watcher_update_is_stale_and_ignored() {
    let net = FakeNetwork::new();
    init_tracing();
    let mut svc = net.listen(SERVICE);
    guard("stale listing", async {
        let (mut consumer, mut broker, _, watcher) = watched(&net, &mut svc).await;
        let (a, c) = (full("pat-a"), full("pat-c"));
        // The periodic listing is asked; the watcher reports pat-c before
        // its answer, which was made before pat-c existed.
        let request = expect_listing(&mut broker, Some("h1")).await;
        broker.send(watch_update(watcher, &[&c], &[], "h2")).await;
        broker.send(topics_answer(request, &[&a], "h1", true)).await;
        // pat-c is joined all the same, and the next listing asks with the
        // watcher's hash.
        metadata(&mut broker, &c, 0).await;
        let added = attach_all(&mut broker, 1).await;
        let (c_id, _) = added[&c];
        let request = expect_listing(&mut broker, Some("h2")).await;
        broker.send(topics_answer(request, &[], "h2", false)).await;
        delivered(&mut broker, &mut consumer, c_id, "c", &c).await;
        let read: std::collections::BTreeSet<String> = consumer.topics().into_iter().collect();
        assert_eq!(read, [a, c].into_iter().collect());
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_pattern_that_matches_nothing_yet_waits_for_its_first_topic() {
    let net = FakeNetwork::new();
    init_tracing();
    let mut svc = net.listen(SERVICE);
    guard("pattern empty at first", async {
        let subscribing = subscribe_pattern(&net);
        let mut broker = svc.accept().await;
        broker.handshake().await;
        let request = expect_listing(&mut broker, None).await;
        broker.send(topics_answer(request, &[], "h0", true)).await;
        let mut consumer = subscribing.await.expect("task").expect("subscribe");
        assert!(consumer.topics().is_empty());
        // No watchers: the next listing is asked at once, then every EVERY.
        let receiving = tokio::spawn(async move {
            let msg = consumer.receive().await;
            (consumer, msg)
        });
        let request = expect_listing(&mut broker, Some("h0")).await;
        broker.send(topics_answer(request, &[], "h0", false)).await;
        let request = expect_listing(&mut broker, Some("h0")).await;
        let a = full("pat-a");
        broker.send(topics_answer(request, &[&a], "h1", true)).await;
        metadata(&mut broker, &a, 0).await;
        let added = attach_all(&mut broker, 1).await;
        broker
            .send_frame(message(added[&a].0, 0, "first", Checksum::Absent))
            .await;
        let (consumer, msg) = receiving.await.expect("task");
        assert_eq!(msg.expect("message").topic(), a);
        assert_eq!(consumer.topics(), std::slice::from_ref(&a));
    })
    .await;
}
