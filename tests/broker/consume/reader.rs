//! Readers: a position per partition, seek and seek by time, whether a
//! message is available, and resuming after an unload (non-durable
//! subscriptions are made anew where the reader stopped).

use pulsar_wire::Reader;
use pulsar_wire::producer::Producer;

use super::*;

async fn reader_from(client: &Client, topic: &str, start: MessageId) -> Reader {
    client
        .reader(topic)
        .start_message_id(start)
        .create()
        .await
        .expect("reader")
}

async fn read_texts(reader: &mut Reader, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(text(&reader.read_next().await.expect("read")));
    }
    out
}

async fn producer(client: &Client, topic: &str) -> Producer {
    client
        .producer(topic)
        .batching(false)
        .create()
        .await
        .expect("producer")
}

/// Sends each text and waits for its receipt.
async fn send_all(producer: &Producer, texts: impl IntoIterator<Item = String>) {
    for t in texts {
        let receipt = producer.send(t.into_bytes()).await.expect("queued");
        receipt.await.expect("receipt");
    }
}

#[tokio::test]
async fn a_partitioned_reader_reads_every_message_of_every_partition_once() {
    let topic = unique_topic("reader-partitioned");
    let Some(broker) = partitioned(&topic, 4).await else {
        return;
    };
    guard("partitioned reader", async {
        let client = client(&broker).await;
        let parsed: TopicName = topic.parse().expect("topic");
        // The last partition first: on Apache Pulsar its ledger is then
        // the oldest, so partitions' ids do not grow in the order read.
        for p in (0..4).rev() {
            let mut producer = RawProducer::create(&client, parsed.partition(p).as_str()).await;
            for i in 0..100 {
                producer.send(&format!("p{p}-{i:03}")).await;
            }
        }
        let mut reader = reader_from(&client, &topic, MessageId::EARLIEST).await;
        assert_eq!(reader.topics().len(), 4);
        assert!(reader.has_message_available().await.expect("available"));
        let mut seen = BTreeSet::new();
        let mut last = std::collections::HashMap::new();
        for _ in 0..400 {
            let m = reader.read_next().await.expect("read");
            assert!(seen.insert(text(&m)), "{} read twice", text(&m));
            if let Some(before) = last.insert(m.id().partition, text(&m)) {
                assert!(before < text(&m), "{before} then {}", text(&m));
            }
        }
        let all: BTreeSet<String> = (0..4)
            .flat_map(|p| (0..100).map(move |i| format!("p{p}-{i:03}")))
            .collect();
        assert_eq!(seen, all);
        assert!(
            !reader.has_message_available().await.expect("available"),
            "every message read"
        );
        reader.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn a_reader_seeks_by_id_and_by_time_and_knows_what_is_left() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("reader seek", async {
        let client = client(&broker).await;
        let topic = unique_topic("reader-seek");
        let producer = producer(&client, &topic).await;
        send_all(&producer, (0..10).map(|i| format!("m{i}"))).await;
        let mut reader = reader_from(&client, &topic, MessageId::EARLIEST).await;
        assert!(reader.has_message_available().await.expect("available"));
        let mut all = Vec::new();
        for _ in 0..10 {
            all.push(reader.read_next().await.expect("read"));
        }
        let texts: Vec<String> = all.iter().map(text).collect();
        assert_eq!(texts, (0..10).map(|i| format!("m{i}")).collect::<Vec<_>>());
        assert!(!reader.has_message_available().await.expect("available"));

        reader.seek(all[3].id()).await.expect("seek");
        assert!(reader.has_message_available().await.expect("available"));
        assert_eq!(read_texts(&mut reader, 2).await, ["m4", "m5"], "after m3");

        // By time: from the first message published at or after m6's time.
        let at = all[6].publish_time();
        let first = all.iter().position(|m| m.publish_time() >= at).expect("m6");
        reader.seek_to_time(at).await.expect("seek by time");
        let expected: Vec<String> = (first..10).map(|i| format!("m{i}")).collect();
        assert_eq!(read_texts(&mut reader, expected.len()).await, expected);

        reader
            .seek(MessageId::EARLIEST)
            .await
            .expect("seek to earliest");
        assert_eq!(read_texts(&mut reader, 1).await, ["m0"]);
        reader.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn a_reader_at_latest_reads_everything_across_an_unload_once() {
    if skip_unless(BrokerKind::Apache, "pulsar-lite cannot unload a topic") {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("reader across an unload", async {
        let client = client(&broker).await;
        let topic = unique_topic("reader-unload");
        let admin = std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL");
        let mut reader = reader_from(&client, &topic, MessageId::LATEST).await;
        let producer = producer(&client, &topic).await;
        let batch = |name: &'static str| (0..10).map(move |i| format!("{name}{i}"));
        send_all(&producer, batch("before")).await;
        // Half read, half still queued when the topic goes away.
        assert_eq!(
            read_texts(&mut reader, 5).await,
            batch("before").take(5).collect::<Vec<_>>()
        );
        crate::common::admin::unload_topic(&admin, &topic).await;
        send_all(&producer, batch("during")).await;
        let expected: Vec<String> = batch("before").skip(5).chain(batch("during")).collect();
        assert_eq!(read_texts(&mut reader, 15).await, expected);
        send_all(&producer, batch("after")).await;
        assert_eq!(
            read_texts(&mut reader, 10).await,
            batch("after").collect::<Vec<_>>()
        );
        assert!(
            !reader.has_message_available().await.expect("available"),
            "nothing twice"
        );
        reader.close().await.expect("close");
    })
    .await;
}

/// A reader tailing a topic that two producers write to, each over a
/// client (a connection) of its own: one sends chunked messages, the other
/// small ones, so the broker stores the chunks among the small messages,
/// which the reader reads while the chunked ones are still coming; on
/// Apache Pulsar the topic is unloaded twice meanwhile. The reader reads
/// every message once, the chunked ones whole.
#[tokio::test]
async fn a_reader_reads_chunked_messages_among_others_once_and_whole() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite fails chunked messages on Exclusive",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let progress = Progress::default();
    guard_progress("reader, interleaved chunked messages", &progress, async {
        const BIG: usize = 6;
        let topic = unique_topic("reader-chunks");
        let reading = client(&broker).await;
        let mut reader = reader_from(&reading, &topic, MessageId::LATEST).await;
        let (big_client, small_client) = (client(&broker).await, client(&broker).await);
        let chunking = big_client
            .producer(&topic)
            .chunking(true)
            .batching(false)
            .create()
            .await
            .expect("chunking producer");
        let small = producer(&small_client, &topic).await;
        // Over the broker's 5 MiB message size: three chunks each.
        let big = |i: usize| vec![b'a' + i as u8; 11 << 20];
        let done = std::sync::atomic::AtomicBool::new(false);
        let send_big = async {
            for i in 0..BIG {
                let receipt = chunking.send(big(i)).await.expect("queued");
                receipt.await.expect("stored");
                progress.tick();
                if i == 1 {
                    broker.unload(&topic).await;
                }
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        };
        // Small messages until every chunked one is stored, then "end",
        // the topic's last message.
        let send_small = async {
            let (mut sent, mut in_flight) = (0, std::collections::VecDeque::new());
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let text = format!("small-{sent}");
                in_flight.push_back(small.send(text.into_bytes()).await.expect("queued"));
                sent += 1;
                if in_flight.len() == 16 {
                    in_flight.pop_front().expect("one").await.expect("stored");
                    progress.tick();
                }
                if sent == 100 {
                    broker.unload(&topic).await;
                }
            }
            for receipt in in_flight {
                receipt.await.expect("stored");
            }
            send_all(&small, ["end".to_owned()]).await;
            sent
        };
        let read = async {
            let (mut bigs, mut smalls) = (0, Vec::new());
            loop {
                let m = reader.read_next().await.expect("read");
                progress.tick();
                if m.payload().len() > 1024 {
                    assert!(
                        m.payload()[..] == big(bigs)[..],
                        "big message {bigs} whole, in order"
                    );
                    bigs += 1;
                } else if text(&m) == "end" {
                    return (bigs, smalls);
                } else {
                    smalls.push(text(&m));
                }
            }
        };
        let ((), sent, (bigs, smalls)) = tokio::join!(send_big, send_small, read);
        assert_eq!(bigs, BIG, "every chunked message");
        let expected: Vec<String> = (0..sent).map(|i| format!("small-{i}")).collect();
        assert_eq!(smalls, expected, "every small message once, in order");
        assert!(
            !reader.has_message_available().await.expect("available"),
            "nothing after the last"
        );
        reader.close().await.expect("close");
    })
    .await;
}
