//! Chunked messages between pulsar-wire and the official client (PyPI
//! `pulsar-client`): a 12 MiB payload, over the broker's 5 MiB message
//! size, sent in chunks by one client arrives whole at the other, and an
//! ack of it acks every chunk.

use pulsar_wire::MessageId;
use serde_json::Value;

use crate::common::broker::client;
use crate::common::broker::{BrokerKind, TestBroker, skip_unless};
use crate::common::{guard, init_tracing, unique_topic};
use crate::consume::shared_consumer;
use crate::produce::python;

/// 12 MiB: bytes 0..=255 over and over.
const SIZE: usize = 12 << 20;

fn big_payload() -> Vec<u8> {
    (0..SIZE).map(|i| i as u8).collect()
}

/// Sends the 12 MiB payload in chunks, unbatched.
const PRODUCE_CHUNKED: &str = r#"
import json, sys, pulsar
client = pulsar.Client(sys.argv[1])
producer = client.create_producer(sys.argv[2], chunking_enabled=True, batching_enabled=False)
mid = producer.send(bytes(range(256)) * (int(sys.argv[3]) // 256))
print(json.dumps({"id": str(mid)}), flush=True)
client.close()
"#;

/// Sends a plain `end` marker, then reads subscription `argv[3]` up to it,
/// printing the size of each message before it.
const READ_UP_TO_END: &str = r#"
import json, sys, pulsar
client = pulsar.Client(sys.argv[1])
consumer = client.subscribe(sys.argv[2], sys.argv[3], consumer_type=pulsar.ConsumerType.Shared,
                            initial_position=pulsar.InitialPosition.Earliest)
client.create_producer(sys.argv[2]).send(b"end")
while True:
    m = consumer.receive(timeout_millis=30000)
    consumer.acknowledge(m)
    if m.data() == b"end":
        break
    print(json.dumps({"size": len(m.data())}), flush=True)
client.close()
"#;

/// What the official client read from `subscription` before the marker.
async fn read_up_to_end(url: &str, topic: &str, subscription: &str) -> Vec<Value> {
    let args = [url.to_owned(), topic.to_owned(), subscription.to_owned()];
    python(READ_UP_TO_END, &args).await
}

#[tokio::test]
async fn a_chunked_message_from_the_official_client_arrives_whole_and_is_acked_whole() {
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let topic = unique_topic("interop-chunks-in");
    guard("chunked from the official client", async {
        let client = client(&broker).await;
        // Shared: pulsar-lite fails chunked messages on Exclusive.
        let mut consumer = shared_consumer(&client, &topic, "wire", |b| b).await;
        let url = broker.service_url();
        python(
            PRODUCE_CHUNKED,
            &[url.clone(), topic.clone(), SIZE.to_string()],
        )
        .await;

        let m = consumer.receive().await.expect("receive");
        assert_eq!(m.payload().len(), SIZE, "the whole payload");
        assert!(m.payload()[..] == big_payload()[..], "the same bytes");
        consumer.ack(&m).await.expect("ack");
        consumer.close().await.expect("close");

        // Every chunk was acked: nothing before the marker.
        let left = read_up_to_end(&url, &topic, "wire").await;
        assert!(left.is_empty(), "left in the subscription: {left:?}");
    })
    .await;
}

/// Reads one message from `argv[2]` (from the earliest), printing its size,
/// whether its bytes are 0..=255 over and over, and its id.
const READ_ONE: &str = r#"
import json, sys, pulsar
client = pulsar.Client(sys.argv[1])
consumer = client.subscribe(sys.argv[2], "official", consumer_type=pulsar.ConsumerType.Shared,
                            initial_position=pulsar.InitialPosition.Earliest)
m = consumer.receive(timeout_millis=30000)
consumer.acknowledge(m)
data = m.data()
print(json.dumps({"size": len(data), "intact": data == bytes(range(256)) * (len(data) // 256),
                  "id": str(m.message_id())}), flush=True)
client.close()
"#;

#[tokio::test]
async fn a_message_pulsar_wire_sends_in_chunks_reaches_the_official_client_whole() {
    chunked_to_the_official_client("interop-chunks-out", None).await;
}

#[tokio::test]
async fn chunks_of_a_size_below_the_brokers_limit_reach_the_official_client_whole() {
    if skip_unless(
        BrokerKind::Apache,
        "on pulsar-lite the official client times out reading a message of 48 chunks",
    ) {
        return;
    }
    chunked_to_the_official_client("interop-small-chunks-out", Some(256 * 1024)).await;
}

/// pulsar-wire sends [`big_payload`] chunked (in chunks of `chunk_size`,
/// if given); the official client reads it whole, under the same first and last chunk.
async fn chunked_to_the_official_client(name: &str, chunk_size: Option<usize>) {
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let topic = unique_topic(name);
    guard("chunked to the official client", async {
        let client = client(&broker).await;
        let mut builder = client.producer(&topic).chunking(true);
        if let Some(size) = chunk_size {
            builder = builder.chunk_size(size);
        }
        let producer = builder.create().await.expect("producer");
        let id = producer
            .send(big_payload())
            .await
            .expect("queued")
            .await
            .expect("stored");
        producer.close().await.expect("close");

        let read = python(READ_ONE, &[broker.service_url(), topic.clone()]).await;
        let [m] = &read[..] else {
            panic!("one message: {read:?}")
        };
        assert_eq!(m["size"], SIZE);
        assert_eq!(m["intact"], true, "the same bytes");
        // The official client shows a chunked message's id as
        // "(ledger,entry,partition,batch);(…last chunk…)": ours names the
        // same two chunks.
        let ids = m["id"].as_str().expect("id");
        let (first, last) = ids
            .split_once(';')
            .unwrap_or_else(|| panic!("not chunked: {m}"));
        let text = |id: MessageId| format!("({},{},-1,-1)", id.ledger_id, id.entry_id);
        assert_eq!(first, text(id.first_chunk().expect("a chunked id")));
        assert_eq!(last, text(id));
        if let Some(size) = chunk_size {
            // Entries of one topic, one after another: the chunks' count.
            let entry = |s: &str| -> u64 {
                s.trim_matches(|c| c == '(' || c == ')')
                    .split(',')
                    .nth(1)
                    .and_then(|e| e.parse().ok())
                    .expect("entry id")
            };
            let (chunks, fewest) = (entry(last) - entry(first) + 1, SIZE.div_ceil(size) as u64);
            assert!(
                (fewest..=fewest + 1).contains(&chunks),
                "chunks of at most {size} bytes: {ids}"
            );
        }
    })
    .await;
}
