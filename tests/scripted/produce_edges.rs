//! Numbers at the edge of their type from the broker or the user: the
//! producer saturates, never panics. And the broker's answer for a
//! duplicate, position (-1, -1), is a success whose id says so.

use std::time::Duration;

use super::*;

#[tokio::test(start_paused = true)]
async fn the_largest_last_sequence_id_continues_without_overflow() {
    guard("last sequence id", async {
        let (producer, mut broker) = producer(None, i64::MAX).await;
        let _receipt = producer.send("a").await.expect("queued");
        let (_, seq) = send_of(&broker.expect(Type::Send).await);
        assert_eq!(seq, 1 << 63, "last_sequence_id + 1");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_batching_delay_of_duration_max_is_accepted() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("huge batching delay", async {
        let create = async {
            let client = super::super::consume::scripted_client(&net).await;
            client
                .producer("orders")
                .batching_max_delay(Duration::MAX)
                .send_timeout(Duration::MAX)
                .create()
                .await
        };
        let script = async {
            let mut broker = svc.accept().await;
            broker.handshake().await;
            let meta = broker.expect(Type::PartitionedMetadata).await;
            broker.send(answer::partitions(request_id(&meta), 0)).await;
            let lookup = broker.expect(Type::Lookup).await;
            let url = format!("pulsar://{SERVICE}");
            let found = answer::lookup(request_id(&lookup), LookupType::Connect, &url, true);
            broker.send(found).await;
            let create = broker.expect(Type::Producer).await;
            let created = producer_success(request_id(&create), "p-1", -1);
            broker.send(created).await;
            broker
        };
        let (producer, mut broker) = tokio::join!(create, script);
        let producer = producer.expect("created");
        let receipt = producer.send("a").await.expect("queued");
        // The batch would wait "forever": flush sends it now.
        let (flushed, ()) = tokio::join!(producer.flush(), async {
            let (id, seq) = send_of(&broker.expect(Type::Send).await);
            broker.send(answer::receipt(id, seq)).await;
        });
        flushed.expect("flushed");
        receipt.await.expect("stored");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_send_the_broker_drops_as_a_duplicate_is_stored_with_an_unknown_id() {
    guard("duplicate", async {
        let (producer, mut broker) = producer(None, -1).await;
        let first = producer.send("a").await.expect("queued");
        let again = producer.send("a").await.expect("queued");
        let (id, seq) = send_of(&broker.expect(Type::Send).await);
        broker.send(answer::receipt(id, seq)).await;
        let (_, seq) = send_of(&broker.expect(Type::Send).await);
        // Deduplication on: the broker has seen it, stores nothing, and
        // answers with the position (-1, -1).
        broker.send(answer::duplicate_receipt(id, seq)).await;
        let stored = first.await.expect("stored");
        assert_eq!(stored.entry_id, seq - 1);
        assert!(!stored.is_duplicate(), "{stored}");
        let duplicate = again.await.expect("already stored: a success");
        assert!(duplicate.is_duplicate(), "{duplicate}");
        let stats = producer.stats().total;
        assert_eq!((stats.messages_sent, stats.send_failures), (2, 0));
    })
    .await;
}
