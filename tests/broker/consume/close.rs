//! Closing a consumer: an ack made while the close runs reaches the broker
//! before the consumer closes, or fails; none returns `Ok` and is lost.

use super::*;

#[tokio::test]
async fn acks_made_while_the_consumer_closes_reach_the_broker_or_fail() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("acks during close", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-close-acks");
        let mut c = shared(&client, &topic, "s", 1000).await;
        let mut producer = RawProducer::create(&client, &topic).await;
        let all: Vec<String> = (0..200).map(|i| format!("m{i:03}")).collect();
        for t in &all {
            producer.send(t).await;
        }
        let got = take(&mut c, all.len()).await;
        let acker = c.clone();
        let acks = async {
            let mut results = Vec::with_capacity(got.len());
            for m in &got {
                results.push(acker.ack(m).await);
                // Other work in between, as an application's handlers do:
                // the acks spread over the close.
                tokio::task::yield_now().await;
            }
            results
        };
        let (closed, results) = tokio::join!(c.close(), acks);
        closed.expect("close");
        let acked: BTreeSet<String> = got
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .map(|(m, _)| text(m))
            .collect();
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(matches!(r, ConsumerError::Closed), "{r}");
        }
        // Exactly the messages whose ack failed come to the next consumer,
        // and then the next message sent.
        let mut next = shared(&client, &topic, "s", 1000).await;
        producer.send("end").await;
        let mut again = BTreeSet::new();
        loop {
            let m = next.receive().await.expect("receive");
            if text(&m) == "end" {
                break;
            }
            assert!(
                !acked.contains(&text(&m)),
                "{} was acked Ok and came back",
                text(&m)
            );
            next.ack(&m).await.expect("ack");
            again.insert(text(&m));
        }
        let unacked: BTreeSet<String> = all
            .iter()
            .filter(|t| !acked.contains(*t))
            .cloned()
            .collect();
        assert_eq!(again, unacked, "the messages whose ack failed, each once");
        next.close().await.expect("close");
    })
    .await;
}
