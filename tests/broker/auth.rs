//! Token authentication against the real broker (pulsar-lite accepts any
//! token, so this checks what the client does, not the broker's verdict):
//! with every log at TRACE captured, a full connect / metadata / lookup /
//! produce / consume run never prints the token, nor does `Debug`.

use bytes::Bytes;
use pulsar_wire::auth::TokenAuthentication;
use pulsar_wire::connection::{ConsumerEvent, ProducerEvent};
use pulsar_wire::consumer::{InitialPosition, SubscriptionType};
use pulsar_wire::{Client, TopicName};

use crate::client::producer_and_consumer;
use crate::common::broker::TestBroker;
use crate::common::{capture_logs, guard, unique_topic};

const TOKEN: &str = "eyJhbGciOiJIUzI1NiJ9.c3ViamVjdA.TOP-SECRET-SIGNATURE";

#[tokio::test]
async fn a_full_run_at_trace_never_prints_the_token() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let run = async {
        let client = Client::builder()
            .service_url(broker.service_url())
            .authentication(TokenAuthentication::from_token(TOKEN))
            .build()
            .await
            .expect("client with a token");
        let name = unique_topic("auth-logs");
        let topic: TopicName = name.parse().expect("topic");
        assert_eq!(
            client
                .partitioned_topic_metadata(&topic)
                .await
                .expect("metadata"),
            0
        );
        let conn = client.lookup(&topic).await.expect("lookup");
        let mut pair = producer_and_consumer(&conn, name.clone()).await;
        assert!(matches!(
            pair.receipts.recv().await,
            Some(ProducerEvent::Receipt { .. })
        ));
        match pair.messages.recv().await {
            Some(ConsumerEvent::Message { payload, .. }) => {
                assert_eq!(payload.data, Bytes::from(name.clone()));
            }
            other => panic!("{other:?}"),
        }
        // The same through the Producer and Consumer handles, whose tasks log too.
        let producer = client
            .producer(name.clone())
            .create()
            .await
            .expect("producer");
        let id = producer
            .send("through the handles")
            .await
            .expect("send")
            .await
            .expect("receipt");
        let mut consumer = client
            .consumer(name.clone(), "auth-logs")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("consumer");
        loop {
            let msg = consumer.receive().await.expect("receive");
            consumer.ack(&msg).await.expect("ack");
            if msg.id() == id {
                break;
            }
        }
        let debug = format!("{client:?} {conn:?} {producer:?} {consumer:?}");
        consumer.close().await.expect("close consumer");
        producer.close().await.expect("close producer");
        client.close().await;
        debug
    };
    let (debug, logs) = capture_logs(guard("token run", run)).await;
    assert!(
        logs.contains("connected"),
        "TRACE logs were captured: {logs}"
    );
    assert!(
        !logs.contains("TOP-SECRET"),
        "the token leaked into the logs:\n{logs}"
    );
    assert!(
        !debug.contains("TOP-SECRET"),
        "the token leaked into Debug: {debug}"
    );
}
