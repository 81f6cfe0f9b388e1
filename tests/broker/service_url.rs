//! A service URL with several hosts against the real broker: the first
//! host refuses connections (a closed loopback port), the second is the
//! broker, and the client works.

use bytes::Bytes;
use pulsar_wire::consumer::{InitialPosition, SubscriptionType};

use crate::common::broker::TestBroker;
use crate::common::{guard, unique_topic};

/// A loopback port nothing listens on: free, and reserved so that no
/// other test of this process is given it.
fn closed_port() -> u16 {
    crate::common::broker::reserve_addr().port()
}

#[tokio::test]
async fn a_service_url_whose_first_host_refuses_connections_still_works() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = format!("pulsar://127.0.0.1:{},{}", closed_port(), broker.addr());
    guard("several hosts", async {
        let client = crate::common::client_at(&url).await;
        let topic = unique_topic("service-hosts");
        let mut consumer = client
            .consumer(topic.as_str(), "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("subscribe");
        let producer = client
            .producer(topic.as_str())
            .create()
            .await
            .expect("producer");
        let id = producer
            .send("through the second host")
            .await
            .expect("send")
            .await
            .expect("receipt");
        let msg = consumer.receive().await.expect("receive");
        assert_eq!(
            (msg.id(), msg.payload()),
            (id, &Bytes::from_static(b"through the second host"))
        );
        consumer.ack(&msg).await.expect("ack");
        client.close().await;
    })
    .await;
}
